"""Known answers: synthetic data whose right result is known before the code runs.

Each test here is built to fail when a number the project reports is computed wrongly (bench/mutate.py
applies such wrong changes one at a time and checks that a test here, or elsewhere, catches each):
- the composition layer recovers the coefficients that generated its networks, including the training
  optimizer term, and fits on relative, not absolute, error;
- a "90 %" interval holds 90 % of fresh networks drawn like its residuals;
- no held-out row (cross-validation), op or network (leave-one-network-out) reaches any fit: spies on
  the estimator the fits build and on the composition fit;
- a roofline uses the TF32 peak exactly where the device config allows TF32;
- a no-op costs what the device's measured no-ops cost.
Figures come from datasheets (the A30's 82 TF TF32, 10.3 TF FP32) or from the synthetic generator.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from torch import nn

from builders import catalog_row, layer_scores, module_spec
from opcost.devices import find_device
from opcost.model.basis.features import OpRecord
from opcost.model.basis.physics import roofline_s
from opcost.model.composition import compose, costing
from opcost.model.composition.compose import Costs
from opcost.model.composition.costing import OpCoster
from opcost.model.training import fit, netval
from opcost.params.train import TrainParams

TERA = 1e12
RNG_SEED = 20261124


# --------------------------------------------------------------------------------------------
# The composition layer
# --------------------------------------------------------------------------------------------

# matrix products charged 1.3 of their excess, every other op 1.3 - 0.5 = 0.8 (compose: memory_sum) where its
# input does not fit in L2 and 0.8 - 0.3 = 0.5 where it does (compose: l2_sum)
TRUE_TIME = {"sum": 1.3, "memory_sum": -0.5, "l2_sum": -0.3, "calls_floor": 0.7, "params_bw": 2.5, "const": 2e-4}
L2_A30 = 24 * 2**20  # B, GA100 per-SM share (devices.py)
TRUE_ENERGY = {"energy_sum": 1.1, "time": 60.0}
BANDWIDTH_A30 = 933e9  # B/s, datasheet


def synthetic_network(rng: np.random.Generator, n_ops: int, scale: float) -> tuple[Costs, np.ndarray, list[OpRecord]]:
    """Ops with known per-call costs, calls and parameter counts (a network of `scale` x the size)."""
    t = rng.uniform(5e-6, 5e-4, n_ops) * scale
    p = rng.uniform(80.0, 250.0, n_ops)
    calls = rng.integers(1, 6, n_ops).astype(float)
    params = rng.integers(1_000_000, 30_000_000, n_ops) * int(scale)
    kinds = ["BatchNorm2d" if i % 3 == 0 else "Linear" for i in range(n_ops)]  # a third not matrix products
    read = rng.uniform(0.1, 4.0, n_ops) * L2_A30  # inputs from a tenth of the A30's L2 to four times it
    records = [OpRecord(f"op{i}", kinds[i], {}, (1,), 1, {"params": int(params[i]), "bytes_read": int(read[i])})
               for i in range(n_ops)]  # fmt: skip
    return Costs(t, p, ["measured"] * n_ops, [None] * n_ops), calls, records


def synthetic_networks(mode: str, n: int, seed: int = RNG_SEED) -> tuple[list[dict[str, float]], list[tuple]]:
    rng = np.random.default_rng(seed)
    nets = [synthetic_network(rng, int(rng.integers(5, 40)), float(10 ** rng.uniform(0, 3))) for _ in range(n)]
    floor = 8e-6
    terms = [compose.network_terms(c, calls, recs, floor, find_device("A30"), mode) for c, calls, recs in nets]
    return terms, nets


def true_time(terms: dict[str, float]) -> float:
    return sum(TRUE_TIME[k] * terms[k] for k in compose.TIME_TERMS)


def test_network_terms_are_the_known_sums():
    """Every term from its definition: sum of calls x (t - floor)+, calls x floor, parameter bytes over the
    A30's 933 GB/s in training (the optimizer reads and writes every parameter), zero in inference."""
    t = np.array([1e-5, 3e-6, 2e-4])  # the second is below the floor: contributes nothing above it
    p = np.array([100.0, 50.0, 200.0])
    calls = np.array([2.0, 3.0, 1.0])
    recs = [OpRecord(f"o{i}", k, {}, (1,), 1, {"params": n})
            for i, (k, n) in enumerate(zip(["Linear", "ReLU", "BatchNorm2d"], [1000, 0, 250_000]))]  # fmt: skip
    for r in recs:  # the BatchNorm2d reads twice the A30's L2: half its input can be there
        r.metrics["bytes_read"] = 2 * L2_A30 if r.kind == "BatchNorm2d" else 1000
    costs = Costs(t, p, ["measured"] * 3, [None] * 3)
    floor = 5e-6
    tr = compose.network_terms(costs, calls, recs, floor, find_device("A30"), "training")
    assert tr["sum"] == pytest.approx(2 * 5e-6 + 0 + 1 * 1.95e-4, rel=1e-12)
    assert tr["memory_sum"] == pytest.approx(0 + 1 * 1.95e-4, rel=1e-12)  # ReLU and BatchNorm2d, not the Linear
    assert tr["l2_sum"] == pytest.approx(0.5 * 1.95e-4, rel=1e-12)  # the BatchNorm2d's half in L2; ReLU: no excess
    assert tr["calls_floor"] == pytest.approx(6 * 5e-6, rel=1e-12)
    assert tr["params_bw"] == pytest.approx((2 * 1000 + 250_000) * 4 / BANDWIDTH_A30, rel=1e-12)
    assert tr["energy_sum"] == pytest.approx(2 * 5e-6 * 100 + 1.95e-4 * 200, rel=1e-12)
    assert tr["raw_sum_s"] == pytest.approx(2e-5 + 9e-6 + 2e-4, rel=1e-12) and tr["const"] == 1.0
    assert compose.network_terms(costs, calls, recs, floor, find_device("A30"), "inference")["params_bw"] == 0.0


@pytest.mark.parametrize("mode", ["training", "inference"])
def test_composition_recovers_the_generating_coefficients(mode):
    """Networks whose measured time and energy are exactly the composition of known coefficients: the
    fit must give those coefficients back (the optimizer term only in training)."""
    terms, _ = synthetic_networks(mode, 12)
    expected = dict(TRUE_TIME) if mode == "training" else {**TRUE_TIME, "params_bw": 0.0}
    time_s = np.array([sum(expected[k] * t[k] for k in compose.TIME_TERMS) for t in terms])
    energy_j = np.array([TRUE_ENERGY["energy_sum"] * t["energy_sum"] + TRUE_ENERGY["time"] * ts
                         for t, ts in zip(terms, time_s)])  # fmt: skip
    comp = compose.fit(mode, terms, time_s, energy_j)
    assert comp.calibrated and comp.n_networks == 12
    for k in compose.TIME_TERMS:
        assert comp.time_coef[k] == pytest.approx(expected[k], rel=1e-6, abs=1e-9), k
    for k in compose.ENERGY_TERMS:
        assert comp.energy_coef[k] == pytest.approx(TRUE_ENERGY[k], rel=1e-6), k
    assert [comp.time(t) for t in terms] == pytest.approx(list(time_s), rel=1e-9)


def test_training_networks_need_the_optimizer_term():
    """Where parameter traffic is half of a training step, a layer without the optimizer term cannot fit
    the networks: its relative errors would be tens of percent; with it they are zero."""
    terms, _ = synthetic_networks("training", 12, seed=3)
    time_s = np.array([true_time(t) for t in terms])
    assert min(TRUE_TIME["params_bw"] * t["params_bw"] / true_time(t) for t in terms) > 0.05  # the term matters
    comp = compose.fit("training", terms, time_s, None)
    err = np.array([comp.time(t) for t in terms]) / time_s - 1
    assert np.abs(err).max() < 1e-6


def relative_objective(comp: compose.Composition, terms: list[dict[str, float]], y: np.ndarray) -> float:
    return float(sum((comp.time(t) / yy - 1) ** 2 for t, yy in zip(terms, y)))


def test_composition_fits_relative_not_absolute_error():
    """Networks from 1 ms to 10 s with +-15 % noise: the fitted layer minimises the sum of squared
    relative errors, so it is at least as good in those terms as the generating coefficients (the
    least-squares optimum on absolute error is not: the 10 s networks' noise then sets the constant
    and the floor terms, and the 1 ms networks are off by far more than their noise)."""
    terms, _ = synthetic_networks("inference", 30, seed=7)
    rng = np.random.default_rng(11)
    noise = rng.choice([-0.15, 0.15], size=len(terms))
    y = np.array([true_time(t) for t in terms]) * (1 + noise)
    comp = compose.fit("inference", terms, y, None)
    truth = compose.Composition("inference", time_coef={**TRUE_TIME, "params_bw": 0.0})
    assert relative_objective(comp, terms, y) <= relative_objective(truth, terms, y) * (1 + 1e-9)
    # and what a relative fit means for the smallest networks: within their noise, not multiples of it
    small = np.argsort(y)[:5]
    err = np.array([comp.time(terms[i]) / y[i] - 1 for i in small])
    assert np.abs(err).max() < 0.5


def test_ninety_percent_intervals_hold_ninety_percent_of_fresh_networks():
    """Residuals of 300 networks whose measured / predicted is log-normal (sigma 0.25); 5000 fresh
    networks drawn the same way must fall inside their 90 % intervals 90 % of the time (+-2.5 %)."""
    rng = np.random.default_rng(RNG_SEED)
    sigma = 0.25

    def draw(n: int) -> tuple[np.ndarray, np.ndarray]:
        pred = 10 ** rng.uniform(-3, 1, n)
        return pred, pred * np.exp(rng.normal(0.0, sigma, n))

    pred, meas = draw(300)
    comp = compose.Composition("inference", calibrated=True, n_networks=300,
                               scores=layer_scores(pred / meas - 1, pred / meas - 1))  # fmt: skip
    pred, meas = draw(5000)
    for which in ("time", "energy"):
        bounds = np.array([comp.interval(p, which) for p in pred])
        inside = (bounds[:, 0] <= meas) & (meas <= bounds[:, 1])
        assert inside.mean() == pytest.approx(0.90, abs=0.025), which
        # the interval's width is the log-normal's 5 %-95 % span (2 x 1.645 sigma in log space)
        assert np.median(np.log(bounds[:, 1] / bounds[:, 0])) == pytest.approx(2 * 1.645 * sigma, rel=0.12)
    # extrapolating: wider, never narrower
    lo, hi = comp.interval(1.0, "time", extrapolating=True)
    lo0, hi0 = comp.interval(1.0, "time")
    assert lo < lo0 < 1.0 < hi0 < hi


# --------------------------------------------------------------------------------------------
# A synthetic training set of real op records (Linear layers, Identity no-ops)
# --------------------------------------------------------------------------------------------


FLOOR_S = 1e-5
NOOP_TIMES = (4e-6, 5e-6, 7e-6)  # measured no-ops, apart from the launch floor


def synthetic_target(n_nets: int = 6, ops_per_net: int = 3, free_ops: int = 14):
    """(TargetData, networks, network ops): Linear layers whose time is floor + FLOPs at 5 TFLOP/s (x a
    small deterministic wobble), power 100 W + 1 W per GFLOP; networks of `ops_per_net` ops each (no op
    shared), named net<i> in families fam<i % 3>; `free_ops` ops no network calls; three Identity no-ops."""
    rng = np.random.default_rng(5)
    rows, nops, first_input = [], [], {}
    sizes = iter(sorted({(int(b), int(i), int(o)) for b, i, o in rng.integers(8, 512, (200, 3))}))
    for k in range(n_nets * ops_per_net + free_ops):
        b, i, o = next(sizes)
        row = catalog_row(module_spec(nn.Linear(i, o), (b, i)))
        net = k // ops_per_net if k < n_nets * ops_per_net else None
        gflop = row["flops"] / 1e9
        row |= {
            "t_s": FLOOR_S + row["flops"] / 5e12 * (1 + 0.1 * np.sin(k)),
            "p_w": 100.0 + gflop,
            "layer_id": f"L{k}",
            "families": [f"fam{net % 3}"] if net is not None else [],
        }
        rows.append(row)
        if net is not None:
            first_input.setdefault(f"net{net}", [b, i])  # the network's input: its first layer's (2-D, no image)
            nops.append({"set_id": f"net{net}", "op_id": row["op_id"], "calls": 1 + k % 3, **row})
    for j, t in enumerate(NOOP_TIMES):
        row = catalog_row(module_spec(nn.Identity(), (4 + j, 16)))
        rows.append(row | {"t_s": t, "p_w": 60.0, "layer_id": f"N{j}", "families": []})
    df = pd.DataFrame(rows)
    df["clock_mhz"] = np.nan
    df["power_limit_w"] = np.nan
    df["estimated"] = False
    data = fit.prepare(df, "inference", "A30")
    nops_df = pd.DataFrame(nops)
    sums = nops_df.assign(t=nops_df["t_s"] * nops_df["calls"], e=nops_df["t_s"] * nops_df["p_w"] * nops_df["calls"])
    agg = sums.groupby("set_id")[["t", "e"]].sum()
    networks = pd.DataFrame({
        "set_id": agg.index, "model": agg.index, "family": [f"fam{int(s[3:]) % 3}" for s in agg.index],
        "t_s": agg["t"].to_numpy() * 1.2 + 2e-5, "e_j": agg["e"].to_numpy() * 1.1,
        "input_shape": [first_input[s] for s in agg.index],
    })  # fmt: skip
    return data, networks, nops_df


class SpyEstimator:
    """Wraps a real estimator; logs the feature rows it is fitted on and asked to predict."""

    def __init__(self, inner, log: list) -> None:
        self.inner, self.log = inner, log

    def fit(self, X, y):
        self.log.append(("fit", np.asarray(X).copy()))
        self.inner.fit(X, y)
        return self

    def predict(self, X):
        self.log.append(("predict", np.asarray(X).copy()))
        return self.inner.predict(X)


@pytest.fixture
def spied(monkeypatch):
    """Every estimator any fit builds is a spy; the composition fit too."""
    log: list = []
    real_estimator, real_compose = fit.estimator, compose.fit

    def estimator(alg, params, seed):
        return SpyEstimator(real_estimator(alg, params, seed), log)

    def compose_fit(mode, terms, time_s, energy_j, *limit):
        log.append(("compose", [id(t) for t in terms]))
        return real_compose(mode, terms, time_s, energy_j, *limit)

    def all_terms(coster, nets, data):
        out = real_all_terms(coster, nets, data)
        log.append(("terms", out))
        return out

    real_all_terms = netval.all_terms
    monkeypatch.setattr(fit, "estimator", estimator)
    monkeypatch.setattr(compose, "fit", compose_fit)
    monkeypatch.setattr(netval, "all_terms", all_terms)
    return log


SMALL = TrainParams(folds=4, seed=0, random_forest={"n_estimators": 5}, xgboost={"n_estimators": 5})


def rows_of(data: fit.TargetData, fs: str, X: np.ndarray) -> set[int]:
    """Which rows of the data a feature matrix holds (every synthetic row's features are distinct)."""
    index = {tuple(r): i for i, r in enumerate(data.X[fs])}
    assert len(index) == data.n
    return {index[tuple(r)] for r in X}


@pytest.mark.parametrize("split", fit.SPLITS)
def test_no_held_out_row_reaches_a_cross_validation_fit(spied, split):
    data, _, _ = synthetic_target()
    res = fit.cross_validate(data, "rf", "baseline", "time", split, SMALL)
    fits = [x for kind, x in spied if kind == "fit"]
    preds = [x for kind, x in spied if kind == "predict"]
    assert len(fits) == len(preds) == len(res["folds"]) >= 3
    held_total = set()
    for X_fit, X_pred in zip(fits, preds):
        trained, held = rows_of(data, "baseline", X_fit), rows_of(data, "baseline", X_pred)
        assert held and not trained & held, f"rows {sorted(trained & held)} trained on and scored"
        held_total |= held
    # every measured row not a no-op is scored exactly once (pooled out-of-fold predictions)
    if split == "grouped":
        assert sorted(res["rows"]) == sorted(set(res["rows"])) and len(res["rows"]) == data.n


@pytest.mark.parametrize("split", [netval.SPLIT_NETWORK, netval.SPLIT_FAMILY])
def test_no_held_out_network_reaches_an_op_model_or_the_composition(spied, split):
    data, networks, nops = synthetic_target()
    out = netval.evaluate(data, networks, nops, {"time": ("rf", "improved"), "power": ("rf", "improved")}, SMALL,
                          split)  # fmt: skip
    assert len(out) == len(networks)
    groups, current = [], []
    for event in spied:
        current.append(event)
        if event[0] == "compose":
            groups.append(current)
            current = []
    held_names = list(dict.fromkeys(out["held_out"]))
    assert len(groups) == len(held_names)
    op_sets = nops.groupby("set_id")["op_id"].apply(set)
    for name, events in zip(held_names, groups):
        held_nets = list(out.loc[out["held_out"] == name, "set_id"])
        held_ops = set().union(*(op_sets[s] for s in held_nets))
        held_rows = set(np.flatnonzero(data.df["op_id"].isin(held_ops)))
        fits = [x for kind, x in events if kind == "fit"]
        assert len(fits) == 2  # time and power
        for X in fits:
            trained = rows_of(data, "improved", X)
            assert not trained & held_rows, f"{name}: held-out ops {sorted(trained & held_rows)} trained on"
        (terms,) = [x for kind, x in events if kind == "terms"]
        (composed,) = [x for kind, x in events if kind == "compose"]
        assert len(composed) == len(networks) - len(held_nets)
        assert not {id(terms[s]) for s in held_nets} & set(composed), f"{name}: held-out network composed on"
        # and the measured look-up does not hold the held-out ops: their cost is predicted
        for s in held_nets:
            assert terms[s]["call_shares"].get("measured", 0.0) == 0.0


def test_net_validation_errors_are_relative_to_what_was_measured(spied):
    data, networks, nops = synthetic_target()
    out = netval.evaluate(data, networks, nops, {"time": ("rf", "improved")}, SMALL, netval.SPLIT_NETWORK)
    m = networks.set_index("set_id").loc[out["set_id"]]
    assert out["measured_t_s"].to_numpy() == pytest.approx(m["t_s"].to_numpy(), rel=0)
    assert out["t_error"].to_numpy() == pytest.approx((out["predicted_t_s"] / m["t_s"].to_numpy() - 1).to_numpy())


# --------------------------------------------------------------------------------------------
# Physics and the no-op floor
# --------------------------------------------------------------------------------------------


def test_tf32_peak_exactly_where_the_config_allows_it():
    """A compute-bound convolution: 82 TF (TF32) on an A30, 10.3 TF on `A30_no_tf32`; a linear layer 10.3 TF
    on both (PyTorch leaves cuBLAS TF32 off), 13.4 TF (FP32) on an RTX 2080 Ti that has no TF32; elementwise
    ops run on the FP32 units everywhere (datasheets)."""
    gemm = {"flops": 10**12, "bytes_read": 1000, "bytes_written": 1000}
    assert roofline_s("Conv2d", gemm, find_device("A30")) == pytest.approx(1 / 82, rel=1e-12)
    assert roofline_s("Linear", gemm, find_device("A30")) == pytest.approx(1 / 10.3, rel=1e-12)
    assert roofline_s("Conv2d", gemm, find_device("A30_no_tf32")) == pytest.approx(1 / 10.3, rel=1e-12)
    assert roofline_s("Linear", gemm, find_device("RTX2080Ti")) == pytest.approx(1 / 13.4, rel=1e-12)
    assert roofline_s("add", gemm, find_device("A30")) == pytest.approx(1 / 10.3, rel=1e-12)
    # bytes-bound: the bandwidth (933 GB/s), whatever the peak
    stream = {"flops": 10, "bytes_read": 933 * 10**9, "bytes_written": 0}
    assert roofline_s("Linear", stream, find_device("A30")) == pytest.approx(1.0, rel=1e-12)


def test_a_noop_costs_what_the_devices_measured_noops_cost():
    """Three measured identities (4, 5, 7 us): a no-op's time is their median,
    5 us, through the coster's parameters and the coster itself."""
    data, _, _ = synthetic_target()
    params = netval.coster_params(data, np.arange(data.n))
    assert params["noop_s"] == pytest.approx(5e-6, rel=1e-12) and params["noop_power_w"] == 60.0
    assert params["floor_s"] != pytest.approx(params["noop_s"], rel=0.05)  # the two are told apart
    coster = OpCoster("inference", find_device("A30"), models={}, kinds=("Linear",), charge_ratio=1.0,
                      median_power_w=100.0,
                      **{k: params[k] for k in ("floor_s", "noop_s", "noop_power_w")})  # fmt: skip
    noop = [r for r, is_noop in zip(data.records, data.noop) if is_noop]
    unseen = OpRecord("unseen-identity", "Identity", {}, (3, 3), 9, {"flops": 0, "bytes_read": 0,
                                                                     "bytes_written": 0, "params": 0})  # fmt: skip
    c = coster.cost([*noop, unseen])
    assert list(c.t_s) == [5e-6] * 4 and list(c.p_w) == [60.0] * 4 and set(c.source) == {"floor"}
    # where the device measured no no-op, the launch floor stands in
    floor_only = OpCoster("inference", find_device("A30"), {}, ("Linear",), 1e-5, 60.0, 1.0, 100.0, noop_s=None)
    assert floor_only.cost([unseen]).t_s[0] == 1e-5
    assert costing.SOURCES[2] == "floor"


def test_scores_are_the_textbook_figures():
    """R^2, MAPE, median APE and the weighted error of four predictions, worked by hand."""
    y = np.array([1.0, 2.0, 4.0, 8.0])
    p = np.array([1.5, 2.0, 3.0, 8.0])
    s = fit.scores(y, p)
    assert s["mape"] == pytest.approx((0.5 + 0 + 0.25 + 0) / 4, rel=1e-12)
    assert s["mdape"] == pytest.approx(0.125, rel=1e-12)
    assert s["twe"] == pytest.approx(1.5 / 15, rel=1e-12)
    assert s["r2"] == pytest.approx(1 - 1.25 / 28.75, rel=1e-12) and s["n"] == 4
    # power's weighted error weighs each op's |error| by its time (how far energy would be off)
    w = np.array([10.0, 1.0, 1.0, 1.0])
    assert fit.scores(y, p, w)["twe"] == pytest.approx((10 * 0.5 + 1 * 1.0) / (10 + 2 + 4 + 8), rel=1e-12)


# --------------------------------------------------------------------------------------------
# Intervals by question: known family vs new family (model/composition/compose.py, netval.coverage)
# --------------------------------------------------------------------------------------------

SIGMA_KNOWN, SIGMA_NEW = 0.05, 0.4  # log(measured / predicted) noise of the two questions (synthetic)


def held_out_predictions(seed: int = RNG_SEED) -> pd.DataFrame:
    """netval-shaped out-of-sample rows of 100 models at 2 input sizes each: 25 families of 3 models (a
    model held out keeps siblings: its errors ~ N(0, SIGMA_KNOWN) in log) and 25 of one model (held out,
    it is a new family: N(0, SIGMA_NEW)); in the family split every network is a new family's: N(0,
    SIGMA_NEW). Every score distinct (continuous draws)."""
    rng = np.random.default_rng(seed)
    rows = []
    models = [(f"f{i}", f"f{i}m{j}") for i in range(25) for j in range(3)] + [(f"s{i}", f"s{i}m0") for i in range(25)]
    for fam, model in models:
        known = fam.startswith("f")
        for size in (224, 299):
            base = {"set_id": f"{model}:{size}", "model": model, "family": fam, "e_error": np.nan}
            sd = SIGMA_KNOWN if known else SIGMA_NEW
            rows.append(base | {"split": "model", "held_out": model, "family_known": known,
                                "t_error": float(np.expm1(-rng.normal(0, sd)))})  # fmt: skip
            rows.append(base | {"split": "family", "held_out": fam, "family_known": False,
                                "t_error": float(np.expm1(-rng.normal(0, SIGMA_NEW)))})  # fmt: skip
    return pd.DataFrame(rows)


def test_intervals_by_question_cover_ninety_percent_of_both_questions_at_their_own_width():
    """Known-family networks are predicted 8x better than new families. Intervals from the scores of their
    own question cover about 90 % of each, at each question's log-normal 5-95 % span; the pooled scores
    (every model-split score for every question, the old rule) cover the known ones ~always with far too
    wide intervals and the new ones too rarely."""
    df = held_out_predictions()
    model, fam = df[df["split"] == "model"], df[df["split"] == "family"]
    known, new = model[model["family_known"]], model[~model["family_known"]]
    for rows, sd in ((known, SIGMA_KNOWN), (new, SIGMA_NEW), (fam, SIGMA_NEW)):
        cov = netval.coverage(rows, df)["time"]
        assert 85.0 <= cov["coverage_pct"] <= 95.0, (rows["split"].iloc[0], cov)
        assert cov["median_width_pct"] / 100 == pytest.approx(2 * np.sinh(1.645 * sd), rel=0.2)
        assert cov["too_few_scores"] == 0
    assert 85.0 <= netval.coverage(model, df)["time"]["coverage_pct"] <= 95.0
    pooled = df.drop(columns="family_known")
    old_known = netval.coverage(known.drop(columns="family_known"), pooled[pooled["split"] == "model"])["time"]
    old_new = netval.coverage(new.drop(columns="family_known"), pooled[pooled["split"] == "model"])["time"]
    assert old_known["coverage_pct"] == 100.0
    assert old_known["median_width_pct"] > 3 * 100 * 2 * np.sinh(1.645 * SIGMA_KNOWN)
    assert old_new["coverage_pct"] < 85.0


def test_no_held_out_networks_score_reaches_its_own_quantile(monkeypatch):
    """A spy on the quantile rule coverage uses: the scores behind each network's interval never include its
    own, its model's, or (for a new-family question) its family's."""
    df = held_out_predictions()
    calls: list[np.ndarray] = []
    real = compose.log_interval

    def spy(errors, level=compose.INTERVAL_LEVEL, groups=None, covariates=None):
        calls.append(np.asarray(errors, float).copy())
        if covariates is not None:  # one covariate per score, from the same rows (never the network's own)
            assert len(covariates) == len(errors)
        return real(errors, level, groups, covariates)

    monkeypatch.setattr(compose, "log_interval", spy)
    score = compose.log_errors(df["t_error"].to_numpy(float))
    netval.coverage(df, df)
    assert len(calls) == len(df)  # one quantile per network, in row order
    for (_, row), s, used in zip(df.iterrows(), score, calls):
        mine = df["model"].eq(row["model"]).to_numpy().copy()
        if row["split"] == "family" or not row["family_known"]:
            mine |= df["family"].eq(row["family"]).to_numpy()
        assert s not in used, row["set_id"]
        assert not np.isin(score[mine], used).any(), row["set_id"]
        want_split = "model" if row["family_known"] else "family"  # the scores of the question it faces
        assert np.isin(used, score[df["split"].eq(want_split).to_numpy()]).all(), row["set_id"]


def test_a_class_no_network_has_takes_its_neighbours_share():
    """On a device whose L2 the table does not know (S_l2 = 0 everywhere) the fit cannot see the L2 class:
    l is 0 (no difference claimed), and the other coefficients are the two-share layer's, recovered exactly.
    Networks of matrix products only: m and l are both 0, the one share is a."""
    terms, _ = synthetic_networks("inference", 12)
    no_l2 = [{**t, "l2_sum": 0.0} for t in terms]
    expected = {**TRUE_TIME, "params_bw": 0.0, "l2_sum": 0.0}
    time_s = np.array([sum(expected[k] * t[k] for k in compose.TIME_TERMS) for t in no_l2])
    comp = compose.fit("inference", no_l2, time_s, None)
    for k in compose.TIME_TERMS:
        assert comp.time_coef[k] == pytest.approx(expected[k], rel=1e-6, abs=1e-9), k
    only_mm = [{**t, "sum": t["sum"] - t["memory_sum"], "memory_sum": 0.0, "l2_sum": 0.0} for t in terms]
    time_s = np.array([1.3 * t["sum"] + 0.7 * t["calls_floor"] + 2e-4 for t in only_mm])
    comp = compose.fit("inference", only_mm, time_s, None)
    assert comp.time_coef["sum"] == pytest.approx(1.3, rel=1e-6)
    assert comp.time_coef["memory_sum"] == 0.0 and comp.time_coef["l2_sum"] == 0.0
