"""Algorithmic FLOPs and DRAM bytes of PyTorch ops from their input shapes.

`cost(name, args, dtype, direction)` gives a Cost for one op call, or None when no formula
applies (never a guessed 0). The counts are algorithmic, like PyProf's and
torch.utils.flop_counter's: a multiply-add counts 2 FLOPs, every input tensor is read once and
every output written once; they are not what a particular kernel does.

Inputs come from two sources:
  - emit_nvtx 'sizes' (record_shapes): one entry per input, '[]' for scalars, non-tensors and
    0-dim tensors, which are all treated as non-tensors here; no dtypes and no scalar values, so
    ops whose cost depends on a scalar argument (stride, padding, kernel size) have none.
  - PyProf argument markers: tensors with shape and dtype, scalars and tuples with their value;
    an argument a marker does not carry has its default value.

Conventions (choices, documented once here):
  - matrix products: 2*m*n*k; bytes e*(m*k + k*n + m*n); a bias or input matrix added (addmm,
    baddbmm, linear with bias) adds one FLOP and one read per output element.
  - matmul with broadcast batch dimensions multiplies by the batch (PyProf ignored it in bytes).
  - linear bytes are e*(m*n + m*k + n*k) (PyProf scaled only n*k by e: an operator-precedence bug).
  - convolution: 2*N*K*P*Q*(C/g)*R*S (any number of spatial dims, transposed too) for every
    kernel-name family (PyProf gave 0 to kernels outside its name lists).
  - pointwise ops: one FLOP per output element and operation; transcendental functions count 1
    (PyProf counted 20 as an "estimate").
  - reductions: one FLOP per input element (norm 2, var/std 3); the output is not counted.
  - backward (only for PyProf markers, whose backward kernels borrow the forward shapes):
    matrix products and convolutions do a data-gradient and a weight-gradient product, 2x the
    forward; other families have their own counts below.
"""

from __future__ import annotations

import ast
import json
import math
from dataclasses import dataclass
from functools import reduce

# dtype spellings (PyProf markers, torch, kernel names) -> canonical name
DTYPE_ALIASES = {
    "float64": "fp64", "double": "fp64", "fp64": "fp64",
    "float32": "fp32", "float": "fp32", "fp32": "fp32",
    "tf32": "tf32",
    "float16": "fp16", "half": "fp16", "fp16": "fp16",
    "bfloat16": "bf16", "bf16": "bf16",
    "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "float8_e4m3fnuz": "fp8", "float8_e5m2fnuz": "fp8", "fp8": "fp8",
    "int8": "int8", "uint8": "uint8", "int16": "int16", "short": "int16", "int32": "int32", "int": "int32",
    "int64": "int64", "long": "int64", "bool": "bool", "complex64": "complex64", "complex128": "complex128",
}
ELEMENT_BYTES = {"fp64": 8, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1, "uint8": 1,
                 "int16": 2, "int32": 4, "int64": 8, "bool": 1, "complex64": 8, "complex128": 16}
# multiple of which matrix dimensions must be for tensor cores, per dtype
TC_ALIGN = {"fp16": 8, "bf16": 8, "tf32": 4, "fp8": 16, "int8": 16}
INDEX_BYTES = 8  # index tensors (embedding, gather, nll_loss targets) are int64 unless told otherwise


def canonical_dtype(name: str | None) -> str | None:
    if name is None:
        return None
    name = name.strip().lower()
    if name.startswith("torch."):
        name = name[6:]
    return DTYPE_ALIASES.get(name, name or None)


UNKNOWN = object()  # a non-tensor argument whose value the trace does not give (emit_nvtx sizes)


@dataclass
class Arg:
    """One input of an op call: a tensor (shape set) or a scalar/list value (UNKNOWN when the
    trace only says it is not a tensor)."""

    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    value: object = None
    name: str = ""

    @property
    def is_tensor(self) -> bool:
        return self.shape is not None


@dataclass
class Cost:
    family: str
    flops: int | None
    bytes: int | None
    params: str
    tc_eligible: bool | None = None


# ----------------------------------------------------------------------------- inputs

class SizeError(ValueError):
    """An input size that is not a count (text, None, a float): the op cannot be costed."""


def args_from_sizes(sizes, dtypes: str | None = None) -> list[Arg]:
    """emit_nvtx sizes (a list of lists, or its text): '[]' entries are non-tensors, and so are
    the lists of lists a Kineto trace writes for a TensorList input. DTYPES (Kineto's 'Input
    type', one per input joined by ','; torch_op.dtypes) gives each tensor its dtype."""
    if isinstance(sizes, str):
        try:  # Kineto's sizes are JSON text (null, not None), emit_nvtx's a Python literal
            sizes = json.loads(sizes)
        except ValueError:
            sizes = ast.literal_eval(sizes)
    types = dtypes.split(",") if dtypes else []
    out = []
    for i, s in enumerate(sizes or []):
        if isinstance(s, (list, tuple)) and any(isinstance(d, bool) or not isinstance(d, (int, list, tuple))
                                                for d in s):
            raise SizeError(f"size {s!r} is not a list of counts")
        if s and all(isinstance(d, int) for d in s):
            out.append(Arg(tuple(s), canonical_dtype(types[i]) if i < len(types) and types[i] else None))
        else:
            out.append(Arg(value=UNKNOWN))
    return out


def args_from_marker(text: str) -> list[Arg] | None:
    """The arguments of a PyProf argument marker (a Python dict repr), or None if unreadable."""
    try:
        d = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(d, dict) or not isinstance(d.get("args"), list):
        return None
    out = []
    for a in d["args"]:
        if not isinstance(a, dict):
            continue
        if a.get("type") in ("tensor", "ndarray") and isinstance(a.get("shape"), (tuple, list)):
            out.append(Arg(tuple(int(x) for x in a["shape"]), canonical_dtype(str(a.get("dtype"))),
                           name=a.get("name") or ""))
        else:
            out.append(Arg(value=a.get("value"), name=a.get("name") or ""))
    return out


# ----------------------------------------------------------------------------- helpers

def numel(shape) -> int:
    return reduce(lambda x, y: x * y, shape, 1)


def broadcast(*shapes) -> tuple[int, ...]:
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        dims = [s[len(s) - ndim + i] for s in shapes if len(s) - ndim + i >= 0]
        big = [d for d in dims if d != 1]
        out.append(max(big) if big else 1)
    return tuple(out)


def _fmt(shape) -> str:
    return "[" + ",".join(map(str, shape)) + "]"


def _tensors(args):
    return [a for a in args if a.is_tensor]


class _Unknown(Exception):
    """A formula needs a scalar argument the trace does not give."""


def _value(args, index, name, default):
    """A scalar argument by keyword name or position (PyProf markers); its default when the
    call did not pass it; _Unknown when it was passed but its value is not in the trace."""
    for a in args:
        if a.name == name and not a.is_tensor:
            if a.value is UNKNOWN:
                raise _Unknown(name)
            return default if a.value is None else a.value
    if index < len(args) and not args[index].is_tensor and not args[index].name:
        if args[index].value is UNKNOWN:
            raise _Unknown(name)
        return default if args[index].value is None else args[index].value
    return default


def _tuple(v, n):
    if isinstance(v, (list, tuple)):
        v = tuple(int(x) for x in v)
        return v if len(v) == n else (v * n)[:n] if len(v) == 1 else None
    return (int(v),) * n


def _dtype(args, dtype):
    """The op's element type: the first floating tensor's dtype, else the given one."""
    for a in _tensors(args):
        if a.dtype and a.dtype in ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8"):
            return a.dtype
    return dtype


def _e(dtype):
    return ELEMENT_BYTES.get(dtype) if dtype else None


def _mul(e, elements):
    return None if e is None else int(e * elements)


def _tc(dtype, *dims):
    if dtype is None:
        return None
    align = TC_ALIGN.get(dtype)
    if align is None:
        return False
    return all(d % align == 0 for d in dims)


def _params(dtype, **kv):
    return ",".join([f"{k}={v}" for k, v in kv.items()] + ([dtype] if dtype else []))


def _shape_params(args, dtype):
    t = _tensors(args)
    return ";".join(_fmt(a.shape) for a in t) + ("," + dtype if dtype and t else "")


# ----------------------------------------------------------------------------- families

def _gemm(m, n, k, dtype, batch=1, extra=0, family="matmul", **named):
    e = _e(dtype)
    flops = 2 * batch * m * n * k + (batch * m * n if extra else 0)
    elements = batch * (m * k + k * n + m * n) + extra
    params = _params(dtype, **({"B": batch} if batch != 1 else {}), M=m, N=n, K=k, **named)
    return Cost(family, flops, _mul(e, elements), params, _tc(dtype, m, n, k))


def mm(args, dtype, direction):
    t = _tensors(args)
    if len(t) < 2 or len(t[0].shape) != 2 or len(t[1].shape) != 2:
        return None
    (m, k), (_, n) = t[0].shape, t[1].shape
    return _gemm(m, n, k, _dtype(args, dtype))


def addmm(args, dtype, direction):  # addmm(self, mat1, mat2): self broadcast to [m, n]
    t = _tensors(args)
    if len(t) < 3 or len(t[1].shape) != 2 or len(t[2].shape) != 2:
        return None
    (m, k), (_, n) = t[1].shape, t[2].shape
    return _gemm(m, n, k, _dtype(args, dtype), extra=numel(t[0].shape))


def bmm(args, dtype, direction):
    t = _tensors(args)
    if len(t) < 2 or len(t[0].shape) != 3 or len(t[1].shape) != 3:
        return None
    (b, m, k), (_, _, n) = t[0].shape, t[1].shape
    return _gemm(m, n, k, _dtype(args, dtype), batch=b)


def baddbmm(args, dtype, direction):  # baddbmm(self, batch1, batch2)
    t = _tensors(args)
    if len(t) < 3 or len(t[1].shape) != 3 or len(t[2].shape) != 3:
        return None
    (b, m, k), (_, _, n) = t[1].shape, t[2].shape
    return _gemm(m, n, k, _dtype(args, dtype), batch=b, extra=numel(t[0].shape))


def matmul(args, dtype, direction):
    t = _tensors(args)
    if len(t) < 2:
        return None
    a, b = t[0].shape, t[1].shape
    if not a or not b:
        return None
    dtype = _dtype(args, dtype)
    if len(a) == 1 and len(b) == 1:
        e = _e(dtype)
        return Cost("matmul", 2 * a[0], _mul(e, 2 * a[0] + 1), _params(dtype, N=a[0]), None)
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    m, k, n = a2[-2], a2[-1], b2[-1]
    batch = numel(broadcast(a2[:-2], b2[:-2]))
    e = _e(dtype)
    flops = 2 * batch * m * n * k
    elements = numel(a) + numel(b) + batch * m * n
    params = _params(dtype, **({"B": batch} if batch != 1 else {}), M=m, N=n, K=k)
    return Cost("matmul", flops, _mul(e, elements), params, _tc(dtype, m, n, k))


def linear(args, dtype, direction):  # linear(input[..., K], weight[N, K], bias[N])
    t = _tensors(args)
    if len(t) < 2 or not t[0].shape or len(t[1].shape) != 2:
        return None
    k, n, m = t[0].shape[-1], t[1].shape[0], numel(t[0].shape[:-1])
    bias = len(t) > 2 and bool(t[2].shape)
    return _gemm(m, n, k, _dtype(args, dtype), extra=n if bias else 0)


def mv(args, dtype, direction):
    t = _tensors(args)
    if len(t) < 2 or len(t[0].shape) != 2:
        return None
    m, n = t[0].shape
    dtype = _dtype(args, dtype)
    return Cost("matmul", 2 * m * n, _mul(_e(dtype), m * n + n + m), _params(dtype, M=m, N=n), None)


def dot(args, dtype, direction):
    t = _tensors(args)
    if len(t) < 2 or len(t[0].shape) != 1:
        return None
    n = t[0].shape[0]
    dtype = _dtype(args, dtype)
    return Cost("matmul", 2 * n, _mul(_e(dtype), 2 * n + 1), _params(dtype, N=n), None)


def _conv(args, dtype, transposed, spatial=None, arg_pos=None):
    """conv{1,2,3}d / conv_transpose{1,2,3}d / convolution: input [N, C, *D], weight
    [K, C/g, *R] (transposed: [C, K/g, *R]). Output sizes need stride, padding and dilation: a
    PyProf marker has them (or their defaults); emit_nvtx sizes do not, so no cost then."""
    t = _tensors(args)
    if len(t) < 2 or len(t[0].shape) < 3 or len(t[0].shape) != len(t[1].shape):
        return None
    x, w = t[0].shape, t[1].shape
    nd = len(x) - 2
    if spatial is not None and nd != spatial:
        return None
    pos = arg_pos or {}
    stride = _tuple(_value(args, pos.get("stride", 3), "stride", 1), nd)
    padding = _value(args, pos.get("padding", 4), "padding", 0)
    dilation = _tuple(_value(args, pos.get("dilation", 5), "dilation", 1), nd)
    groups = int(_value(args, pos.get("groups", 6), "groups", 1))
    out_pad = _tuple(_value(args, pos.get("output_padding", 5), "output_padding", 0), nd) if transposed else None
    if isinstance(padding, str) or stride is None or dilation is None:
        return None  # padding='same'/'valid' strings: leave to the sizes we cannot see
    padding = _tuple(padding, nd)
    if padding is None:
        return None
    n, c, dims = x[0], x[1], x[2:]
    rs = w[2:]
    if transposed:
        k = w[1] * groups
        out = tuple((d - 1) * s - 2 * p + dl * (r - 1) + op + 1
                    for d, s, p, dl, r, op in zip(dims, stride, padding, dilation, rs, out_pad))
        flops = 2 * n * c * numel(dims) * (k // groups) * numel(rs)
    else:
        k = w[0]
        out = tuple((d + 2 * p - dl * (r - 1) - 1) // s + 1
                    for d, s, p, dl, r in zip(dims, stride, padding, dilation, rs))
        flops = 2 * n * k * numel(out) * (c // groups) * numel(rs)
    if any(o <= 0 for o in out):
        return None
    bias = len(t) > 2 and bool(t[2].shape)
    dtype = _dtype(args, dtype)
    elements = numel(x) + numel(w) + n * k * numel(out) + (k if bias else 0)
    if bias:
        flops += n * k * numel(out)
    names = "HWD"[:nd] if nd <= 3 else None
    kv = {"N": n, "C": c}
    kv.update({names[i] if names else f"D{i}": d for i, d in enumerate(dims)})
    kv["K"] = k
    kv.update({("PQO"[i] if nd <= 3 else f"O{i}"): o for i, o in enumerate(out)})
    kv.update({("RST"[i] if nd <= 3 else f"R{i}"): r for i, r in enumerate(rs)})
    kv.update(stride=_fmt(stride), pad=_fmt(padding), dil=_fmt(dilation), g=groups)
    return Cost("conv", flops, _mul(_e(dtype), elements), _params(dtype, **kv),
                _tc(dtype, c // groups, k // groups))


def conv_nd(nd, transposed):
    # F.conv2d(input, weight, bias, stride, padding, dilation, groups)
    # F.conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups, dilation)
    pos = ({"stride": 3, "padding": 4, "output_padding": 5, "groups": 6, "dilation": 7} if transposed
           else {"stride": 3, "padding": 4, "dilation": 5, "groups": 6})

    def f(args, dtype, direction):
        return _conv(args, dtype, transposed, nd, pos)
    return f


def convolution(args, dtype, direction):
    # aten::convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    transposed = bool(_value(args, 6, "transposed", False))
    return _conv(args, dtype, transposed, None,
                 {"stride": 3, "padding": 4, "dilation": 5, "output_padding": 7, "groups": 8})


def attention(layout):
    """scaled dot-product attention: q [B, H, L, E] ('bhle') or [B, L, H, E] ('blhe', the flash
    and memory-efficient kernels' layout); k [.., S, E], v [.., S, Ev]. 2*B*H*L*S*(E + Ev) FLOPs
    (two matrix products; the softmax is not counted; no causal discount, the mask is not known)."""
    def f(args, dtype, direction):
        t = _tensors(args)
        if len(t) < 3 or any(len(a.shape) != 4 for a in t[:3]):
            return None
        q, k, v = (a.shape for a in t[:3])
        if layout == "bhle":
            b, h, l, e = q
            s, ev = k[2], v[3]
        else:
            b, l, h, e = q
            s, ev = k[1], v[3]
        dtype = _dtype(args, dtype)
        flops = 2 * b * h * l * s * (e + ev)
        elements = numel(q) + numel(k) + numel(v) + b * h * l * ev
        return Cost("attention", flops, _mul(_e(dtype), elements),
                    _params(dtype, B=b, H=h, L=l, S=s, E=e, Ev=ev), _tc(dtype, e, ev))
    return f


def pointwise(ops_per_element=1, inputs=None):
    """Elementwise ops: ops_per_element FLOPs per output element; bytes = the tensor inputs
    read once + the output (their broadcast shape) written once."""
    def f(args, dtype, direction):
        t = _tensors(args)[:inputs] if inputs else _tensors(args)
        if not t:
            return None
        out = broadcast(*(a.shape for a in t))
        dtype = _dtype(args, dtype)
        elements = sum(numel(a.shape) for a in t) + numel(out)
        return Cost("pointwise", ops_per_element * numel(out), _mul(_e(dtype), elements),
                    _shape_params(args, dtype), None)
    return f


def add_sub(args, dtype, direction):
    """add/sub: one FLOP per output element, two when a tensor is scaled by alpha (a numeric
    argument other than 1 next to two tensors, as in the legacy p.add_(-lr, grad)); emit_nvtx
    sizes do not carry alpha, so there it counts one."""
    c = pointwise(1)(args, dtype, direction)
    t = _tensors(args)
    if c is None or len(t) < 2:
        return c
    scaled = any(not a.is_tensor and isinstance(a.value, (int, float)) and not isinstance(a.value, bool)
                 and a.value != 1 for a in args)
    return Cost(c.family, 2 * c.flops if scaled else c.flops, c.bytes, c.params, None)


def reduction(ops_per_element=1):
    def f(args, dtype, direction):
        t = _tensors(args)
        if not t:
            return None
        dtype = _dtype(args, dtype)
        n = numel(t[0].shape)
        return Cost("reduction", ops_per_element * n, _mul(_e(dtype), n), _shape_params(args, dtype), None)
    return f


def softmax(args, dtype, direction):
    """max, subtract, exp, sum, divide: 5 FLOPs per element forward (log_softmax: log instead of
    divide); backward y*(g - sum(g*y)): 4. Bytes: read and write once (backward: y, g, dx)."""
    t = _tensors(args)
    if not t:
        return None
    dtype = _dtype(args, dtype)
    n = numel(t[0].shape)
    fwd = direction != "backward"
    return Cost("softmax", (5 if fwd else 4) * n, _mul(_e(dtype), (2 if fwd else 3) * n),
                _shape_params(args, dtype), None)


def softmax_backward_data(args, dtype, direction):  # (grad_output, output, dim, input_dtype)
    t = _tensors(args)
    if len(t) < 2:
        return None
    dtype = _dtype(args, dtype)
    n = numel(t[0].shape)
    return Cost("softmax", 4 * n, _mul(_e(dtype), 3 * n), _shape_params(args, dtype), None)


def norm(per_element, affine_pos=None):
    """layer/batch/group/instance/RMS norm: per_element FLOPs per input element (layer norm 8:
    mean 1, variance 3, normalize 2, scale and shift 2); backward 13. Bytes: input read, output
    written, plus the affine parameters (backward: input, grad, dx and the parameter grads)."""
    def f(args, dtype, direction):
        t = _tensors(args)
        if not t:
            return None
        dtype = _dtype(args, dtype)
        n = numel(t[0].shape)
        params = sum(numel(a.shape) for a in t[1:] if len(a.shape) == 1)
        if direction == "backward":
            return Cost("norm", 13 * n, _mul(_e(dtype), 3 * n + 3 * params), _shape_params(args, dtype), None)
        return Cost("norm", per_element * n, _mul(_e(dtype), 2 * n + params), _shape_params(args, dtype), None)
    return f


def native_layer_norm_backward(args, dtype, direction):  # (grad_out, input, shape, mean, rstd, weight, bias, mask)
    t = _tensors(args)
    if len(t) < 2:
        return None
    dtype = _dtype(args, dtype)
    n = numel(t[0].shape)
    params = sum(numel(a.shape) for a in t[2:] if len(a.shape) == 1 and a.shape[0] != n)
    return Cost("norm", 13 * n, _mul(_e(dtype), 3 * n + params), _shape_params(args, dtype), None)


def embedding(weight_pos, index_pos):
    """embedding(weight [V, D], indices): forward gathers rows: bytes = indices + rows read +
    output written; no FLOPs. Backward (dense) accumulates rows: n*D FLOPs, indices + grad read
    + the weight gradient [V, D] written."""
    def f(args, dtype, direction):
        t = _tensors(args)
        if len(t) < 2:
            return None
        w, idx = t[weight_pos], t[index_pos]
        if len(w.shape) != 2:
            return None
        v, d = w.shape
        n = numel(idx.shape)
        dtype = w.dtype or dtype
        e = _e(dtype)
        ib = ELEMENT_BYTES.get(idx.dtype, INDEX_BYTES) if idx.dtype else INDEX_BYTES
        params = _params(dtype, V=v, D=d, I=_fmt(idx.shape))
        if direction == "backward":
            return Cost("embedding", n * d, None if e is None else ib * n + e * (n * d + v * d), params, None)
        return Cost("embedding", 0, None if e is None else ib * n + 2 * e * n * d, params, None)
    return f


def embedding_dense_backward(args, dtype, direction):  # (grad_output [.., D], indices, num_weights, ..)
    t = _tensors(args)
    if len(t) < 2:
        return None
    g, idx = t[0], t[1]
    d, n = g.shape[-1], numel(idx.shape)
    try:
        v = _value(args, 2, "num_weights", None)
    except _Unknown:
        v = None
    dtype = _dtype(args, dtype)
    e = _e(dtype)
    if v is None or e is None:
        return Cost("embedding", n * d, None, _shape_params(args, dtype), None)
    return Cost("embedding", n * d, INDEX_BYTES * n + e * (n * d + int(v) * d), _shape_params(args, dtype), None)


def dropout(args, dtype, direction):
    """x * mask * scale: 2 FLOPs per element; bytes: x read, output written, a 1-byte mask
    written (forward) or read (backward)."""
    t = _tensors(args)
    if not t:
        return None
    dtype = _dtype(args, dtype)
    n = numel(t[0].shape)
    e = _e(dtype)
    return Cost("dropout", 2 * n, None if e is None else 2 * e * n + n, _shape_params(args, dtype), None)


def copy(reads=1):
    """Copies and conversions: no FLOPs; every element read and written once."""
    def f(args, dtype, direction):
        t = _tensors(args)
        if not t:
            return None
        dtype = _dtype(args, dtype)
        src = t[-1] if reads == 1 and len(t) > 1 else t[0]
        return Cost("copy", 0, _mul(_e(dtype), 2 * numel(src.shape)), _shape_params(args, dtype), None)
    return f


def cat(args, dtype, direction):
    t = _tensors(args)
    if not t:
        return None
    dtype = _dtype(args, dtype)
    return Cost("copy", 0, _mul(_e(dtype), 2 * sum(numel(a.shape) for a in t)), _shape_params(args, dtype), None)


def fill(args, dtype, direction):
    t = _tensors(args)
    if not t:
        return None
    dtype = _dtype(args, dtype)
    return Cost("copy", 0, _mul(_e(dtype), numel(t[0].shape)), _shape_params(args, dtype), None)


def gather(args, dtype, direction):  # gather(self, dim, index): output has the index's shape
    t = _tensors(args)
    if len(t) < 2:
        return None
    dtype = _dtype(args, dtype)
    n = numel(t[1].shape)
    e = _e(dtype)
    return Cost("copy", 0, None if e is None else 2 * e * n + INDEX_BYTES * n, _shape_params(args, dtype), None)


def nll_loss(args, dtype, direction):  # (input [N, C], target [N]): pick and sum N values
    t = _tensors(args)
    if len(t) < 2:
        return None
    dtype = _dtype(args, dtype)
    n = numel(t[1].shape)
    e = _e(dtype)
    return Cost("loss", n, None if e is None else e * n + INDEX_BYTES * n, _shape_params(args, dtype), None)


def cross_entropy(args, dtype, direction):  # log_softmax then nll_loss
    t = _tensors(args)
    if len(t) < 2:
        return None
    dtype = _dtype(args, dtype)
    n_all, n = numel(t[0].shape), numel(t[1].shape)
    e = _e(dtype)
    return Cost("loss", 5 * n_all + n, None if e is None else 2 * e * n_all + e * n + INDEX_BYTES * n,
                _shape_params(args, dtype), None)


def elementwise_loss(ops_fwd, ops_bwd):
    """mse/l1/smooth_l1/binary_cross_entropy(input, target): per element ops_fwd FLOPs
    forward (difference, square or abs, sum) and ops_bwd backward; bytes: both inputs read
    (backward: and the gradient written)."""
    def f(args, dtype, direction):
        t = _tensors(args)
        if len(t) < 2:
            return None
        dtype = _dtype(args, dtype)
        n = numel(t[0].shape)
        if direction == "backward":
            return Cost("loss", ops_bwd * n, _mul(_e(dtype), 3 * n), _shape_params(args, dtype), None)
        return Cost("loss", ops_fwd * n, _mul(_e(dtype), 2 * n), _shape_params(args, dtype), None)
    return f


def loss_backward(ops):
    """mse_loss_backward(grad, input, target, reduction) and the like: ops FLOPs per element;
    bytes: input and target read, the gradient written, plus grad_output (a scalar after a
    reduction: '[]' in emit_nvtx sizes, not counted)."""
    def f(args, dtype, direction):
        t = _tensors(args)
        if len(t) < 2:
            return None
        dtype = _dtype(args, dtype)
        n = numel(t[-2].shape)
        grad = numel(t[0].shape) if len(t) >= 3 else 0
        return Cost("loss", ops * n, _mul(_e(dtype), 3 * n + grad), _shape_params(args, dtype), None)
    return f


def adam(args, dtype, direction):
    """Adam/AdamW step over P parameter elements (param, grad, exp_avg, exp_avg_sq; fused and
    foreach kernels take the four lists flattened): 12 FLOPs per element; bytes: 4 reads and
    3 writes per element."""
    t = [a for a in _tensors(args) if a.shape]
    if not t:
        return None
    dtype = _dtype(args, dtype)
    total = sum(numel(a.shape) for a in t)
    p = total // 4 if len(t) % 4 == 0 else None
    if p is None:
        return None
    return Cost("optimizer", 12 * p, _mul(_e(dtype), 7 * p), _params(dtype, P=p), None)


def sgd(args, dtype, direction):
    """SGD step (param -= lr * grad, with or without momentum): 2 FLOPs per element; bytes:
    param and grad read, param written (lists flattened: param and grad lists of equal size)."""
    t = [a for a in _tensors(args) if a.shape]
    if not t or len(t) % 2:
        return None
    dtype = _dtype(args, dtype)
    p = sum(numel(a.shape) for a in t) // 2
    return Cost("optimizer", 2 * p, _mul(_e(dtype), 3 * p), _params(dtype, P=p), None)


def foreach(ops_per_element, lists):
    """_foreach_<op>(list, [list | scalar]): the tensors of the first list are the outputs."""
    def f(args, dtype, direction):
        t = [a for a in _tensors(args) if a.shape]
        if not t or len(t) % lists:
            return None
        dtype = _dtype(args, dtype)
        first = t[: len(t) // lists]
        n = sum(numel(a.shape) for a in first)
        return Cost("pointwise", ops_per_element * n, _mul(_e(dtype), (lists + 1) * n), _params(dtype, N=n), None)
    return f


def pool(nd):
    """max/avg pooling with a kernel size (PyProf markers): one FLOP per window element per
    output element; bytes: input read, output written."""
    def f(args, dtype, direction):
        t = _tensors(args)
        if not t or len(t[0].shape) < nd + 1:
            return None
        ks = _value(args, 1, "kernel_size", None)
        if ks is None:
            return None
        ks = _tuple(ks, nd)
        stride = _value(args, 2, "stride", None)
        stride = ks if stride in (None, [], ()) else _tuple(stride, nd)
        pad = _tuple(_value(args, 3, "padding", 0), nd)
        x = t[0].shape
        dims = x[-nd:]
        out = tuple((d + 2 * p - k) // s + 1 for d, p, k, s in zip(dims, pad, ks, stride))
        if any(o <= 0 for o in out):
            return None
        lead = numel(x[:-nd])
        dtype = _dtype(args, dtype)
        n_out = lead * numel(out)
        return Cost("pooling", n_out * numel(ks), _mul(_e(dtype), numel(x) + n_out),
                    _params(dtype, T=_fmt(x), k=_fmt(ks), s=_fmt(stride), p=_fmt(pad)), None)
    return f


# backward of a forward family (PyProf markers: backward kernels borrow the forward shapes)
def _backward_of(forward):
    def f(args, dtype, direction):
        c = forward(args, dtype, "forward")
        if c is None:
            return None
        if c.family in ("matmul", "conv"):  # data gradient + weight gradient
            return Cost(c.family, 2 * c.flops, None if c.bytes is None else 2 * c.bytes, c.params, c.tc_eligible)
        if c.family == "attention":  # dq, dk, dv and the recomputed scores: 5 products vs 2
            return Cost(c.family, c.flops * 5 // 2, None if c.bytes is None else 2 * c.bytes, c.params, c.tc_eligible)
        if c.family == "pointwise":  # grad * f'(x): read grad and input, write the input grads
            t = _tensors(args)
            out = broadcast(*(a.shape for a in t))
            e = _e(_dtype(args, dtype))
            return Cost(c.family, numel(out) * max(1, len(t)), _mul(e, numel(out) + 2 * sum(numel(a.shape) for a in t)),
                        c.params, None)
        return None
    return f


# ----------------------------------------------------------------------------- registry

_UNARY = ("abs neg reciprocal ceil floor round trunc frac sign sgn exp exp2 expm1 log log10 log1p log2 sqrt rsqrt "
          "sin cos tan asin acos atan sinh cosh tanh sigmoid erf erfc erfinv relu relu6 gelu silu mish elu selu celu "
          "leaky_relu hardtanh hardsigmoid hardswish softplus softsign logsigmoid tanhshrink hardshrink softshrink "
          "threshold clamp clamp_min clamp_max clip square bitwise_not logical_not nan_to_num isnan isinf").split()
_BINARY = ("add sub rsub mul div true_divide floor_divide remainder fmod pow atan2 maximum minimum fmax fmin "
           "eq ne lt le gt ge logical_and logical_or logical_xor bitwise_and bitwise_or bitwise_xor hypot "
           "copysign threshold_backward gelu_backward silu_backward sigmoid_backward tanh_backward "
           "hardtanh_backward leaky_relu_backward elu_backward softplus_backward masked_fill _masked_scale").split()
_TERNARY = "addcmul addcdiv lerp where".split()

FORMULAS = {
    "mm": mm, "addmm": addmm, "bmm": bmm, "baddbmm": baddbmm, "matmul": matmul, "linear": linear,
    "mv": mv, "addmv": mv, "dot": dot, "vdot": dot,
    "conv1d": conv_nd(1, False), "conv2d": conv_nd(2, False), "conv3d": conv_nd(3, False),
    "conv_transpose1d": conv_nd(1, True), "conv_transpose2d": conv_nd(2, True), "conv_transpose3d": conv_nd(3, True),
    "convolution": convolution, "_convolution": convolution,
    "scaled_dot_product_attention": attention("bhle"), "_scaled_dot_product_flash_attention": attention("bhle"),
    "_scaled_dot_product_efficient_attention": attention("bhle"),
    "_scaled_dot_product_cudnn_attention": attention("bhle"),
    "_flash_attention_forward": attention("blhe"), "_efficient_attention_forward": attention("blhe"),
    "softmax": softmax, "_softmax": softmax, "log_softmax": softmax, "_log_softmax": softmax,
    "_softmax_backward_data": softmax_backward_data, "_log_softmax_backward_data": softmax_backward_data,
    "layer_norm": norm(8), "native_layer_norm": norm(8), "group_norm": norm(8), "native_group_norm": norm(8),
    "batch_norm": norm(8), "native_batch_norm": norm(8), "cudnn_batch_norm": norm(8), "_batch_norm_impl_index": norm(8),
    "instance_norm": norm(8), "rms_norm": norm(4), "_fused_rms_norm": norm(4),
    "native_layer_norm_backward": native_layer_norm_backward,
    "embedding": embedding(0, 1), "embedding_dense_backward": embedding_dense_backward,
    "dropout": dropout, "_fused_dropout": dropout, "native_dropout": dropout, "feature_dropout": dropout,
    "native_dropout_backward": dropout,
    "copy_": copy(1), "clone": copy(0), "contiguous": copy(0), "_to_copy": copy(0), "to": copy(0),
    "cat": cat, "stack": cat, "fill_": fill, "zero_": fill, "zeros_like": fill, "ones_like": fill,
    "full_like": fill, "gather": gather,
    "nll_loss": nll_loss, "nll_loss_forward": nll_loss, "nll_loss2d_forward": nll_loss, "cross_entropy": cross_entropy,
    "cross_entropy_loss": cross_entropy,
    "mse_loss": elementwise_loss(3, 3), "l1_loss": elementwise_loss(3, 2), "smooth_l1_loss": elementwise_loss(4, 3),
    "binary_cross_entropy": elementwise_loss(4, 4), "binary_cross_entropy_with_logits": elementwise_loss(6, 4),
    "mse_loss_backward": loss_backward(3), "l1_loss_backward": loss_backward(2),
    "sum": reduction(1), "mean": reduction(1), "amax": reduction(1), "amin": reduction(1), "max": reduction(1),
    "min": reduction(1), "prod": reduction(1), "norm": reduction(2), "linalg_vector_norm": reduction(2),
    "var": reduction(3), "std": reduction(3), "var_mean": reduction(3), "std_mean": reduction(3),
    "logsumexp": reduction(3), "any": reduction(1), "all": reduction(1), "argmax": reduction(1), "argmin": reduction(1),
    "adam": adam, "adamw": adam, "_fused_adam_": adam, "_fused_adamw_": adam, "_fused_adam": adam, "_fused_adamw": adam,
    "sgd": sgd, "_fused_sgd_": sgd,
    "max_pool1d": pool(1), "max_pool2d": pool(2), "max_pool3d": pool(3), "avg_pool1d": pool(1),
    "avg_pool2d": pool(2), "avg_pool3d": pool(3), "max_pool2d_with_indices": pool(2),
}
for _n in ("add", "sub", "rsub"):
    FORMULAS[_n] = add_sub
for _n in _UNARY:
    FORMULAS.setdefault(_n, pointwise(1, 1))
for _n in _BINARY:
    FORMULAS.setdefault(_n, pointwise(1))
for _n in _TERNARY:
    FORMULAS.setdefault(_n, pointwise(3 if _n != "where" else 1))
for _n in ("add", "sub", "mul", "div", "addcmul", "addcdiv", "lerp", "pow", "maximum", "minimum", "sqrt", "exp",
           "neg", "abs", "reciprocal", "sign", "zero", "clamp_min", "clamp_max", "sigmoid", "tanh"):
    FORMULAS.setdefault(f"_foreach_{_n}", foreach(1 if _n not in ("addcmul", "addcdiv", "lerp") else 3,
                                                  2 if _n in ("add", "sub", "mul", "div", "pow", "maximum",
                                                              "minimum") else 1))
    FORMULAS.setdefault(f"_foreach_{_n}_", FORMULAS[f"_foreach_{_n}"])

# Python names PyProf markers carry -> op names above
_DUNDER = {"__add__": "add", "__radd__": "add", "__iadd__": "add", "__sub__": "sub", "__rsub__": "rsub",
           "__isub__": "sub", "__mul__": "mul", "__rmul__": "mul", "__imul__": "mul", "__truediv__": "div",
           "__rtruediv__": "div", "__itruediv__": "div", "__div__": "div", "__rdiv__": "div", "__idiv__": "div",
           "__matmul__": "matmul", "__rmatmul__": "matmul", "__pow__": "pow", "__rpow__": "pow", "__ipow__": "pow",
           "__neg__": "neg", "__abs__": "abs", "__and__": "bitwise_and", "__or__": "bitwise_or",
           "__xor__": "bitwise_xor", "__lt__": "lt", "__le__": "le", "__gt__": "gt", "__ge__": "ge",
           "__eq__": "eq", "__ne__": "ne", "__invert__": "bitwise_not"}


def formula_key(name: str | None, module: str | None = None) -> str | None:
    """The FORMULAS key of an op name ('aten::addmm', 'add_', 'AddmmBackward0' -> None, a
    PyProf (module, op)), or None when there is no formula."""
    if not name:
        return None
    n = name.strip()
    if "::" in n:
        ns, _, n = n.rpartition("::")
        if ns not in ("aten", "torch", "prim", "_c10d_functional"):
            return None
    n = _DUNDER.get(n, n)
    if module == "torch.nn.functional" and n == "embedding":
        return "F.embedding"
    for cand in (n, n.rstrip("_") if n.endswith("_") and not n.startswith("_foreach") else None):
        if cand and cand in FORMULAS:
            return cand
    return None


FORMULAS["F.embedding"] = embedding(1, 0)  # F.embedding(input, weight) takes them the other way round


def family(key: str | None) -> str | None:
    """The family a formula key belongs to, without computing: for the tensor-core column."""
    if key is None:
        return None
    probe = FORMULAS[key]
    for fam, keys in _FAMILY_KEYS.items():
        if key in keys:
            return fam
    return getattr(probe, "family", None)


_FAMILY_KEYS = {
    "matmul": {"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "mv", "addmv", "dot", "vdot"},
    "conv": {"conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
             "convolution", "_convolution"},
    "attention": {"scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
                  "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
                  "_flash_attention_forward", "_efficient_attention_forward"},
}


def cost(key: str | None, args: list[Arg] | None, dtype: str | None = None,
         direction: str = "forward") -> Cost | None:
    """The cost of one op call of formula key `key` with these inputs; None without a formula.

    direction 'backward' asks for the backward pass of a forward op (PyProf markers only):
    families without a backward formula give None."""
    if key is None or args is None or key not in FORMULAS:
        return None
    dtype = canonical_dtype(dtype)
    f = FORMULAS[key]
    try:
        if direction == "backward":
            if key in _BACKWARD:
                return _BACKWARD[key](args, dtype, direction)
            return _backward_of(f)(args, dtype, direction)
        return f(args, dtype, direction)
    except (_Unknown, ValueError, TypeError, IndexError, ZeroDivisionError, OverflowError):
        return None  # an odd argument list never aborts an ingest: no cost


_BACKWARD = {
    "linear": lambda args, dtype, d: _linear_backward(args, dtype),
    "addmm": lambda args, dtype, d: _addmm_backward(args, dtype),
    "embedding": embedding(0, 1), "F.embedding": embedding(1, 0),
    "dropout": dropout, "_fused_dropout": dropout, "native_dropout": dropout, "feature_dropout": dropout,
    "softmax": softmax, "_softmax": softmax, "log_softmax": softmax, "_log_softmax": softmax,
    "layer_norm": norm(8), "native_layer_norm": norm(8), "batch_norm": norm(8), "native_batch_norm": norm(8),
    "group_norm": norm(8), "rms_norm": norm(4),
    "mse_loss": elementwise_loss(3, 3), "l1_loss": elementwise_loss(3, 2),
}


def _linear_backward(args, dtype):
    """dgrad [m,n]x[n,k] and wgrad [n,m]x[m,k]: 2x the product; the bias gradient sums m*n."""
    c = linear(args, dtype, "forward")
    if c is None:
        return None
    t = _tensors(args)
    k, n, m = t[0].shape[-1], t[1].shape[0], numel(t[0].shape[:-1])
    bias = len(t) > 2 and bool(t[2].shape)
    dtype = _dtype(args, dtype)
    elements = 2 * (m * k + k * n + m * n) + ((m * n + n) if bias else 0)
    return Cost("matmul", 4 * m * n * k + (m * n if bias else 0), _mul(_e(dtype), elements), c.params, c.tc_eligible)


def _addmm_backward(args, dtype):
    c = addmm(args, dtype, "forward")
    if c is None:
        return None
    t = _tensors(args)
    (m, k), (_, n) = t[1].shape, t[2].shape
    dtype = _dtype(args, dtype)
    bias = numel(t[0].shape)
    elements = 2 * (m * k + k * n + m * n) + ((m * n + bias) if bias else 0)
    return Cost("matmul", 4 * m * n * k + (m * n if bias else 0), _mul(_e(dtype), elements), c.params, c.tc_eligible)


def tc_family(key: str | None) -> bool:
    return family(key) in ("matmul", "conv", "attention")


__all__ = ["Arg", "Cost", "cost", "formula_key", "args_from_sizes", "args_from_marker", "canonical_dtype",
           "ELEMENT_BYTES", "FORMULAS", "family", "tc_family", "math"]
