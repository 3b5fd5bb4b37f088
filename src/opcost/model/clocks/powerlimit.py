"""The composition layer's energy fit where networks ran at the device's power limit.

Why: a network at the limit carries one fact about power: its unlimited power would have been at least the
limit. Least squares on such networks found constant power (a_e = 0, k = the limit) and told a network that
draws 85 W that it draws 164 W. Here:

- the layer's prediction is capped: energy = min(a_e x S_e + k x time, cap x time) (model/composition/compose.py),
  the cap the power the limiter held (`effective_cap`: the median measured power of the networks within
  LIMIT_BAND of the device's nominal limit; with none there, the nominal limit; 0, no cap, on a device with
  none known);
- (a_e, k) minimise the squared relative errors of that capped prediction on the networks below the limit,
  and on a network at the limit only the part by which the unlimited prediction falls short of its measured
  energy (a censored observation) (`fit_energy`). With no network at the limit this is plain least squares.
  Where the networks do not identify (a_e, k), the tie goes to the layer closest to the ops' own energies,
  a_e = 1 and k = 0 (k in units of the cap): what an uncalibrated layer says.

Evidence and figures: docs/power.md, "The energy layer at the power limit".
"""

from __future__ import annotations

import numpy as np

from opcost.model.basis.nnls import nnls_relative

LIMIT_BAND = 0.97  # a network within 3 % of the nominal limit ran at the limit (the limiter holds just below it)
PRIOR = (1.0, 0.0)  # a_e, k / cap: the ops' own energies (an uncalibrated layer's)
TIE_TOL = 1e-9  # fits within this relative loss of the best (and 1e-18 per network) are the same fit


def at_limit(network_power_w: np.ndarray, limit_w: float) -> np.ndarray:
    """Which networks ran at the limit: measured power within LIMIT_BAND of the nominal `limit_w` (none
    where no limit is known). The one rule both the cap and the censored fit use."""
    p = np.asarray(network_power_w, float)
    return np.isfinite(p) & (p >= LIMIT_BAND * limit_w) if limit_w > 0 else np.zeros(p.shape, bool)


def effective_cap(network_power_w: np.ndarray, limit_w: float) -> float:
    """The power a device's limiter held: the median measured power of the networks `at_limit`, else
    `limit_w` itself; 0 (no cap) where no limit is known."""
    if not limit_w > 0:
        return 0.0
    at = np.asarray(network_power_w, float)[at_limit(network_power_w, limit_w)]
    return float(np.median(at)) if len(at) else float(limit_w)


def capped_energy(
    a: float, k: float, energy_sum: "float | np.ndarray", time_s: "float | np.ndarray", cap_w: float
) -> np.ndarray:
    """a x S_e + k x time, never above cap x time (no cap where cap <= 0)."""
    e = a * np.asarray(energy_sum, float) + k * np.asarray(time_s, float)
    return np.minimum(e, cap_w * np.asarray(time_s, float)) if cap_w > 0 else e


IDENTIFIED = 1e-8  # smallest/largest singular value of the active rows above which they identify (a_e, k)


def settle(
    s: np.ndarray, t: np.ndarray, e: np.ndarray, cap_w: float, censored: np.ndarray, x: np.ndarray
) -> np.ndarray | None:
    """The exact minimum of `fit_energy`'s loss near `x`, or None where the networks do not identify (a_e, k).

    Why: Nelder-Mead stops where the loss stops changing, ~1e-8 (relative) short of the minimum along its
    flattest direction, so a one-ulp change of an input (another CPU) moved the bundle's eighth digit. Near
    the minimum each residual is linear in (a_e, k) or constant (a censored network above its measured
    energy, a network whose prediction the cap holds): the minimum on those linear rows is one linear least
    squares, kept where its rows stay the same at the answer and it is non-negative."""
    rows = np.array([s, t]).T / e[:, None]
    held = cap_w * t if cap_w > 0 else np.full_like(t, np.inf)  # the energy above which the cap holds a network

    def linear_rows(x: np.ndarray) -> np.ndarray:
        u = x[0] * s + x[1] * t
        return np.asarray(np.where(censored, u < e, u < held), bool)

    for _ in range(5):
        linear = linear_rows(x)
        if linear.sum() < 2:
            return None
        sv = np.linalg.svd(rows[linear], compute_uv=False)
        if sv[-1] <= IDENTIFIED * sv[0]:
            return None
        new = np.linalg.lstsq(rows[linear], np.ones(int(linear.sum())), rcond=None)[0]
        if (new < 0).any():
            return None
        if (linear_rows(new) == linear).all():
            return np.asarray(new, float)
        x = new
    return None


def fit_energy(
    energy_sum: np.ndarray, time_s: np.ndarray, energy_j: np.ndarray, limit_w: float
) -> tuple[float, float, float]:
    """(a_e, k, cap): the capped energy layer (module docstring) of networks on a device whose nominal power
    limit is `limit_w` (0: none known), cap its `effective_cap`. With no network `at_limit`, or no limit:
    (a_e, k) >= 0 the least-squares fit on relative error, as before. Otherwise they
    minimise the squared relative errors of the capped prediction of the networks below the limit, plus, for
    a network at the limit, only the part by which the unlimited prediction falls short of its measured energy
    (all it says is "at least this"). Where those networks identify (a_e, k), the exact minimum (`settle`);
    where they do not (every network at the limit: a whole region is exactly 0), among fits as good as the
    best (TIE_TOL: equal up to rounding) the one closest to PRIOR. Two parameters: Nelder-Mead on |x|
    (non-negative, and the cap's kink needs no gradient), started at the prior and at the least-squares fit."""
    s, t, e = (np.asarray(x, float) for x in (energy_sum, time_s, energy_j))
    cap_w = effective_cap(e / t, limit_w)
    censored = at_limit(e / t, limit_w)
    plain = nnls_relative(np.array([s, t]).T, e)
    if not censored.any():
        return float(plain[0]), float(plain[1]), cap_w
    from scipy.optimize import minimize  # here, not at import: predictions load this module (model/basis/nnls.py)

    def loss(x: np.ndarray) -> float:
        a, k = np.abs(x)
        unlimited = a * s + k * t
        r = np.where(censored, np.minimum(unlimited / e - 1, 0.0), np.minimum(unlimited, cap_w * t) / e - 1)
        return float(np.sum(r**2))

    opts = {"xatol": 1e-10, "fatol": 1e-15, "maxiter": 4000}
    starts = [np.array(PRIOR, float), plain]
    best = min([np.abs(minimize(loss, x0, method="Nelder-Mead", options=opts).x) for x0 in starts] + [plain], key=loss)
    bound = loss(best) * (1 + TIE_TOL) + 1e-18 * len(e)
    exact = settle(s, t, e, cap_w, censored, best)
    if exact is not None and loss(exact) <= bound:
        return float(exact[0]), float(exact[1]), cap_w

    def tie_break(x: np.ndarray) -> float:
        a, k = np.abs(x)
        return float((a - PRIOR[0]) ** 2 + (k / cap_w - PRIOR[1]) ** 2 + 1e6 * max(0.0, loss(x) - bound))

    picks = [np.abs(minimize(tie_break, x0, method="Nelder-Mead", options=opts).x) for x0 in (best, starts[0])]
    pick = min(picks + [best], key=tie_break)
    return float(pick[0]), float(pick[1]), cap_w
