"""PyProf's `params` column: a kernel's parameters written as NVIDIA PyProf's prof writes them,
from the arguments of the PyProf call the kernel belongs to (kernel_op.call_range_id, the
outermost PyProf argument marker: `linear`, not the `matmul` inside it).

PyProf (pyprof/prof/*.py, NVIDIA/PyProf 218dcc1) picks an operator class by the call's op
name and each class writes its own parameters:

- linear: `M=<out features>,N=<the input's leading dims>,K=<in features>,fp32`, e.g.
  `M=200,N=(35,20),K=200,fp32`; backward, by the kernel's place in its autograd node: the
  first kernel (data gradient) `M=K,N=N,K=M`, the second (weight gradient) `M=K,N=M,K=N`, any
  other `X=<input shape>,W=<weight shape>,fp32`; the bias add `M=..,N=..,fp32`;
- addmm, mm: `M=n,N=m,K=k,fp32` (M and N swapped, the column-major convention); bmm
  `B=b,M=n,N=m,K=k,fp32`; matmul `A=<shape>,B=<shape>,fp32`;
- pointwise ops (`__mul__`, `add_`, `__iadd__`, ...): each positional argument as
  `<shape><dtype>` joined by ';' (a scalar is `[]fp32` or `[]int32`): `[35,20,200]fp32;[]fp32`;
- activations, dropout, softmax, log_softmax, mean: the input, `[35,20,200]fp32`;
  embedding: indices and weight, `[35,20]int64;[33278,200]fp32`;
- sum, norm: `T=<shape>,fp32`;
- conv1d, conv2d: `N=,C=,H=,W=,K=,P=,Q=,R=,S=,ph=,pw=,U=,V=,dh=,dw=,g=,fp32` (input, output and
  filter sizes, padding, stride, dilation, groups; conv1d with H = R = P = 1);
- any op PyProf has no class for (PyProf's 'Foo': layer_norm, cross_entropy,
  multi_head_attention_forward, a wrapped `Foo.forward`): `T=[<shapes>],[<dtypes>]`, e.g.
  `T=[(35,20,200),(200,)],['float32','float32']`.

PyProf ends every parameter list with a ',' (`M=200,...,fp32,`); that comma is left out here.
Ops whose PyProf class this module does not write (RNN cells, conversions,
indexing, copies, losses, optimizers, batch norm, memory fills) get None: kernel_op.params then
keeps traceql's own parameters of the costed call.
"""

from __future__ import annotations

import ast

ROLES = ("fprop", "bprop0", "bprop1", "bprop2", "bias")  # a kernel's place, as derive/kernel_op.sql names it

_SHORT = {"uint8": "uint8", "byte": "uint8", "char": "uint8", "int8": "int8", "int16": "int16", "short": "int16",
          "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32", "int32": "int32", "int": "int32",
          "int64": "int64", "long": "int64", "float64": "fp64", "double": "fp64", "bool": "bool"}

_POINTWISE = set(
    "abs abs_ neg neg_ reciprocal reciprocal_ __abs__ __neg__ __invert__ ceil ceil_ clamp clamp_ floor floor_ "
    "frac frac_ round round_ sign sign_ trunc trunc_ exp exp_ exp1m exp1m_ log log_ log10 log10_ log1p log1p_ "
    "log2 log2_ sqrt sqrt_ rsqrt rsqrt_ acos acos_ asin asin_ atan atan_ atan2 atan2_ cos cos_ cosh cosh_ sin "
    "sin_ sinh sinh_ tan tan_ sigmoid sigmoid_ tanh tanh_ erf erf_ erfc erfc_ erfinv erfinv_ add add_ div div_ "
    "mul mul_ remainder remainder_ sub sub_ __add__ __sub__ __mul__ __floordiv__ __truediv__ __mod__ __radd__ "
    "__rsub__ __rmul__ __rdiv__ __rtruediv__ __rfloordiv__ fmod fmod_ __iadd__ __isub__ __imul__ __itruediv__ "
    "pow pow_ __pow__ __rpow__ lt lt_ gt gt_ ge ge_ le le_ eq eq_ ne ne_ __lt__ __gt__ __ge__ __le__ __eq__ "
    "__ne__ __and__ __or__ __xor__ __lshift__ __rshift__ __iand__ __ior__ __ixor__ __ilshift__ __irshift__ "
    "addcdiv addcdiv_ addcmul addcmul_ digamma lerp lerp_ mvlgamma".split())
_ACTIVATION = set(
    "celu elu elu_ hardshrink hardtanh hardtanh_ leaky_relu leaky_relu_ logsigmoid prelu relu relu_ relu6 rrelu "
    "rrelu_ selu sigmoid softplus softshrink softsign tanh tanhshrink threshold threshold_".split())
# ops PyProf has a class for that this module does not write (None: traceql's parameters stay)
_NOT_WRITTEN = set(
    "byte char double float half int long short to cat reshape masked_scatter_ gather nonzero "
    "index_select masked_select mse_loss adam batch_norm randperm ones ones_like zero_ zeros zeros_like fill_ full "
    "copy_ clone contiguous any".split())


def _tensor(arg) -> str | None:
    """PyProf's Tensor as text: the shape as a list and the short dtype, '[35,20,200]fp32'."""
    if arg.get("type") == "tensor":
        dtype = _SHORT.get(str(arg.get("dtype")))
        return None if dtype is None else _compact(list(arg["shape"])) + dtype
    if arg.get("type") in ("float", "int"):
        return "[]" + _SHORT[arg["type"]]
    return None


def _compact(value) -> str:
    return str(value).replace(" ", "")


def _kv(*pairs) -> str:
    """PyProf's parameter dict as text: 'K=V' joined by ',', the dtype by its short name."""
    return ",".join(v if k == "type" else f"{k}={_compact(v)}" for k, v in pairs)


def _dims(n):
    return n[0] if len(n) == 1 else n


def params(marker_text: str | None) -> dict[str, str] | None:
    """PyProf's params of each role (ROLES) of a kernel of the call whose PyProf argument
    marker is MARKER_TEXT; None when the marker is unreadable or its op's PyProf class is not
    written here (or PyProf itself would fail on its arguments)."""
    try:
        marker = ast.literal_eval(marker_text) if marker_text else None
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(marker, dict) or not isinstance(marker.get("args"), list):
        return None
    try:
        one = _params(str(marker.get("mod")), str(marker.get("op")), [a for a in marker["args"] if isinstance(a, dict)])
    except (KeyError, TypeError, ValueError, IndexError):
        return None
    if one is None or isinstance(one, dict):
        return one
    return {role: one for role in ROLES}


def _params(mod: str, op: str, args: list[dict]):
    positional = [a for a in args if a.get("name") == ""]
    tensors = [a for a in args if a.get("type") == "tensor"]
    if op == "linear":
        x, w = tensors[0], tensors[1]
        t = _SHORT[x["dtype"]]
        (m, k), n = w["shape"], _dims(tuple(x["shape"][:-1]))
        return {"fprop": _kv(("M", m), ("N", n), ("K", k), ("type", t)),
                "bprop0": _kv(("M", k), ("N", n), ("K", m), ("type", t)),
                "bprop1": _kv(("M", k), ("N", m), ("K", n), ("type", t)),
                "bprop2": _kv(("X", tuple(x["shape"])), ("W", tuple(w["shape"])), ("type", t)),
                "bias": _kv(("M", m), ("N", n), ("type", t))}
    if mod in ("LSTMCell", "GRUCell") and op == "forward":
        return None
    if op in _POINTWISE:
        parts = [_tensor(a) for a in positional]
        return None if not parts or None in parts else ";".join(parts)
    if op in ("__matmul__", "matmul"):
        a, b = tensors[0], tensors[1]
        return _kv(("A", tuple(a["shape"])), ("B", tuple(b["shape"])), ("type", _SHORT[a["dtype"]]))
    if op == "embedding":
        parts = [_tensor(args[0]), _tensor(args[1])]
        return None if None in parts else ";".join(parts)
    if op in ("sum", "norm"):
        first = args[0] if args[0].get("name") == "" or op == "norm" else next(a for a in args if a.get("name") == "input")
        return _kv(("T", tuple(first["shape"])), ("type", _SHORT[first["dtype"]]))
    if op in ("mean", "dropout", "softmax", "log_softmax") or op in _ACTIVATION:
        return _tensor(positional[0] if op != "dropout" else args[0])
    if op in ("addmm", "addmm_", "mm", "bmm"):
        if op == "bmm":
            a, b = positional[0], positional[1]
            (bb, m, k), n = a["shape"], b["shape"][2]
            return _kv(("B", bb), ("M", n), ("N", m), ("K", k), ("type", _SHORT[a["dtype"]]))
        a, b = (positional[1], positional[2]) if op.startswith("addmm") else (positional[0], positional[1])
        (m, k), n = a["shape"], b["shape"][1]
        return _kv(("M", n), ("N", m), ("K", k), ("type", _SHORT[a["dtype"]]))
    if op in ("conv1d", "conv2d"):
        return _conv(op, args)
    if op in _NOT_WRITTEN:
        return None
    # PyProf's Foo: every tensor argument's shape and dtype
    return "T=" + _compact([tuple(a["shape"]) for a in tensors]) + "," + _compact([a["dtype"] for a in tensors])


def _conv(op: str, args: list[dict]) -> str:
    """pyprof/prof/conv.py: stride, padding, dilation and groups by position (after the bias)
    or by name, else 1, 0, 1, 1."""
    def arg(pos, name, default):
        if len(args) > pos and args[pos].get("name") == "":
            return args[pos]["value"]
        named = [a for a in args if a.get("name") == name]
        return named[0]["value"] if named else default

    def pair(v):
        if isinstance(v, (int, float)):
            return v, v
        return (v[0], v[0]) if len(v) == 1 else tuple(v)

    i, w = args[0], args[1]
    (sh, sw), (ph, pw), (dh, dw) = pair(arg(3, "stride", 1)), pair(arg(4, "padding", 0)), pair(arg(5, "dilation", 1))
    g = arg(6, "groups", 1)
    if op == "conv1d":  # a height of 1: no padding, stride or dilation along it
        (n, c, width), (k, _, s) = i["shape"], w["shape"]
        h = r = 1
        ph, sh, dh = 0, 1, 1
    else:
        (n, c, h, width), (k, _, r, s) = i["shape"], w["shape"]
    p = int(1 + (h + 2 * ph - ((r - 1) * dh + 1)) / sh)
    q = int(1 + (width + 2 * pw - ((s - 1) * dw + 1)) / sw)
    return _kv(("N", n), ("C", c), ("H", h), ("W", width), ("K", k), ("P", p), ("Q", q), ("R", r), ("S", s),
               ("ph", ph), ("pw", pw), ("U", sh), ("V", sw), ("dh", dh), ("dw", dw), ("g", g),
               ("type", _SHORT[i["dtype"]]))
