"""`traceql diff`'s comparison: one row per aligned key with both sides' times and calls, the test
(paired over iterations, else Yuen's on trimmed means; within strata of launch configuration, input
sizes or byte count), Benjamini-Hochberg q-values and the verdict; the warnings when the sides are
not like with like, and the notes (see diff.py for the whole method)."""

from __future__ import annotations

import math
import re

from traceql.analysis.diff_rules import (CHANGED, DEFAULT_ALPHA, DEFAULT_MIN_EFFECT_PCT, DEFAULT_TRIM, GATED, HEADLINE,
                                         SECTIONS, SUMS, VERSIONS)
from traceql.analysis.diff_sides import SideStats, anchor_text
from traceql.analysis.stats import benjamini_hochberg, paired, trimmed, yuen, yuen_stratified, z_test
from traceql.core.errors import UsageError


def _kind(section: str, key: str) -> str:
    if section != "total":
        return "instances"
    if key == "iteration time":
        return "iteration"
    return "sum" if key in SUMS else "single"


def _iteration_row(s: SideStats, trim: float) -> dict | None:
    d = s.iteration_durs
    if not d:
        return None
    import statistics

    _, tmean, wvar = trimmed(d, trim)
    return {"calls": len(d), "total_ns": sum(d), "mean_ns": statistics.fmean(d),
            "var_ns": statistics.variance(d) if len(d) > 1 else None, "tmean_ns": tmean, "wvar_ns": wvar,
            "med_ns": float(statistics.median(d))}


def compare(a: SideStats, b: SideStats, alpha: float = DEFAULT_ALPHA,
            min_effect_pct: float = DEFAULT_MIN_EFFECT_PCT, per_iteration: bool | None = None,
            trim: float = DEFAULT_TRIM, paired: bool | None = None) -> tuple[list, bool]:
    """The rows of a diff (module doc), and whether times are per iteration."""
    if not 0 < alpha < 1:
        raise UsageError(f"--alpha {alpha}: expected a number between 0 and 1")
    if not min_effect_pct >= 0:
        raise UsageError(f"--min-effect {min_effect_pct}: expected a percentage of 0 or more")
    both = bool(a.iterations and b.iterations)
    if per_iteration and not both:
        which = " and ".join(x for x, s in (("A", a), ("B", b)) if not s.iterations)
        raise UsageError(f"--per-iteration: no iterations detected in {which} (traceql analyze --rule iterations "
                         "says why)")
    unlike = _unlike_iterations(a, b) if both else None
    if unlike and per_iteration is None:
        both = False  # neither per iteration nor an iteration time: the two count different things
    norm = both if per_iteration is None else bool(per_iteration)
    ia, ib = (a.iterations, b.iterations) if norm else (1, 1)
    ra_all, rb_all = _align_devices(dict(a.rows), dict(b.rows))
    for s, rows in ((a, ra_all), (b, rb_all)):
        it = _iteration_row(s, trim)
        if it is not None and both:
            rows[("total", "iteration time")] = it
    rows = []
    for section, key in sorted(set(ra_all) | set(rb_all), key=lambda k: (SECTIONS.index(k[0]), k[1])):
        ra, rb = ra_all.get((section, key)), rb_all.get((section, key))
        rows.append(_row(section, key, ra, rb, ia, ib, trim, a.strata.get((section, key)),
                         b.strata.get((section, key))))
    paired = paired is not False and norm and a.anchor is not None and a.anchor == b.anchor \
        and bool(a.per_iter) and bool(b.per_iter)
    if paired:
        _pair(rows, a, b, trim)
    else:
        _unpaired_gate(rows, a, b)
    for section in SECTIONS:
        tested = [r for r in rows if r["section"] == section and r["p_value"] is not None]
        for r, q in zip(tested, benjamini_hochberg([r["p_value"] for r in tested])):
            r["q_value"] = q
    for r in rows:
        if r["gate_pct"] is not None:
            r["gate_p"], r["gate_q"] = r["p_value"], r["q_value"]
    for r in rows:
        r["verdict"] = _verdict(r, alpha, min_effect_pct)
        r["changed"] = r["verdict"] in CHANGED
    return rows, norm


def _gated(r: dict) -> bool:
    """Whether the gate reads the row: an NVTX range only when both sides have it (a range added
    or removed is instrumentation that changed, not work; a kernel or op added is work)."""
    return r["section"] != "range" or (r["present_a"] and r["present_b"])


def _paired_iterations(a: SideStats, b: SideStats) -> list[int]:
    """The iterations compared pairwise: k on A against k on B, from the second (the first is
    warm-up) when both sides have 4 or more, up to the shorter side's count (at most the first
    max_iterations of _internal/diff_per_iteration)."""
    n = min(len(a.iteration_durs), len(b.iteration_durs))
    return list(range(2 if n >= 4 else 1, n + 1))


def _pair(rows: list, a: SideStats, b: SideStats, trim: float) -> None:
    """The paired comparison (module doc): per row of the headline and of the gated sections, the
    differences B - A of its time in iteration k, tested by stats.paired; gate_pct: that change
    as a percentage of A's iteration time (of A's own time for the headline rows)."""
    its = _paired_iterations(a, b)
    if not its:
        return
    base_iter = a.per_iter.get(("iteration", "iteration time"), {})
    _, base, _ = trimmed([base_iter.get(k, 0) for k in its], trim)
    for r in rows:
        section, key = r["section"], r["key"]
        where = ("iteration", key) if (section, key) == ("total", "iteration time") else (section, key)
        if not (section in GATED or (section == "total" and key in HEADLINE)) or not _gated(r):
            continue
        xa, xb = a.per_iter.get(where, {}), b.per_iter.get(where, {})
        if not xa and not xb:
            continue
        va, vb = [xa.get(k, 0) for k in its], [xb.get(k, 0) for k in its]
        t, df, p, tm = paired([y - x for x, y in zip(va, vb)], trim)
        r["pairs"], r["iter_delta_ns"] = len(its), tm
        r["communication"] = (section, key) in a.communication or (section, key) in b.communication
        # the row's test is the paired one; A, B, Δ and Δ% one estimate: A's trimmed mean over the
        # paired iterations and the paired change
        own = trimmed(va, trim)[1]
        r["t"], r["df"], r["p_value"] = t, df, p
        r["effect_pct"] = r["delta_pct"] = None if not own or tm is None else 100.0 * tm / own
        r["time_a_ns"], r["delta_ns"] = own, tm
        r["time_b_ns"] = None if tm is None else own + tm
        if section == "total":
            r["gate_pct"] = r["effect_pct"]
        else:
            r["gate_pct"] = None if not base or tm is None else 100.0 * tm / base
            ca, cb = a.per_iter.get(("calls", *where), {}), b.per_iter.get(("calls", *where), {})
            na, nb = sum(ca.get(k, 0) for k in its), sum(cb.get(k, 0) for k in its)
            r["calls_delta_pct"] = 100.0 * (nb - na) / na if na else None


def _unpaired_gate(rows: list, a: SideStats, b: SideStats) -> None:
    """Without paired iterations: the headline rows gate on their own change and test; a key on
    the time its per-call change (effect_pct, tested by Yuen's test) adds at A's calls, as a
    percentage of A's GPU operation time."""
    ops = next((r for r in rows if r["section"] == "total" and r["key"] == "GPU operations"), None)
    base = ops["time_a_ns"] if ops else None
    for r in rows:
        key = (r["section"], r["key"])
        r["communication"] = key in a.communication or key in b.communication
        if r["section"] == "total" and r["key"] in HEADLINE:
            r["gate_pct"] = r["delta_pct"] if r["key"] != "iteration time" else r["effect_pct"]
        elif r["section"] in GATED and _gated(r) and r["effect_pct"] is not None and r["time_a_ns"] and base:
            r["gate_pct"] = r["effect_pct"] * r["time_a_ns"] / base


_DEVICE_ROW = re.compile(r"GPU (\S+) (busy|compute|exposed communication|memory only)")


def _align_devices(ra: dict, rb: dict) -> tuple[dict, dict]:
    """Each side on one GPU, but not the same (another rank, CUDA_VISIBLE_DEVICES): their GPU rows
    align as 'GPU 0 / GPU 1 busy' (A's id, B's id) instead of one removed and one added."""
    def ids(rows):
        return {m.group(1) for section, key in rows if section == "total" and (m := _DEVICE_ROW.fullmatch(key))}

    ia, ib = ids(ra), ids(rb)
    if len(ia) != 1 or len(ib) != 1 or ia == ib:
        return ra, rb
    both = f"GPU {next(iter(ia))} / GPU {next(iter(ib))}"

    def renamed(rows):
        out = {}
        for (section, key), row in rows.items():
            m = _DEVICE_ROW.fullmatch(key) if section == "total" else None
            out[(section, f"{both} {m.group(2)}" if m else key)] = row
        return out

    return renamed(ra), renamed(rb)


def _unlike_iterations(a: SideStats, b: SideStats) -> str | None:
    """Why the two sides' iterations do not count the same thing (found by other means, or other
    NVTX ranges), else None. Two kernel paces may follow different kernels of one loop."""
    if a.iteration_source == b.iteration_source and (a.iteration_source == "kernel pace"
                                                     or a.iteration_family == b.iteration_family):
        return None

    def what(s):
        return s.iteration_source if s.iteration_source == "ProfilerStep" else \
            f"{s.iteration_source} '{s.iteration_family}'"

    return f"the iterations of A ({what(a)}) and of B ({what(b)}) are not the same kind"


def warnings(a: SideStats, b: SideStats) -> list[str]:
    """Why the two sides may not be like with like: other GPU models or counts, other profiler
    versions (for PyTorch profiler traces with their CUDA runtime and driver versions), other
    formats, another NVIDIA driver, CUDA driver or runtime version or PyTorch version (the trace
    columns of VERSIONS, where both sides record them), iterations of another kind."""
    from traceql.core.faults import printable

    out = []

    def gpus(s):
        return ", ".join(f"{n} x {printable(name)}" for name, n in s.hardware.get("gpus", [])) or "no GPU described"

    if a.hardware.get("gpus") != b.hardware.get("gpus"):
        out.append(f"other GPUs: A ran on {gpus(a)}, B on {gpus(b)}")
    ea, eb = a.hardware.get("exporters"), b.hardware.get("exporters")
    if ea != eb:
        out.append(f"other profilers or versions (CUDA runtime and driver where the trace records them): A "
                   f"{'; '.join(map(printable, ea or ['unknown']))}, B {'; '.join(map(printable, eb or ['unknown']))}")
    for col, label in VERSIONS:  # only where both sides record it: an unknown is not a difference
        va, vb = a.hardware.get(col), b.hardware.get(col)
        if va and vb and va != vb:
            out.append(f"other {label}: A {', '.join(map(printable, va))}, B {', '.join(map(printable, vb))}")
    if a.anchor is None and a.iteration_source and b.iteration_source and \
            (a.iteration_source, a.iteration_family) != (b.iteration_source, b.iteration_family):
        out.append(f"iterations of another kind: A {anchor_text((a.iteration_source, a.iteration_family))}, "
                   f"B {anchor_text((b.iteration_source, b.iteration_family))}")
    return out


def notes(a: SideStats, b: SideStats, per_iteration: bool | None, norm: bool) -> list[str]:
    """What a reader of the diff should know about how it was computed."""
    out = []
    if a.joint_note:
        out.append(a.joint_note)
    if a.anchor is not None and a.anchor == b.anchor and norm:
        n = len(_paired_iterations(a, b))
        out.append(f"paired: iteration k of A against iteration k of B, {n} pairs"
                   + (" (the first, warm-up, left out)" if n and _paired_iterations(a, b)[0] == 2 else ""))
    unlike = _unlike_iterations(a, b) if a.iterations and b.iterations else None
    if unlike and a.joint_note and not norm:
        out[-1] += ": whole traces compared (--per-iteration compares per iteration anyway)"
    elif unlike:
        out.append(f"{unlike}: " + ("compared per iteration as asked (--per-iteration)" if norm else
                                    "whole traces compared (--per-iteration compares per iteration anyway)"))
    elif per_iteration is None and not norm and a.joint_note and not (a.anchor and a.anchor == b.anchor):
        out[-1] += ": whole traces compared"
    elif per_iteration is None and not norm and (a.iterations or b.iterations):
        which = "A" if not a.iterations else "B"
        out.append(f"no iterations detected in {which}: whole traces compared (traceql analyze --rule iterations "
                   "says why)")
    return out


def _stratified(sa: dict | None, sb: dict | None, trim: float):
    """Yuen's test within the strata both sides have (yuen_stratified), each weighted by its share
    of the key's calls on the two sides: (t, df, p, effect in percent), or None when no stratum is
    common to both sides with a noise estimate (then the key's instances are compared as one)."""
    if not sa or not sb:
        return None
    na, nb = sum(r["calls"] for r in sa.values()), sum(r["calls"] for r in sb.values())
    groups = [(sa[s]["calls"], sa[s]["tmean_ns"], sa[s]["wvar_ns"], sb[s]["calls"], sb[s]["tmean_ns"], sb[s]["wvar_ns"],
               sa[s]["calls"] / na + sb[s]["calls"] / nb)
              for s in sorted(set(sa) & set(sb)) if sa[s]["calls"] > 1 or sb[s]["calls"] > 1]
    return yuen_stratified(groups, trim) if groups else None


def _row(section: str, key: str, ra: dict | None, rb: dict | None, ia: int, ib: int, trim: float,
         sa: dict | None = None, sb: dict | None = None) -> dict:
    kind = _kind(section, key)
    g = (lambda r, k: None if r is None else r.get(k))
    calls_a, calls_b = g(ra, "calls"), g(rb, "calls")
    total_a, total_b = g(ra, "total_ns"), g(rb, "total_ns")
    mean_a, mean_b = g(ra, "mean_ns"), g(rb, "mean_ns")
    var_a, var_b = g(ra, "var_ns"), g(rb, "var_ns")
    tmean_a, tmean_b = g(ra, "tmean_ns"), g(rb, "tmean_ns")
    if kind == "iteration":
        time_a, time_b = tmean_a, tmean_b
    else:
        time_a = None if total_a is None else total_a / ia
        time_b = None if total_b is None else total_b / ib
    pct = (lambda x, y: None if x is None or y is None or x == 0 else 100.0 * (y - x) / x)
    t = df = p = None
    effect = pct(tmean_a, tmean_b) if kind in ("instances", "iteration") else pct(time_a, time_b)
    if ra is not None and rb is not None:
        by_stratum = _stratified(sa, sb, trim) if kind == "instances" else None
        if by_stratum is not None:
            t, df, p, effect = by_stratum
        elif kind in ("instances", "iteration") and calls_a and calls_b:
            t, df, p = yuen(calls_a, tmean_a, g(ra, "wvar_ns"), calls_b, tmean_b, g(rb, "wvar_ns"), trim)
        elif kind == "sum":
            tv_a, tv_b = g(ra, "total_var"), g(rb, "total_var")
            var = None if tv_a is None or tv_b is None else tv_a / ia ** 2 + tv_b / ib ** 2
            t, df, p = z_test(time_b - time_a, var)
    per_a = None if calls_a is None else calls_a / ia
    per_b = None if calls_b is None else calls_b / ib
    sd = (lambda v: None if v is None else math.sqrt(v))
    return {
        "section": section, "key": key, "kind": kind,
        "calls_a": calls_a, "calls_b": calls_b, "total_a_ns": total_a, "total_b_ns": total_b,
        "time_a_ns": time_a, "time_b_ns": time_b,
        "delta_ns": None if time_a is None and time_b is None else (time_b or 0) - (time_a or 0),
        "delta_pct": pct(time_a, time_b),
        "mean_a_ns": mean_a, "mean_b_ns": mean_b, "tmean_a_ns": tmean_a, "tmean_b_ns": tmean_b,
        "med_a_ns": g(ra, "med_ns"), "med_b_ns": g(rb, "med_ns"), "stddev_a_ns": sd(var_a), "stddev_b_ns": sd(var_b),
        "mean_delta_pct": pct(mean_a, mean_b), "tmean_delta_pct": pct(tmean_a, tmean_b),
        "calls_delta_pct": pct(per_a, per_b), "effect_pct": effect,
        "strata": len(set(sa or ()) | set(sb or ())) or None,
        "t": t, "df": df, "p_value": p, "q_value": None,
        "pairs": None, "iter_delta_ns": None, "gate_pct": None, "gate_p": None, "gate_q": None, "communication": False,
        "present_a": ra is not None and (kind == "single" or bool(calls_a)),
        "present_b": rb is not None and (kind == "single" or bool(calls_b)),
    }


def _verdict(r: dict, alpha: float, min_effect: float) -> str:
    """The row's verdict, worded so that it never contradicts its numbers: 'slower' and 'faster'
    only when the tested change (effect_pct) and the time per iteration (delta_ns, B - A) move the
    same way; a change at least min_effect that is not significant says so ('not significant'),
    one without a noise estimate 'untested'; 'unchanged' only below min_effect."""
    if r["present_a"] and not r["present_b"]:
        return "removed"
    if r["present_b"] and not r["present_a"]:
        return "added"
    if not r["present_a"]:
        return "unchanged"
    effect, delta = r["effect_pct"], r["delta_ns"]
    big = effect is not None and abs(effect) >= min_effect
    significant = r["q_value"] is not None and r["q_value"] < alpha
    calls = r["calls_delta_pct"] if r["kind"] == "instances" else None
    per_call = r["tmean_delta_pct"]
    if r["pairs"] and calls is not None and abs(calls) >= min_effect and (per_call is None or
                                                                         abs(per_call) < min_effect):
        return "more calls" if calls > 0 else "fewer calls"  # paired: the time moved with the calls
    if significant and big and (not delta or (delta > 0) == (effect > 0)):
        return "slower" if effect > 0 else "faster"
    if calls is not None and abs(calls) >= min_effect:
        return "more calls" if calls > 0 else "fewer calls"
    if significant and big:
        return "mixed"  # per call one way, per iteration the other, the calls moved by less than min_effect
    if big:
        return "untested" if r["p_value"] is None else "not significant"
    return "unchanged"
