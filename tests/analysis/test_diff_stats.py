"""traceql.stats, the statistics of `traceql diff`, against independent computations: Student's t
tail by numerical integration of its density and by published quantiles, Welch's and Yuen's tests
recomputed from the raw samples, Benjamini-Hochberg by its definition."""

from __future__ import annotations

import math
import statistics
from random import Random

import pytest

from traceql.analysis.stats import (
    benjamini_hochberg, betainc, t_two_sided, trimmed, welch, yuen, yuen_stratified, z_test)


def t_tail_by_integration(t: float, df: float, steps: int = 20_000) -> float:
    """P(|T| >= |t|) = 2 * integral from |t| to infinity of Student's density, by Simpson's rule
    after the substitution x = |t| + u / (1 - u) (u in [0, 1))."""
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)

    def f(u):
        if u >= 1.0:
            return 0.0
        x = abs(t) + u / (1 - u)
        return c * (1 + x * x / df) ** (-(df + 1) / 2) / (1 - u) ** 2

    h = 1.0 / steps
    total = f(0.0) + f(1.0) + sum((4 if i % 2 else 2) * f(i * h) for i in range(1, steps))
    return 2 * total * h / 3


@pytest.mark.parametrize("t, df", [(0.0, 5), (0.5, 3), (1.0, 1.5), (2.0, 10), (2.5, 2.7), (3.5, 4.3),
                                   (-4.0, 30), (6.0, 12.5), (1.7, 150), (8.0, 3)])
def test_t_tail_matches_numerical_integration(t, df):
    got = t_two_sided(t, df)
    want = t_tail_by_integration(t, df)
    assert got == pytest.approx(want, rel=1e-6, abs=1e-12)


@pytest.mark.parametrize("t, df, p", [(2.228138851986274, 10, 0.05), (4.032142983557536, 5, 0.01),
                                      (12.70620473617471, 1, 0.05), (1.959963984540054, None, 0.05),
                                      (2.575829303548901, math.inf, 0.01), (1.9842169515086827, 99, 0.05)])
def test_t_tail_at_published_quantiles(t, df, p):
    assert t_two_sided(t, df) == pytest.approx(p, rel=1e-9)


@pytest.mark.parametrize("t", [0.3, 1.0, 4.0, 50.0])
def test_t_tail_closed_forms(t):
    assert t_two_sided(t, 1) == pytest.approx(1 - 2 * math.atan(t) / math.pi, rel=1e-12)  # Cauchy
    assert t_two_sided(t, 2) == pytest.approx(1 - t / math.sqrt(2 + t * t), rel=1e-12)


def test_betainc_edges_and_symmetry():
    assert betainc(2.0, 3.0, 0.0) == 0.0 and betainc(2.0, 3.0, 1.0) == 1.0
    for a, b, x in [(0.5, 0.5, 0.3), (2.0, 5.0, 0.7), (10.0, 0.5, 0.95)]:
        assert betainc(a, b, x) == pytest.approx(1 - betainc(b, a, 1 - x), abs=1e-13)
    assert betainc(1.0, 1.0, 0.37) == pytest.approx(0.37, abs=1e-14)  # the uniform distribution


def _welch_by_hand(x, y):
    n1, n2 = len(x), len(y)
    v1, v2 = statistics.variance(x) / n1, statistics.variance(y) / n2
    t = (statistics.fmean(y) - statistics.fmean(x)) / math.sqrt(v1 + v2)
    df = (v1 + v2) ** 2 / (v1 ** 2 / (n1 - 1) + v2 ** 2 / (n2 - 1))
    return t, df


def _yuen_by_hand(x, y, trim):
    def side(v):
        v = sorted(v)
        n = len(v)
        g = int(trim * n)
        h = n - 2 * g
        w = [v[g]] * g + v[g:n - g] + [v[n - g - 1]] * g
        return sum(v[g:n - g]) / h, (n - 1) * statistics.variance(w) / (h * (h - 1)), h

    m1, d1, h1 = side(x)
    m2, d2, h2 = side(y)
    t = (m2 - m1) / math.sqrt(d1 + d2)
    df = (d1 + d2) ** 2 / (d1 ** 2 / (h1 - 1) + d2 ** 2 / (h2 - 1))
    return t, df


def _samples(seed, n, mean, sd, outliers=0):
    rng = Random(seed)
    v = [rng.gauss(mean, sd) for _ in range(n)]
    for i in range(outliers):
        v[i] *= 3
    return v


@pytest.mark.parametrize("n1, n2, shift", [(40, 36, 1.2), (5, 7, 1.0), (300, 20, 1.05)])
def test_welch_against_the_formula(n1, n2, shift):
    x, y = _samples(1, n1, 100.0, 8.0), _samples(2, n2, 100.0 * shift, 11.0)
    t, df, p = welch(n1, statistics.fmean(x), statistics.variance(x), n2, statistics.fmean(y), statistics.variance(y))
    t0, df0 = _welch_by_hand(x, y)
    assert t == pytest.approx(t0, rel=1e-12) and df == pytest.approx(df0, rel=1e-12)
    assert p == pytest.approx(t_tail_by_integration(t0, df0), rel=1e-6, abs=1e-12)


@pytest.mark.parametrize("trim", [0.1, 0.2, 0.25])
def test_yuen_against_the_formula(trim):
    x, y = _samples(3, 40, 60.0, 3.0, outliers=1), _samples(4, 36, 72.0, 3.6, outliers=2)
    n1, tm1, w1 = trimmed(x, trim)
    n2, tm2, w2 = trimmed(y, trim)
    t, df, p = yuen(n1, tm1, w1, n2, tm2, w2, trim)
    t0, df0 = _yuen_by_hand(x, y, trim)
    assert t == pytest.approx(t0, rel=1e-12) and df == pytest.approx(df0, rel=1e-12)
    assert p == pytest.approx(t_tail_by_integration(t0, df0), rel=1e-6, abs=1e-30)


def test_trimming_sees_through_a_warm_up_outlier():
    """Two 3x warm-up instances among 40 hide a 20 % shift from Welch's test, not from Yuen's."""
    x, y = _samples(5, 40, 60.0, 3.0, outliers=2), _samples(6, 36, 72.0, 3.6, outliers=2)
    plain = welch(40, statistics.fmean(x), statistics.variance(x), 36, statistics.fmean(y), statistics.variance(y))
    robust = yuen(*trimmed(x, 0.2), *trimmed(y, 0.2), 0.2)
    assert plain[2] > 0.01 > 1e-6 > robust[2]


def test_tests_without_noise_or_without_instances():
    assert welch(1, 5.0, None, 1, 9.0, None) == (None, None, None)  # one instance a side: untested
    assert welch(0, 0.0, None, 4, 1.0, 1.0) == (None, None, None)
    assert welch(3, 5.0, 0.0, 3, 5.0, 0.0) == (0.0, None, 1.0)  # no spread, equal
    assert welch(3, 5.0, 0.0, 3, 6.0, 0.0) == (None, None, 0.0)  # no spread, different
    t, df, p = welch(1, 10.0, None, 5, 12.0, 4.0)  # one instance: the other side's variance for both
    assert t == pytest.approx(2.0 / math.sqrt(4.0 / 1 + 4.0 / 5)) and df == pytest.approx(4.0)
    assert z_test(3.0, None) == (None, None, None) and z_test(0.0, 0.0) == (0.0, None, 1.0)
    z, _, p = z_test(1.959963984540054, 1.0)
    assert z == pytest.approx(1.959963984540054) and p == pytest.approx(0.05, rel=1e-9)


def test_trimmed_matches_its_definition():
    v = [10, 1, 7, 3, 100, 4, 5, 6, 2, 9]
    n, tm, wv = trimmed(v, 0.2)  # g = 2: keep 3..9 sorted middle, winsorize to 3 and 9
    assert n == 10 and tm == pytest.approx(statistics.fmean([3, 4, 5, 6, 7, 9]))
    assert wv == pytest.approx(statistics.variance([3, 3, 3, 4, 5, 6, 7, 9, 9, 9]))
    assert trimmed([4], 0.2) == (1, 4.0, None)


def test_benjamini_hochberg_matches_its_definition():
    rng = Random(7)
    ps = [rng.random() ** 3 for _ in range(57)] + [0.01, 0.01, 1.0]
    m = len(ps)
    ranked = sorted(ps)
    want = [min(1.0, min(ranked[j] * m / (j + 1) for j in range(m) if ranked[j] >= p)) for p in ps]
    assert benjamini_hochberg(ps) == pytest.approx(want, rel=1e-12)
    assert benjamini_hochberg([]) == []


def _stratified_by_hand(strata, trim):
    """sum_s w_s (tm2 - tm1) over sqrt(sum_s w_s^2 (d1 + d2)), from the raw samples; w_s = the
    stratum's share of calls on each side, added."""
    n1 = sum(len(x) for x, _ in strata)
    n2 = sum(len(y) for _, y in strata)
    num = se2 = den = base = 0.0
    for x, y in strata:
        w = len(x) / n1 + len(y) / n2
        parts = []
        for v in (x, y):
            v = sorted(v)
            n = len(v)
            g = int(trim * n)
            h = n - 2 * g
            wins = [v[g]] * g + v[g:n - g] + [v[n - g - 1]] * g
            parts.append((sum(v[g:n - g]) / h, (n - 1) * statistics.variance(wins) / (h * (h - 1)), h))
        (m1, d1, h1), (m2, d2, h2) = parts
        num += w * (m2 - m1)
        base += w * m1
        se2 += w * w * (d1 + d2)
        den += w ** 4 * (d1 * d1 / (h1 - 1) + d2 * d2 / (h2 - 1))
    return num / math.sqrt(se2), se2 * se2 / den, 100 * num / base


def _groups(strata, trim):
    n1 = sum(len(x) for x, _ in strata)
    n2 = sum(len(y) for _, y in strata)
    return [(*trimmed(x, trim), *trimmed(y, trim), len(x) / n1 + len(y) / n2) for x, y in strata]


def test_stratified_against_the_formula():
    strata = [(_samples(11, 30, 20.0, 0.8), _samples(12, 27, 20.2, 0.9)),
              (_samples(13, 12, 80.0, 2.5, outliers=1), _samples(14, 15, 96.0, 3.0)),
              (_samples(15, 8, 50.0, 1.5), _samples(16, 6, 50.5, 1.2))]
    t, df, p, effect = yuen_stratified(_groups(strata, 0.2), 0.2)
    t0, df0, effect0 = _stratified_by_hand(strata, 0.2)
    assert t == pytest.approx(t0, rel=1e-12) and df == pytest.approx(df0, rel=1e-12)
    assert effect == pytest.approx(effect0, rel=1e-12)
    assert p == pytest.approx(t_tail_by_integration(t0, df0), rel=1e-6, abs=1e-30)


def test_one_stratum_is_yuens_test():
    x, y = _samples(17, 40, 60.0, 3.0, outliers=1), _samples(18, 36, 66.0, 3.3)
    t, df, p, effect = yuen_stratified(_groups([(x, y)], 0.2), 0.2)
    assert (t, df, p) == yuen(*trimmed(x, 0.2), *trimmed(y, 0.2), 0.2)
    assert effect == pytest.approx(100 * (trimmed(y, 0.2)[1] / trimmed(x, 0.2)[1] - 1), rel=1e-12)


def test_strata_see_a_change_the_spread_between_them_hides():
    """One kernel name at three shapes (20, 80 and 50 us): the middle one 20 % slower is lost in
    the pooled spread and found within the strata."""
    strata = [(_samples(21, 40, 20.0, 0.6), _samples(22, 40, 20.0, 0.6)),
              (_samples(23, 40, 80.0, 2.4), _samples(24, 40, 96.0, 2.9)),
              (_samples(25, 40, 50.0, 1.5), _samples(26, 40, 50.0, 1.5))]
    pooled = yuen(*trimmed([v for x, _ in strata for v in x], 0.2), *trimmed([v for _, y in strata for v in y], 0.2),
                  0.2)
    t, df, p, effect = yuen_stratified(_groups(strata, 0.2), 0.2)
    assert pooled[2] > 0.01 and p < 1e-12
    assert effect == pytest.approx(100 * 16 / 150, abs=1.0)  # +16 us of 20 + 80 + 50


def _paired_by_hand(d, trim):
    v = sorted(d)
    n = len(v)
    g = math.floor(trim * n)
    kept = v[g:n - g]
    w = [min(max(x, kept[0]), kept[-1]) for x in v]
    h = n - 2 * g
    tm = statistics.fmean(kept)
    se = math.sqrt((n - 1) * statistics.variance(w) / (h * (h - 1)))
    return tm, tm / se, h - 1


@pytest.mark.parametrize("n, trim, shift", [(7, 0.2, 0.0), (19, 0.2, 3.0), (30, 0.0, -1.5), (12, 0.1, 0.7)])
def test_paired_trimmed_test_by_hand(n, trim, shift):
    from traceql.analysis.stats import paired

    rng = Random(n)
    d = [shift + rng.gauss(0, 2) + (15 if i == 0 else 0) for i in range(n)]  # one wild pair
    t, df, p, tm = paired(d, trim)
    tm0, t0, df0 = _paired_by_hand(d, trim)
    assert tm == pytest.approx(tm0, rel=1e-12) and t == pytest.approx(t0, rel=1e-12) and df == df0
    assert p == pytest.approx(t_tail_by_integration(t0, df0), rel=1e-6)


def test_paired_edges():
    from traceql.analysis.stats import paired

    assert paired([], 0.2) == (None, None, None, None)
    assert paired([4.0, 6.0], 0.2) == (None, None, None, 5.0)  # too few for a noise estimate
    assert paired([0, 0, 0, 0], 0.2) == (0.0, None, 1.0, 0.0)
    assert paired([3, 3, 3, 3], 0.2) == (None, None, 0.0, 3.0)  # a constant change: no noise at all
