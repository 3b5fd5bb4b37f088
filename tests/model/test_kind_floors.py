"""Per-kind launch floors (data/floors.py): known answers, fit rows only, one offset for the fit and a bundle.

The floor of a kind is the 2nd percentile of (t - bytes / bandwidth) over its fit rows, never below the
device floor, for kinds with at least KIND_FLOOR_ROWS rows, in inference only. Each value below is
worked by hand from numpy's linear-interpolation percentile: over n sorted values the 2nd percentile
lies at position 0.02 (n - 1).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from torch import nn

from builders import catalog_row, module_spec
from opcost.data import floors
from opcost.model.training import fit
from opcost.params.train import TrainParams

US = 1e-6
SMALL = TrainParams(folds=3, seed=0, random_forest={"n_estimators": 10}, xgboost={"n_estimators": 10})


def test_a_kinds_floor_is_the_2nd_percentile_of_its_memory_bound_rows_excess() -> None:
    # Linear: 10 memory-bound rows, excess 50, 60, ..., 140 us: position 0.02 x 9 = 0.18 -> 51.8 us
    lin_excess = np.arange(50, 150, 10) * US
    lin_mem = np.linspace(1, 300, 10) * US  # any memory time: only t - memory counts
    lin_comp = 0.5 * lin_mem
    # two compute-bound Linear rows with a smaller excess (their compute): not part of the floor
    cb_mem, cb_comp, cb_excess = np.array([1.0, 2.0]) * US, np.array([30.0, 40.0]) * US, np.array([31.0, 41.0]) * US
    # ReLU: 5 rows whose excess (1-5 us) is below the 8 us device floor -> the device floor
    relu_mem = np.array([10, 20, 30, 40, 50]) * US
    relu_excess = np.array([1, 2, 3, 4, 5]) * US
    # BatchNorm2d: 4 rows, fewer than KIND_FLOOR_ROWS -> no floor of its own
    bn_mem, bn_excess = np.ones(4) * US, np.full(4, 100) * US
    kinds = ["Linear"] * 12 + ["ReLU"] * 5 + ["BatchNorm2d"] * 4
    mem = np.concatenate([lin_mem, cb_mem, relu_mem, bn_mem])
    comp = np.concatenate([lin_comp, cb_comp, np.zeros(9)])
    t = mem + np.concatenate([lin_excess, cb_excess, relu_excess, bn_excess])
    assert floors.KIND_FLOOR_ROWS == 5
    got = floors.kind_floors(kinds, t, mem, comp, 8 * US, "inference")
    assert [k for k, _ in got] == ["Linear", "ReLU"]
    assert dict(got)["Linear"] == pytest.approx(51.8 * US, rel=1e-12)
    assert dict(got)["ReLU"] == 8 * US
    # a non-finite time is no row: Linear with one NaN keeps 9 rows, excess 60..140: 60 + 0.16 x 10 = 61.6
    t2 = t.copy()
    t2[0] = np.nan
    assert dict(floors.kind_floors(kinds, t2, mem, comp, 8 * US, "inference"))["Linear"] == pytest.approx(61.6 * US)
    # counted as memory-bound, the compute-bound rows' 31 and 41 us would set it: 12 rows, position 0.22
    everything = floors.kind_floors(kinds, t, mem, np.zeros_like(mem), 8 * US, "inference")
    assert dict(everything)["Linear"] == pytest.approx((31 + 0.22 * 10) * US, rel=1e-12)
    # training rows time a whole forward and backward pass: no kind floors (module docstring)
    assert floors.kind_floors(kinds, t, mem, comp, 8 * US, "training") == ()


def test_each_op_takes_its_kinds_floor_else_the_devices() -> None:
    table = (("Conv2d", 30 * US), ("Linear", 45 * US))
    got = floors.per_op(["Linear", "ReLU", "Conv2d", "GELU"], 7 * US, table)
    assert got.tolist() == [45 * US, 7 * US, 30 * US, 7 * US]


def linear_target() -> fit.TargetData:
    """Linear layers, all memory-bound (batch 2-8), at their memory time plus 60 + j us (j = 1..8: a floor of
    their own); ReLUs at their memory time plus 5 us, below the device floor; families `a`, `b`."""
    rows = []
    for j, (cin, cout, n) in enumerate([(512, 1000, 8), (1024, 1000, 4), (2048, 1000, 8), (768, 1000, 4),
                                        (1280, 1000, 8), (4096, 4096, 2), (9216, 4096, 2), (256, 512, 8)]):  # fmt: skip
        row = catalog_row(module_spec(nn.Linear(cin, cout), (n, cin)))
        mem = (row["bytes_read"] + row["bytes_written"]) / 933e9
        rows.append(row | {"t_s": mem + (61 + j) * US, "families": ["a" if j % 2 else "b"], "layer_id": f"l{j}"})
    for j, c in enumerate([64, 128, 256, 512, 96, 192]):
        row = catalog_row(module_spec(nn.ReLU(), (32, c, 28, 28)))
        mem = (row["bytes_read"] + row["bytes_written"]) / 933e9
        rows.append(row | {"t_s": mem + 5 * US, "families": ["a" if j % 2 else "b"], "layer_id": f"r{j}"})
    df = pd.DataFrame(rows).assign(p_w=100.0, clock_mhz=np.nan, power_limit_w=np.nan, estimated=False)
    return fit.prepare(df, "inference", "A30")


def test_kind_floors_are_learnt_from_the_fit_rows_only() -> None:
    """A held-out row cannot move a floor: fitted on family `a`, the floors equal those of `a`'s rows alone,
    and differ from the floors of all rows."""
    data = linear_target()
    a = np.array([f == ["a"] for f in data.families])
    rows_a = np.flatnonzero(a)
    f = fit.fit_model(data, "xgb", "physical", "time", rows_a, SMALL)
    kinds = data.df["kind"].to_numpy()
    fit_rows = f.rows
    expected = floors.kind_floors(kinds[fit_rows], data.y("time")[fit_rows], data.memory_s[fit_rows],
                                  data.compute_s[fit_rows], f.floor, "inference")  # fmt: skip
    assert f.kind_floors == expected
    assert set(fit_rows) <= set(rows_a)
    every = fit.fit_model(data, "xgb", "physical", "time", np.arange(data.n), SMALL)
    assert every.kind_floors != f.kind_floors


def test_the_offset_carries_the_kinds_floor_in_the_fit_and_in_a_bundle(tmp_path) -> None:
    """fit.offsets (what the trees are fitted against) and Encoding.log_roofline (what a saved bundle
    predicts with) both add each op's kind floor to its baseline: exp(offset) - baseline = that floor."""
    from opcost.model.composition.bundle import _kind_floors

    data = linear_target()
    rows = np.arange(data.n)
    f = fit.fit_model(data, "xgb", "physical", "time", rows, SMALL)
    table = dict(f.kind_floors)
    # Linear excess 61..68 us: 61 + 0.02 x 7 = 61.14 us; the ReLUs' 5 us is below the device floor
    assert table["Linear"] == pytest.approx(61.14 * US, rel=1e-9) and table["ReLU"] == f.floor > 5 * US
    fl = fit.row_floors(data, rows, f.floor, f.kind_floors)
    with_kind = fit.offsets(data, rows, fl, f.dw_efficiency, f.unit_eff, True)
    device_only = fit.offsets(data, rows, f.floor, f.dw_efficiency, f.unit_eff, True)
    assert np.exp(with_kind) - np.exp(device_only) == pytest.approx(fl - f.floor, abs=1e-15)
    enc = f.encoding(data)
    assert enc.log_roofline(data.records) == pytest.approx(with_kind, rel=1e-12)
    # the JSON a bundle holds round-trips to the same encoding
    saved = json.loads(json.dumps(dict(enc.kind_floors)))
    assert _kind_floors(saved, "time") == enc.kind_floors
    assert _kind_floors({}, "time") == ()  # an older bundle: every op at the device floor


def test_a_bundle_refuses_kind_floors_that_are_not_an_object() -> None:
    from opcost.model.composition.bundle import _kind_floors

    with pytest.raises(ValueError, match="kind_floors must be an object"):
        _kind_floors([["Linear", 1e-5]], "time")


def test_a_large_linear_layer_is_no_longer_given_the_heads_ratio() -> None:
    """The case that motivated the rule, in miniature: small Linear layers at their 61-68 us floor, the
    two large ones (memory-bound, 67 and 162 us of bytes) held out, the 9216 -> 4096 one predicted. With
    kind floors it is predicted near its measured time; with the device floor only, the small layers'
    ratio t / (baseline + device floor), 2-3, multiplies its baseline and the trees give it +51 %."""
    data = linear_target()
    big = 6
    assert data.records[big].hp["in_features"] == 9216
    rows = np.array([i for i in range(data.n) if i not in (5, big)])
    measured = data.y("time")[big]

    def predicted() -> float:
        f = fit.fit_model(data, "rf", "physical", "time", rows, SMALL)
        return float(fit.predict_rows(data, f, np.array([big]))[0])

    assert predicted() == pytest.approx(measured, rel=0.1)
    shipped = floors.KIND_FLOOR_MODES
    try:
        floors.KIND_FLOOR_MODES = ()
        assert predicted() > 1.4 * measured  # +51 % at seed 0
    finally:
        floors.KIND_FLOOR_MODES = shipped


def test_the_train_run_logs_each_kinds_floor() -> None:
    """The MLflow metrics of a train run (model/training/runrecord.py) carry one `kind_floor_s.<kind>` per kind
    floor of the time model, in seconds, and none for a bundle without (training, older bundles)."""
    from types import SimpleNamespace

    from opcost.model.records import tracking
    from opcost.model.training.runrecord import floor_metrics

    data = linear_target()
    f = fit.fit_model(data, "xgb", "physical", "time", np.arange(data.n), SMALL)
    enc = f.encoding(data)
    bundle = SimpleNamespace(models={"time": SimpleNamespace(encoding=enc)})  # the fields floor_metrics reads
    got = floor_metrics(bundle)  # type: ignore[arg-type]
    assert got == {tracking.kind_floor_metric("Linear"): dict(f.kind_floors)["Linear"],
                   tracking.kind_floor_metric("ReLU"): f.floor}  # fmt: skip
    assert tracking.kind_floor_metric("Linear") == "kind_floor_s.Linear"
    assert floor_metrics(SimpleNamespace(models={})) == {}  # type: ignore[arg-type]
