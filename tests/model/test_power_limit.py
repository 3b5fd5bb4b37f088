"""The energy layer where networks ran at the device's power limit (model/clocks/powerlimit.py): known answers.

Each case is built so its right answer follows in closed form from the rule, not from the code's output:
least squares where no network reaches the limit, the generating layer where enough networks lie below it,
and, where every network sits at the limit, the layer closest to the ops' own energies that still reaches
it. The old rule's answer on the same data is asserted beside, so each test shows the case matters."""

from __future__ import annotations

import numpy as np
import pytest

from opcost.model.basis.nnls import nnls_relative
from opcost.model.clocks import powerlimit
from opcost.model.composition import compose

CAP = 164.4  # W: what the A30's limiter held on the thesis networks (nominal 165 W)


def networks(power_per_s: np.ndarray, seconds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(S_e, time) of networks whose ops' own power (S_e / time) is `power_per_s`."""
    return power_per_s * seconds, seconds


def test_effective_cap_is_what_the_limiter_held() -> None:
    assert powerlimit.effective_cap(np.array([80.0, 164.0, 164.4, 164.9, 120.0]), 165.0) == pytest.approx(164.4)
    assert powerlimit.effective_cap(np.array([80.0, 150.0]), 250.0) == 250.0  # none near it: the nominal limit
    assert powerlimit.effective_cap(np.array([80.0, 150.0]), 0.0) == 0.0  # no limit known: no cap
    # the band: 0.97 x 165 = 160.05 W
    assert powerlimit.effective_cap(np.array([160.0, 161.0, 163.0]), 165.0) == pytest.approx(162.0)


def test_below_the_limit_it_is_least_squares_exactly() -> None:
    s, t = networks(np.array([60.0, 90.0, 120.0, 140.0, 150.0]), np.array([0.01, 0.02, 0.05, 0.1, 0.3]))
    e = 0.8 * s + 30.0 * t
    for cap in (0.0, 250.0):  # no limit, and a limit no network is near (150 + 30 = 180 < 0.97 x 250)
        a, k, got_cap = powerlimit.fit_energy(s, t, e, cap)
        assert (a, k) == pytest.approx((0.8, 30.0), rel=1e-9) and got_cap == cap


def test_networks_at_the_limit_are_censored_not_fitted() -> None:
    """The generating layer 0.8 S_e + 30 t, its big networks held at the cap: the capped fit gives it back;
    least squares on the capped energies does not (it bends toward the cap)."""
    own = np.array([50.0, 70.0, 90.0, 110.0, 185.0, 190.0, 200.0, 210.0])
    s, t = networks(own, np.linspace(0.01, 0.08, len(own)))
    e = np.minimum(0.8 * s + 30.0 * t, CAP * t)
    assert (e / t >= 0.97 * CAP).sum() == 4  # four at the limit, four below
    a, k, cap = powerlimit.fit_energy(s, t, e, CAP)
    assert (a, k) == pytest.approx((0.8, 30.0), rel=1e-12) and cap == pytest.approx(CAP)
    plain = nnls_relative(np.array([s, t]).T, e)
    assert abs(plain[0] / 0.8 - 1) > 0.05 or abs(plain[1] / 30.0 - 1) > 0.05


def test_every_network_at_the_limit_keeps_the_ops_own_power() -> None:
    """All networks at the cap, their ops' own power 150-180 W: any layer whose unlimited power reaches the
    cap on each fits exactly. The rule takes the one closest to (a_e, k / cap) = (1, 0): the binding
    network is the one of lowest own power m = 150 W, and the closest point of {m a + cap k' >= cap} is
    a = 1 + m L, k' = cap L, L = (cap - m) / (m^2 + cap^2). A small network whose ops draw 70 W is then
    predicted at a x 70 + k W, where least squares says the cap for everything."""
    own = np.array([150.0, 155.0, 162.0, 170.0, 180.0])
    s, t = networks(own, np.array([0.02, 0.05, 0.03, 0.1, 0.2]))
    e = CAP * t
    a, k, _ = powerlimit.fit_energy(s, t, e, CAP)
    m = own.min()
    lam = (CAP - m) / (m**2 + CAP**2)
    assert (a, k) == pytest.approx((1 + m * lam, CAP * CAP * lam), rel=1e-5)
    small = a * 70.0 + k
    assert small == pytest.approx(1.0436 * 70 + 7.87, rel=1e-3)  # 81 W, the same numbers written out
    plain = nnls_relative(np.array([s, t]).T, e)
    assert plain[0] * 70.0 + plain[1] > 150.0  # the old rule: constant power near the cap


def test_the_layer_caps_its_predictions_and_keeps_the_cap() -> None:
    comp = compose.Composition("inference", energy_coef={"energy_sum": 1.0, "time": 50.0}, power_cap_w=120.0)
    terms = {"energy_sum": 100.0 * 0.5}  # the ops' own 100 W over 0.5 s: 150 W unlimited
    assert comp.energy(terms, 0.5) == pytest.approx(120.0 * 0.5)
    assert comp.energy({"energy_sum": 20.0 * 0.5}, 0.5) == pytest.approx(10.0 + 25.0)  # 70 W: below it
    back = compose.Composition.from_json(comp.to_json())
    assert back.power_cap_w == 120.0 and back.energy(terms, 0.5) == pytest.approx(60.0)
    old = comp.to_json()
    del old["power_cap_w"]  # a bundle written before the cap: read as it was fitted, uncapped
    assert compose.Composition.from_json(old).energy(terms, 0.5) == pytest.approx(50.0 + 25.0)


def test_fit_sets_the_cap_from_the_networks_and_transfer_from_the_device() -> None:
    own = np.array([50.0, 70.0, 160.0, 175.0, 190.0])
    s, t = networks(own, np.linspace(0.01, 0.05, len(own)))
    measured_w = np.array([70.0, 86.0, 164.0, 164.4, 164.8])
    terms = [{"sum": x, "energy_sum": y} for x, y in zip(t, s)]
    comp = compose.fit("inference", terms, t, measured_w * t, 165.0)
    assert comp.power_cap_w == pytest.approx(164.4)
    big = {"sum": 0.1, "energy_sum": 200.0 * 0.1}
    assert comp.energy(big, 0.1) == pytest.approx(164.4 * 0.1)
    assert compose.fit("inference", terms, t, measured_w * t).power_cap_w == 0.0  # no limit given: no cap
    moved = compose.transfer([("A", comp, 1e-5, 100.0)], "inference", 1e-5, 100.0, 250.0)
    assert moved.power_cap_w == 250.0


def test_a_transferred_layers_energy_is_its_time_at_the_ops_time_weighted_power() -> None:
    """Known answer (issue 38, the RTX 2080 Ti's training power at exactly its 250 W limit): a source whose
    a_e and k would put a network above the limit; transferred, the energy is the composed time x the
    network's time-weighted op power (1 s at 100 W and 3 s at 200 W: 175 W), whatever a_e and k say, at most
    the limit; the calibrated source keeps its own a_e S_e + k t."""
    src = compose.Composition("training", energy_coef={"energy_sum": 1.25, "time": 18.0}, calibrated=True)
    moved = compose.transfer([("A", src, 1e-5, 160.0)], "training", 1e-5, 230.0, 250.0)
    terms = {"sum": 4.0, "energy_sum": 700.0, "raw_sum_s": 4.0, "raw_sum_j": 1 * 100.0 + 3 * 200.0}
    assert moved.energy(terms, 2.0) == pytest.approx(175.0 * 2.0)  # a source without a power ratio: 1
    # sources whose networks drew 1.1 and 1.21 x their ops' power: their geometric mean, 1.155, carries over
    a = compose.Composition(
        "training", energy_coef={"energy_sum": 1.0, "time": 0.0, "power_ratio": 1.1}, calibrated=True
    )
    b = compose.Composition(
        "training", energy_coef={"energy_sum": 1.0, "time": 0.0, "power_ratio": 1.21}, calibrated=True
    )
    moved = compose.transfer([("A", a, 1e-5, 160.0), ("B", b, 1e-5, 160.0)], "training", 1e-5, 230.0, 250.0)
    assert moved.energy(terms, 2.0) == pytest.approx(1.1**1.5 * 175.0 * 2.0)
    assert compose.Composition.from_json(moved.to_json()).energy(terms, 2.0) == pytest.approx(moved.energy(terms, 2.0))
    hot = {**terms, "raw_sum_j": 4 * 300.0}
    assert moved.energy(hot, 2.0) == pytest.approx(250.0 * 2.0)  # the limit still holds
    assert src.energy(terms, 2.0) == pytest.approx(1.25 * 700.0 + 18.0 * 2.0)


def test_the_power_ratio_is_network_power_over_its_ops_time_weighted_power() -> None:
    terms = [{"raw_sum_s": 2.0, "raw_sum_j": 200.0}, {"raw_sum_s": 1.0, "raw_sum_j": 150.0}, {"raw_sum_s": 1.0,
             "raw_sum_j": 120.0}]  # fmt: skip
    t = np.array([1.0, 0.5, 2.0])
    e = np.array([110.0, 0.5 * 150.0 * 1.3, 2.0 * 120.0 * 0.9])  # 1.1, 1.3, 0.9 x the ops' power
    assert compose.power_ratio(terms, t, e) == pytest.approx(1.1)  # the median
    assert compose.power_ratio([{"raw_sum_s": 0.0}], np.array([1.0]), np.array([1.0])) is None


def test_a_one_ulp_change_of_the_inputs_leaves_a_censored_fit_where_it_was() -> None:
    """Another CPU sums in another order: the last bit of a network's op energy moves. With networks at the
    limit the fit was a Nelder-Mead search that stops ~1e-8 short of the minimum along its flattest direction,
    so the bundle's eighth digit moved (issue 40: RTX 2080 Ti training, 26.88251355 -> 26.8825132). The
    minimum on the networks below the limit is exact: it moves by rounding only. Noisy energies, so the
    minimum is not a zero-residual point the search could hit exactly."""
    rng = np.random.default_rng(3)
    own = np.linspace(60.0, 220.0, 12)
    s, t = networks(own, np.linspace(0.01, 0.2, len(own)))
    e = np.minimum((0.8 * s + 30.0 * t) * (1 + 0.05 * rng.standard_normal(len(own))), CAP * t)
    censored = powerlimit.at_limit(e / t, CAP)
    assert 2 <= censored.sum() <= len(own) - 3  # some at the limit, enough below it to identify (a_e, k)
    a, k, _ = powerlimit.fit_energy(s, t, e, CAP)
    for seed in range(4):
        flip = np.random.default_rng(seed).choice([-1.0, 1.0], len(s))
        a2, k2, _ = powerlimit.fit_energy(s * (1 + flip * 2.2e-16), t, e, CAP)
        assert (a2, k2) == pytest.approx((a, k), rel=1e-12)
