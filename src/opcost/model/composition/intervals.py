"""90 % prediction intervals of a measured value given its predicted one: which rule, from which scores.

The scores are out-of-sample signed log errors e = log(predicted / measured) of held-out networks
(model/training/netval.py), each with a group label: what was held out together (a model's input sizes, or a
family). Groups, not scores, are the exchangeable unit: a model's input sizes share their layers and their
errors. An interval is a pair of bounds on log(measured / predicted), so the measured value lies in
predicted x [exp(lo), exp(hi)] (never zero or negative). Which rule, by the number of groups G:

- G >= 19 (`RULE_CONFORMAL`, `min_conformal_groups`): grouped split-conformal on |e| (`conformal_q`), +-q:
  distribution-free, and the thesis errors have heavy tails.
- 2 <= G < 19 (`RULE_NORMAL`): a 90 % conformal quantile does not exist or is the largest score; instead the
  normal prediction interval of a new group's network from the group means: centre m (the mean of the group
  means), bounds -m +- t_{(1 + level)/2, G - 1} sqrt(s_b^2 (1 + 1/G) + s_w^2 (1 - mean(1/n_g))), so
  asymmetric around the prediction when the errors have a mean.
- G < 2 (`RULE_FALLBACK`): the largest |e|, never under the uncalibrated +-30 %.

Heteroscedastic scores: each may carry a covariate c known before its network was measured (netval.COVARIATE);
Var(e | c) = a (1 + r c^2) (`scale_ratio`), the rule runs on e / s(c), s(c) = sqrt(1 + r c^2), and a question's
bounds are scaled by s(c_question); r = 0 (no trend, no covariates) is the plain rule. The scale model is not
extrapolated: a question beyond the largest |c| it saw (`span`) is scaled at that edge and `outside` says so.
The note names the rule. Why each piece, and the figures: docs/intervals.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

INTERVAL_LEVEL = 0.9
UNCALIBRATED_HALF_WIDTH = 0.3  # +-30 % where no measured network says better
MIN_NORMAL_GROUPS = 2  # a spread needs one degree of freedom: G - 1 >= 1
RULE_CONFORMAL, RULE_NORMAL, RULE_FALLBACK = "conformal", "normal", "fallback"
RULE_NOTES = {
    RULE_CONFORMAL: "split conformal, the ceil((G + 1) x {level:g})-th smallest |log error| by group",
    RULE_NORMAL: "too few groups for a {level:.0%} split-conformal quantile below the largest score: a normal "
    "prediction interval on the group means of the signed log errors, centre m, half-width t(G - 1) x "
    "sqrt(s_b^2 (1 + 1/G) + within-group variance)",
    RULE_FALLBACK: "too few groups for any spread: the largest |log error|, at least +-{floor:.0%}",
}


@dataclass(frozen=True)
class LogInterval:
    """Bounds on log(measured / predicted): the measured value lies in predicted x [exp(lo), exp(hi)]."""

    lo: float
    hi: float
    n: int  # finite scores it rests on
    groups: int  # the groups they form
    rule: str  # RULE_CONFORMAL / RULE_NORMAL / RULE_FALLBACK
    ratio: float = 0.0  # r of the scale model s(c) = sqrt(1 + r c^2) it was normalised with (0: none)
    span: float = math.inf  # the largest |c| among the scores' covariates (inf: no covariates recorded)

    @property
    def half_width(self) -> float:
        return 0.5 * (self.hi - self.lo)

    @property
    def centre(self) -> float:
        return 0.5 * (self.hi + self.lo)

    def widened(self, factor: float) -> "LogInterval":
        """The half-width x `factor` about the same centre (a transferred layer, an extrapolating question)."""
        c, h = self.centre, self.half_width * float(factor)
        return replace(self, lo=c - h, hi=c + h)

    def scaled(self, covariate: float) -> "LogInterval":
        """A normalised interval as bounds for a question of covariate c: lo and hi x s(c) (`scale_of`), c held
        at the largest |c| the scale model saw (`span`; module docstring: it is not extrapolated)."""
        s = float(scale_of(min(abs(float(covariate)), self.span), self.ratio))
        return self if s == 1.0 else replace(self, lo=self.lo * s, hi=self.hi * s)

    def outside(self, covariate: float) -> bool:
        """Whether a question's covariate lies beyond every score's (|c| > `span`): its interval rests on a
        scale the measured networks did not reach, so the question extrapolates."""
        return bool(np.isfinite(covariate) and abs(float(covariate)) > self.span * (1 + 1e-9))

    def bounds(self, value: float) -> tuple[float, float]:
        return float(value * np.exp(self.lo)), float(value * np.exp(self.hi))

    def contains(self, log_ratio: float) -> bool:
        """Whether log(measured / predicted) lies in the interval."""
        return bool(self.lo <= log_ratio <= self.hi)

    def note(self, level: float = INTERVAL_LEVEL) -> str:
        base = RULE_NOTES[self.rule].format(level=level, floor=UNCALIBRATED_HALF_WIDTH)
        if self.ratio > 0:
            base += f"; scores normalised by sqrt(1 + {self.ratio:.3g} c^2), c = log(predicted / sum of op costs)"
        return base


def log_errors(rel_errors: "Sequence[float] | np.ndarray") -> np.ndarray:
    """Signed log(predicted / measured) from relative errors r = predicted / measured - 1."""
    r = np.asarray(rel_errors, float)
    out: np.ndarray = np.log1p(np.clip(r, -0.999, None))
    return out


def log_scores(rel_errors: "Sequence[float] | np.ndarray") -> np.ndarray:
    """|log(measured / predicted)| from relative errors r = predicted / measured - 1."""
    out: np.ndarray = np.abs(log_errors(rel_errors))
    return out


def _groups(n: int, groups: "Sequence[str] | None") -> np.ndarray:
    g = np.asarray(list(groups), dtype=object) if groups is not None else np.arange(n).astype(object)
    if len(g) != n:
        raise ValueError(f"{n} scores but {len(g)} group labels")
    return g


def conformal_q(
    scores: "Sequence[float] | np.ndarray", level: float = INTERVAL_LEVEL, groups: "Sequence[str] | None" = None
) -> float | None:
    """The split-conformal quantile of absolute scores: the ceil((n + 1) level)-th smallest; None when
    there are too few scores for that level (ceil((n + 1) level) > n).

    With `groups` (one label per score: the model, or family, held out together), the unit of exchangeability
    is the group, not the score: a model's input sizes share their layers and their errors. Each score then
    weighs 1 / (its group's size), so every group weighs 1, and q is the smallest score whose cumulative weight
    reaches level x (G + 1), G groups (pooled empirical CDFs, Dunn, Wasserman & Ramdas 2022); None when
    level x (G + 1) > G. With one score per group this is the rule above."""
    s = np.abs(np.asarray(scores, float))
    g = _groups(len(s), groups)
    ok = np.isfinite(s)
    s, g = s[ok], g[ok].astype(str)
    if not len(s):
        return None
    _, inv, count = np.unique(g, return_inverse=True, return_counts=True)
    n_groups = len(count)
    need = level * (n_groups + 1)
    if need > n_groups * (1 + 1e-12) or need <= 0:
        return None
    order = np.argsort(s, kind="stable")
    cum = np.cumsum(1.0 / count[inv][order])
    k = int(np.searchsorted(cum, need * (1 - 1e-12)))
    return float(s[order][min(k, len(s) - 1)])


def min_conformal_groups(level: float = INTERVAL_LEVEL) -> int:
    """The fewest groups whose conformal quantile at `level` is not the largest score: ceil(level (G + 1)) <= G - 1,
    i.e. G >= (1 + level) / (1 - level) (19 at 90 %)."""
    return int(np.ceil((1 + level) / (1 - level) - 1e-9))


def t_quantile(p: float, df: float) -> float:
    """Student t quantile at p in (0.5, 1) for a whole number of degrees of freedom, by bisection on the
    closed-form CDF (`_t_central`). Not scipy.special: importing it costs a prediction about 0.17 s
    (bench/predictor_latency.py), and df here is always G - 1, a whole number."""
    nu = int(df)
    if nu != df or nu < 1 or not 0.5 < p < 1:
        raise ValueError(f"t quantile needs a whole df >= 1 and 0.5 < p < 1, got df={df}, p={p}")
    target, lo, hi = 2.0 * p - 1.0, 0.0, 1.0
    while _t_central(hi, nu) < target:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _t_central(mid, nu) < target else (lo, mid)
        if hi - lo <= 1e-13 * hi:
            break
    return 0.5 * (lo + hi)


def _t_central(t: float, nu: int) -> float:
    """P(|T| <= t) for Student's t with a whole number nu of degrees of freedom: the finite series in
    theta = atan(t / sqrt(nu)) (Abramowitz & Stegun 26.7.3-4): odd nu (2/pi)(theta + sin theta x sum over
    cos^(2k-1)), even nu sin theta x sum over cos^(2k); each term the last times cos^2 and a ratio of
    consecutive integers."""
    theta = math.atan(t / math.sqrt(nu))
    c2, s = math.cos(theta) ** 2, math.sin(theta)
    if nu % 2:
        term, total = math.cos(theta), 0.0
        for k in range(1, (nu - 1) // 2 + 1):  # cos, (2/3) cos^3, (2 4 / 3 5) cos^5, ...
            total += term
            term *= c2 * (2 * k) / (2 * k + 1)
        return (2.0 / math.pi) * (theta + s * total)
    term, total = 1.0, 0.0
    for k in range(1, nu // 2 + 1):  # 1, (1/2) cos^2, (1 3 / 2 4) cos^4, ...
        total += term
        term *= c2 * (2 * k - 1) / (2 * k)
    return s * total


def normal_interval(
    errors: "Sequence[float] | np.ndarray",
    level: float = INTERVAL_LEVEL,
    groups: "Sequence[str] | None" = None,
    extra_params: int = 0,
) -> tuple[float, float] | None:
    """(m, h): centre and half-width of the normal prediction interval of a new group's error from signed
    errors by group (module docstring): m the mean of the group means, h = t_{(1+level)/2, G-1} x sqrt(s_b^2
    (1 + 1/G) + s_w^2 (1 - mean(1/n_g))). None with fewer than MIN_NORMAL_GROUPS groups."""
    e = np.asarray(errors, float)
    g = _groups(len(e), groups)
    ok = np.isfinite(e)
    e, g = e[ok], g[ok].astype(str)
    _, inv, count = np.unique(g, return_inverse=True, return_counts=True)
    n_groups = len(count)
    if n_groups < MIN_NORMAL_GROUPS:
        return None
    means = np.bincount(inv, weights=e) / count
    s_b2 = float(np.var(means, ddof=1))
    dev = e - means[inv]
    df_w = len(e) - n_groups
    s_w2 = float(dev @ dev / df_w) if df_w > 0 else 0.0
    v = s_b2 * (1 + 1 / n_groups) + s_w2 * (1 - float(np.mean(1.0 / count)))
    h = t_quantile(0.5 * (1 + level), max(n_groups - 1 - extra_params, 1)) * float(np.sqrt(v))
    return float(means.mean()), h


def covariate(predicted_t_s: "float | np.ndarray", summed_t_s: "float | np.ndarray") -> "float | np.ndarray":
    """A network's interval covariate (module docstring, heteroscedastic scores): log(predicted / plain sum of
    op costs), known before the network is measured: how far its answer rests on the composition layer's
    fitted overhead terms rather than on op costs. Not finite where either time is not a positive number."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out: float | np.ndarray = np.log(np.asarray(predicted_t_s, float) / np.asarray(summed_t_s, float))
    return out


def question_covariate(predicted_t_s: float, summed_t_s: float) -> float:
    """`covariate` of one network, 0 (the narrowest scale: a network the composition layer did not move)
    where it is not finite: what a prediction's interval and a transferred layer's scores are scaled by."""
    c = float(covariate(predicted_t_s, summed_t_s))
    return c if np.isfinite(c) else 0.0


def scale_of(covariate: "float | np.ndarray", ratio: float) -> "float | np.ndarray":
    """s(c) = sqrt(1 + r c^2): a score's spread relative to one of covariate 0 (module docstring)."""
    if ratio <= 0:
        return 1.0 if np.ndim(covariate) == 0 else np.ones(np.shape(covariate))
    s = np.sqrt(1.0 + ratio * np.square(covariate))
    return float(s) if np.ndim(s) == 0 else s


def scale_ratio(
    errors: "Sequence[float] | np.ndarray", covariates: "Sequence[float] | np.ndarray",
    groups: "Sequence[str] | None" = None,
) -> float:  # fmt: skip
    """r of Var(e | c) = a (1 + r c^2) (module docstring): (e - m)^2, m the group-weighted mean, regressed on
    [1, c^2] by non-negative least squares with each group weighing 1 (a model's input sizes are one draw);
    0 where the fit gives no trend, a <= 0, or there are fewer than three groups (no residual degree of freedom
    for a two-parameter variance model)."""
    e, c = np.asarray(errors, float), np.asarray(covariates, float)
    if len(c) != len(e):
        raise ValueError(f"{len(e)} scores but {len(c)} covariates")
    g = _groups(len(e), groups)
    ok = np.isfinite(e) & np.isfinite(c)
    e, c, g = e[ok], c[ok], g[ok].astype(str)
    _, inv, count = np.unique(g, return_inverse=True, return_counts=True)
    if len(count) < 3:
        return 0.0
    w = 1.0 / count[inv]
    m = float(w @ e / w.sum())
    sw = np.sqrt(w)
    A = np.column_stack([np.ones_like(c), c * c]) * sw[:, None]
    y = (e - m) ** 2 * sw
    a, b = _nnls2(A, y)
    return float(b / a) if a > 0 and b > 0 else 0.0


def _nnls2(A: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Non-negative least squares with two columns, exactly: the unconstrained solution if both are >= 0,
    else the better of the two one-column fits (each clipped at 0). Not scipy.optimize: its import costs a
    prediction time (bench/predictor_latency.py)."""
    x, *_ = np.linalg.lstsq(A, y, rcond=None)
    if (x >= 0).all():
        return float(x[0]), float(x[1])
    best, best_r = (0.0, 0.0), float(y @ y)
    for j in (0, 1):
        col = A[:, j]
        den = float(col @ col)
        xj = max(float(col @ y) / den, 0.0) if den > 0 else 0.0
        r = float(np.sum((y - xj * col) ** 2))
        if r < best_r:
            best, best_r = ((xj, 0.0) if j == 0 else (0.0, xj)), r
    return best


def log_interval(
    errors: "Sequence[float] | np.ndarray", level: float = INTERVAL_LEVEL, groups: "Sequence[str] | None" = None,
    covariates: "Sequence[float] | np.ndarray | None" = None,
) -> LogInterval:  # fmt: skip
    """The `level` interval of log(measured / predicted) from signed out-of-sample errors log(predicted /
    measured) (`log_errors`) and their group labels (None: every score its own group), by the rule the
    number of groups allows (module docstring). One rule for predictions and for the coverage netval
    reports, so coverage judges what predictions do. With `covariates` (one per score) the scores are
    normalised by the fitted scale model and the interval is a normalised one (`ratio` > 0): a question's
    bounds are `.scaled(its covariate)`; without, or where the fit finds no trend, the plain interval."""
    e = np.asarray(errors, float)
    g = _groups(len(e), groups)
    ok = np.isfinite(e)
    ratio, span = 0.0, math.inf
    if covariates is not None:
        c = np.asarray(covariates, float)
        if len(c) != len(e):
            raise ValueError(f"{len(e)} scores but {len(c)} covariates")
        ok &= np.isfinite(c)
        span = float(np.abs(c[ok]).max()) if ok.any() else math.inf
        ratio = scale_ratio(e[ok], c[ok], g[ok])
        if ratio > 0:
            e = np.where(ok, e / scale_of(np.where(ok, c, 0.0), ratio), e)
    e, g = e[ok], g[ok].astype(str)
    n, n_groups = len(e), len(set(g))
    q = conformal_q(e, level, g) if n_groups >= min_conformal_groups(level) else None
    if q is not None:
        return LogInterval(-q, q, n, n_groups, RULE_CONFORMAL, ratio, span)
    got = normal_interval(e, level, g, extra_params=int(ratio > 0))  # the scale model's r: one more df spent
    if got is not None:
        m, h = got
        return LogInterval(-m - h, -m + h, n, n_groups, RULE_NORMAL, ratio, span)
    if ratio > 0:  # the fallback has no spread to scale: the plain scores
        return replace(log_interval(errors, level, groups), span=span)
    q = max(float(np.abs(e).max()) if n else 0.0, float(np.log1p(UNCALIBRATED_HALF_WIDTH)))
    return LogInterval(-q, q, n, n_groups, RULE_FALLBACK, span=span)
