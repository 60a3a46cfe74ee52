"""Statistics of `traceql diff`, in plain Python (no numpy or scipy): Student's t distribution,
Yuen's and Welch's tests (also within strata, combined), trimmed means with winsorized variances,
and Benjamini-Hochberg q-values.

Yuen's test (Yuen 1974; Wilcox, Introduction to Robust Estimation and Hypothesis Testing) is
Welch's t-test on trimmed means: of n instances the g = floor(trim * n) shortest and g longest are
left out of the mean, and in the variance they are set to the shortest and longest kept
(winsorized). With h = n - 2g instances kept, each side contributes d = (n - 1) s_w^2 / (h (h - 1))
to the squared standard error; t = (tmean_b - tmean_a) / sqrt(d_a + d_b) with Welch-Satterthwaite
degrees of freedom (d_a + d_b)^2 / (d_a^2 / (h_a - 1) + d_b^2 / (h_b - 1)). With trim 0 this is
Welch's test. A warm-up iteration or a rare slow instance thus neither hides a change nor makes
one. The two-sided p-value is the regularized incomplete beta function I_x(df/2, 1/2) at
x = df / (df + t^2), by its continued fraction (Numerical Recipes' betacf), accurate to about
1e-14; tests/analysis/test_diff_stats.py checks it against a numerical integration of the density.
"""

from __future__ import annotations

import math


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 1000):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_two_sided(t: float, df: float | None) -> float:
    """P(|T| >= |t|) for Student's t with df degrees of freedom (None or inf: the normal)."""
    if math.isinf(t):
        return 0.0
    if df is None or math.isinf(df) or df > 1e7:
        return math.erfc(abs(t) / math.sqrt(2.0))
    return min(1.0, betainc(df / 2.0, 0.5, df / (df + t * t)))


def yuen(n1: int, tm1: float, wv1: float | None, n2: int, tm2: float, wv2: float | None, trim: float = 0.2):
    """Yuen's test of trimmed mean tm2 against tm1 (Welch's t-test on trimmed means with winsorized
    variances wv1, wv2; with trim 0 it is Welch's t-test): (t, df, p); (None, None, None) without a
    noise estimate (one instance on each side). A side with one instance takes the other's
    variance; no spread at all: p = 1 for equal means, 0 otherwise. t, df None where infinite."""
    if n1 < 1 or n2 < 1 or (n1 < 2 and n2 < 2):
        return None, None, None
    wv1 = wv2 if n1 < 2 else (wv1 or 0.0)
    wv2 = wv1 if n2 < 2 else (wv2 or 0.0)
    h1, h2 = n1 - 2 * math.floor(trim * n1), n2 - 2 * math.floor(trim * n2)
    d1 = (n1 - 1) * wv1 / (h1 * (h1 - 1)) if h1 > 1 else wv1 / n1
    d2 = (n2 - 1) * wv2 / (h2 * (h2 - 1)) if h2 > 1 else wv2 / n2
    se2, diff = d1 + d2, tm2 - tm1
    if se2 <= 0.0:
        return (0.0, None, 1.0) if diff == 0 else (None, None, 0.0)
    if n1 < 2 or n2 < 2:  # one variance for both sides: its degrees of freedom
        df = float(max(h1, h2) - 1)
    else:
        den = (d1 * d1 / (h1 - 1) if h1 > 1 else 0.0) + (d2 * d2 / (h2 - 1) if h2 > 1 else 0.0)
        df = se2 * se2 / den if den > 0 else None
    t = diff / math.sqrt(se2)
    return t, df, t_two_sided(t, df)


def _side_d(n: int, wv: float, trim: float) -> tuple[float, int]:
    """A side's contribution to the squared standard error of Yuen's test, and its h."""
    h = n - 2 * math.floor(trim * n)
    return ((n - 1) * wv / (h * (h - 1)) if h > 1 else wv / n), h


def yuen_stratified(groups, trim: float = 0.2):
    """Yuen's test within strata, combined: GROUPS holds (n1, tm1, wv1, n2, tm2, wv2, w) per stratum
    (trimmed means and winsorized variances of the stratum's instances on each side, and its weight
    w). The estimate is D = sum w (tm2 - tm1), its squared standard error S = sum w^2 (d1 + d2) with
    yuen()'s d per side, t = D / sqrt(S), and Welch-Satterthwaite degrees of freedom S^2 /
    sum w^4 (d1^2 / (h1 - 1) + d2^2 / (h2 - 1)). A side with one instance takes the other's
    variance (and its h for the degrees of freedom). One stratum is yuen(). Returns (t, df, p, effect) with effect
    = 100 D / sum w tm1, the weighted change in percent; t, df None where infinite."""
    if len(groups) == 1:
        n1, tm1, wv1, n2, tm2, wv2, _ = groups[0]
        return (*yuen(n1, tm1, wv1, n2, tm2, wv2, trim), 100.0 * (tm2 - tm1) / tm1 if tm1 else None)
    num = base = se2 = den = 0.0
    for n1, tm1, wv1, n2, tm2, wv2, w in groups:
        wv1 = wv2 if n1 < 2 else (wv1 or 0.0)
        wv2 = wv1 if n2 < 2 else (wv2 or 0.0)
        d1, h1 = _side_d(n1, wv1, trim)
        d2, h2 = _side_d(n2, wv2, trim)
        if n1 < 2:
            h1 = h2
        if n2 < 2:
            h2 = h1
        num += w * (tm2 - tm1)
        base += w * tm1
        se2 += w * w * (d1 + d2)
        den += w ** 4 * ((d1 * d1 / (h1 - 1) if h1 > 1 else 0.0) + (d2 * d2 / (h2 - 1) if h2 > 1 else 0.0))
    effect = 100.0 * num / base if base else None
    if se2 <= 0.0:
        return (0.0, None, 1.0, effect) if num == 0 else (None, None, 0.0, effect)
    t = num / math.sqrt(se2)
    df = se2 * se2 / den if den > 0 else None
    return t, df, t_two_sided(t, df), effect


def welch(n1: int, m1: float, v1: float | None, n2: int, m2: float, v2: float | None):
    """Welch's t-test of mean m2 against m1 with sample variances v1, v2: yuen() with trim 0."""
    return yuen(n1, m1, v1, n2, m2, v2, 0.0)


def trimmed(values, trim: float) -> tuple[int, float, float | None]:
    """(n, trimmed mean, winsorized variance) of VALUES, as queries/_internal/diff_side.sql computes them:
    the floor(trim * n) smallest and as many largest left out of the mean, and in the variance set
    to the smallest and largest kept."""
    import statistics

    v = sorted(values)
    n = len(v)
    g = math.floor(trim * n)
    lo, hi = v[g], v[n - g - 1]
    w = [min(max(x, lo), hi) for x in v]
    return n, statistics.fmean(v[g:n - g]), statistics.variance(w) if n > 1 else None


def z_test(diff: float, var: float | None):
    """A difference with variance var against 0: (z, None, p)."""
    if var is None:
        return None, None, None
    if var <= 0.0:
        return (0.0, None, 1.0) if diff == 0 else (None, None, 0.0)
    z = diff / math.sqrt(var)
    return z, None, t_two_sided(z, None)


def benjamini_hochberg(ps: list[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (q-values), in the order given."""
    m = len(ps)
    order = sorted(range(m), key=ps.__getitem__)
    out = [0.0] * m
    running = 1.0
    for rank in range(m, 0, -1):
        i = order[rank - 1]
        running = min(running, ps[i] * m / rank)
        out[i] = running
    return out


def paired(diffs, trim: float = 0.2):
    """The one-sample trimmed t-test (Tukey and McLaughlin) of paired differences against 0: the
    mean of DIFFS with the floor(trim * n) smallest and largest left out, its squared standard
    error (n - 1) s_w^2 / (h (h - 1)) from the winsorized variance s_w^2, h = n - 2g kept, and
    h - 1 degrees of freedom. Returns (t, df, p, trimmed mean); (None, None, None, mean) with
    fewer than 3 differences; no spread at all: p = 1 for a mean of 0, else 0 (t, df None)."""
    n = len(diffs)
    if n == 0:
        return None, None, None, None
    _, tm, wv = trimmed(diffs, trim)
    if n < 3:
        return None, None, None, tm
    h = n - 2 * math.floor(trim * n)
    se2 = (n - 1) * (wv or 0.0) / (h * (h - 1))
    if se2 <= 0.0:
        return (0.0, None, 1.0, tm) if tm == 0 else (None, None, 0.0, tm)
    t = tm / math.sqrt(se2)
    return t, float(h - 1), t_two_sided(t, float(h - 1)), tm
