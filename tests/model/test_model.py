"""Features, training with MLflow tracking and registry, prediction and recommendation."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from torch import nn
from typer.testing import CliRunner

from opcost.errors import OpcostError
from opcost.model.basis.features import BASELINE_ATTRS, Encoding, op_record
from opcost.model.prediction.predict import Predictor
from opcost.model.training.fit import family_folds, grouped_folds
from opcost.ops.features import op_metrics
from opcost.ops.spec import CATEGORY_MODULE, OpSpec, TensorInput, module_attrs, target_of_class
from opcost.params.train import TrainParams
from opcost.stages.train import run as run_train_stage


def conv_spec() -> OpSpec:
    m = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
    return OpSpec(
        "Conv2d",
        CATEGORY_MODULE,
        target_of_class(nn.Conv2d),
        module_attrs(m),
        [{"tensor": 0}],
        {},
        (TensorInput((32, 3, 56, 56), "float32"),),
    )


def test_baseline_encoding_is_the_thesis_layout():
    spec = conv_spec()
    metrics = op_metrics(spec).as_dict()
    enc = Encoding("baseline", ("BatchNorm2d", "Conv2d"))
    row = dict(zip(enc.columns, enc.row(op_record(spec, metrics), None)))
    assert row["kind=Conv2d"] == 1.0 and row["kind=BatchNorm2d"] == 0.0
    assert (row["in_channels"], row["in_channels_flag"]) == (3.0, 1.0)
    assert (row["kernel_size"], row["stride"], row["bias"]) == (7.0, 2.0, 0.0)
    assert (row["in_features"], row["in_features_flag"]) == (-1.0, 0.0)  # does not apply to a conv
    assert [row[f"in_dim{d}"] for d in range(4)] == [32.0, 3.0, 56.0, 56.0]
    assert row["clock_mhz"] == -1.0
    assert len(enc.columns) == 2 + 2 * len(BASELINE_ATTRS) + 8 + 1
    imp = Encoding("improved", ("Conv2d",))
    irow = dict(zip(imp.columns, imp.row(op_record(spec, metrics), 1410.0)))
    assert irow["log_flops"] == math.log1p(2 * 32 * 64 * 28 * 28 * 3 * 7 * 7) and irow["clock_mhz"] == 1410.0


def test_grouped_folds_keep_every_shape_of_a_layer_on_one_side():
    layers = np.array([f"layer{i // 3}" for i in range(60)])  # each layer at three input shapes
    folds = grouped_folds(layers, k=5, seed=1)
    assert len(folds) == 5
    seen_in_test = []
    for tr, te in folds:
        assert not set(layers[tr]) & set(layers[te])
        assert len(tr) + len(te) == 60
        seen_in_test += list(te)
    assert sorted(seen_in_test) == list(range(60))  # every row is predicted exactly once


def test_family_folds_hold_out_every_op_a_family_calls():
    families = [["resnet"], ["resnet", "densenet"], ["densenet"], [], ["vit"], ["vit"], ["resnet"], [], ["densenet"]]
    folds = {name: (set(tr), set(te)) for name, tr, te in family_folds(families)}
    assert folds["resnet"] == ({2, 3, 4, 5, 7, 8}, {0, 1, 6})  # the shared op is held out with resnet
    assert folds["densenet"][1] == {1, 2, 8} and 1 not in folds["densenet"][0]
    assert all(3 in tr and 7 in tr for tr, _ in folds.values())  # ops of no extracted network always train


def test_train_writes_metrics_models_and_registers(trained):
    paths, params, first = trained
    r = first["RTX2080Ti-training"]
    assert r["registered_version"] == "1"
    m = json.loads(paths.train_metrics("RTX2080Ti-training").read_text())["RTX2080Ti-training"]
    assert m["n_estimated"] > 0 and m["n_ops"] == 128 + m["n_estimated"]  # inference ops x the A30's ratio
    for q in ("time", "power"):
        for alg in ("rf", "xgb"):
            for fs in ("baseline", "improved", "physical") if q == "time" else ("baseline", "improved"):
                grouped = m["ops"][q][alg][fs]["grouped"]
                assert set(grouped) == {"r2", "mape", "mdape", "twe", "n"}
                assert grouped["n"] == m["n_ops"] - m["n_estimated"]  # every measured row once, out of fold
                assert set(m["ops"][q][alg][fs]["family"]) == {"r2", "mape", "mdape", "twe", "n"}
        assert m["chosen"][q] in {f"{a}-{f}" for a in ("rf", "xgb") for f in ("baseline", "improved", "physical")}
    assert "physical" not in m["ops"]["power"]["rf"]  # a time baseline: no power model is trained on it
    folder = paths.model_dir("RTX2080Ti-training")
    assert sorted(f.name for f in folder.iterdir()) == ["bundle.json", "run.json", "trees.npz"]  # data only

    import os

    import mlflow
    from mlflow import MlflowClient

    mlflow.set_tracking_uri(os.environ["MLFLOW_TRACKING_URI"])  # the trained fixture's own store
    client = MlflowClient()
    runs = mlflow.search_runs(experiment_names=["opcost-train"])
    names = set(runs["tags.mlflow.runName"])
    assert {"train@RTX2080Ti-training", "rf-time-baseline-grouped", "xgb-power-improved-family"} <= names
    nested = runs[runs["tags.mlflow.runName"] == "rf-time-baseline-grouped"].iloc[0]
    assert len(client.get_metric_history(nested.run_id, "fold_r2")) == 3  # one step per grouped fold
    assert nested["tags.dvc_stage"] in ("train@RTX2080Ti-training", "train@A30_no_tf32-training")
    assert any(a.path.endswith(".png") for a in client.list_artifacts(nested.run_id))
    parent = runs[runs["tags.mlflow.runName"] == "train@RTX2080Ti-training"].iloc[0]
    bundle = json.loads((folder / "bundle.json").read_text())
    assert parent["metrics.comp_power_cap_w"] == bundle["composition"]["power_cap_w"]  # the energy layer's cap


def test_retraining_unchanged_registers_nothing_and_new_params_do(trained):
    paths, params, _ = trained
    again = run_train_stage(paths, params, "RTX2080Ti-training")
    assert again["registered_version"] is None
    changed = params.__class__(**{**params.__dict__, "train": TrainParams(**{**params.train.__dict__, "seed": 1})})
    new = run_train_stage(paths, changed, "RTX2080Ti-training")
    assert new["registered_version"] == "2"
    run_train_stage(paths, params, "RTX2080Ti-training")  # back to the first bundle: already registered


def test_no_tf32_on_a_gpu_without_tf32_is_answered_by_its_own_bundle(trained):
    """No models/xdevice here: `RTX2080Ti_no_tf32` must still find the RTX 2080 Ti's bundle (the same
    numerics), and answer exactly what `RTX2080Ti` answers."""
    paths, _, _ = trained
    a = Predictor(paths=paths, trust_unrecorded=True).predict("resnet18", "32,3,32,32", "RTX2080Ti_no_tf32", "training")
    b = Predictor(paths=paths, trust_unrecorded=True).predict("resnet18", "32,3,32,32", "RTX2080Ti", "training")
    assert a.device_config == "RTX2080Ti" and a.time_s == b.time_s and a.energy_j == b.energy_j


def test_every_op_gets_a_cost_and_the_total_follows_the_composition(trained):
    paths, _, _ = trained
    p = Predictor(paths=paths, trust_unrecorded=True).predict("resnet18", "32,3,32,32", "RTX2080Ti", "training")
    bd = p.breakdown.set_index("op_id")
    # every op of the network has a cost (no partial sums), each from where its source says:
    import pandas as pd

    from opcost.model.composition.bundle import Bundle
    from opcost.ops.kinds import FALLBACK, category_of

    bundle = Bundle.load(paths.model_dir("RTX2080Ti-training"))
    occ = pd.read_parquet(paths.occurrences)
    occ = occ[(occ["set_id"] == "resnet18:32x3x32x32") & (occ["mode"] == "training")].set_index("op_id")
    assert sorted(bd.index) == sorted(occ.index)
    assert int(bd["calls"].sum()) == int(occ["calls"].sum()) == 69
    # - `measured` / `estimated`: the very row the train stage read (default clock), not a model's guess
    rows = pd.read_parquet(paths.target_operations("RTX2080Ti-training"))
    rows = rows[rows["clock_mhz"].isna() & rows["power_limit_w"].isna()].set_index("op_id")
    looked_up = bd[bd["source"].isin(["measured", "estimated"])]
    assert len(looked_up) >= 3
    assert looked_up["t_s"].to_numpy() == pytest.approx(rows.loc[looked_up.index, "t_s"].to_numpy(), rel=1e-12)
    assert list(looked_up["source"] == "estimated") == list(rows.loc[looked_up.index, "estimated"].astype(bool))
    assert not set(bd.index[~bd["source"].isin(["measured", "estimated"])]) & set(rows.index)
    # - kinds the training log never measured (add, max pooling, flatten) are predicted as a measured
    #   kind of their own category, else of its fallback category (model/basis/physics.proxy_kind)
    proxied = bd[bd["source"] == "proxy"]
    assert {"add", "MaxPool2d"} <= set(proxied["kind"])
    for kind, proxy in zip(proxied["kind"], proxied["proxy"]):
        cat = category_of(kind)
        assert kind not in bundle.kinds and proxy in bundle.kinds, kind
        assert category_of(proxy) in (cat, FALLBACK.get(cat or "")), (kind, proxy)
    floor = bd[bd["source"] == "floor"]
    assert (floor["t_s"] == (bundle.noop_s if bundle.noop_s is not None else bundle.floor_s)).all()
    # no measured network on this device config: the uncalibrated layer is the floor-corrected sum
    assert not p.calibrated and "uncalibrated" in p.note
    calls = occ.loc[bd.index, "calls"].to_numpy()
    t = bd["t_s"].to_numpy()
    expected = float((calls * (t - bundle.floor_s).clip(min=0)).sum())
    assert p.time_s == pytest.approx(expected, rel=1e-9)
    assert p.time_interval_s[0] < p.time_s < p.time_interval_s[1]
    assert p.sum_s == pytest.approx(float((calls * t).sum()), rel=1e-9)
    cov = p.coverage()
    assert sum(cov["calls"].values()) == pytest.approx(1.0) and sum(cov["time"].values()) == pytest.approx(1.0)


def test_a_prediction_scales_its_interval_by_its_own_composition_correction(trained, monkeypatch):
    """Spy on the composition's interval: `opcost predict` asks it with the question's covariate,
    log(predicted time / plain sum of op costs), the figure the interval scores carry
    (model/composition/intervals.py)."""
    from opcost.model.composition.compose import Composition

    paths, _, _ = trained
    asked: list[tuple[str, float]] = []
    real = Composition.interval

    def spy(self, value, which="time", extrapolating=False, family="*", covariate=0.0):  # type: ignore[no-untyped-def]
        asked.append((which, covariate))
        return real(self, value, which, extrapolating, family, covariate)

    monkeypatch.setattr(Composition, "interval", spy)
    p = Predictor(paths=paths, trust_unrecorded=True).predict("resnet18", "32,3,32,32", "RTX2080Ti", "training")
    want = math.log(p.time_s / p.sum_s)
    assert want != 0.0 and [w for w, _ in asked] == ["time", "energy"][: len(asked)] and asked
    assert all(c == pytest.approx(want, rel=1e-12) for _, c in asked)


def test_predict_errors_say_what_exists(trained, tmp_path):
    paths, _, _ = trained
    pr = Predictor(paths=paths, trust_unrecorded=True)
    with pytest.raises(
        OpcostError, match=r"no model for device 'H100' in mode training; trained: A30_no_tf32, RTX2080Ti"
    ):
        pr.predict("resnet18", "32,3,32,32", "H100", "training")
    with pytest.raises(OpcostError, match="unknown mode 'train'"):
        pr.predict("resnet18", "32,3,32,32", "RTX2080Ti", "train")
    # a default-clock bundle at another clock needs the transferred clock model, which this root lacks
    with pytest.raises(OpcostError, match=r"no clock model at .*models/clock/clock_model.json: run `dvc pull`"):
        pr.predict("resnet18", "32,3,32,32", "RTX2080Ti", "training", clock_mhz=900)
    with pytest.raises(OpcostError, match=r"outside the RTX2080Ti's supported range 300-2100 MHz"):
        pr.predict("resnet18", "32,3,32,32", "RTX2080Ti", "training", clock_mhz=250)
    with pytest.raises(OpcostError, match="unknown model 'resnet19'"):
        pr.predict("resnet19", "32,3,32,32", "RTX2080Ti", "training")
    from opcost.paths import Paths

    with pytest.raises(OpcostError, match=r"is not an opcost checkout \(no dvc.yaml"):
        Predictor(paths=Paths(tmp_path)).predict("resnet18", "32,3,32,32", "A30", "inference")
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")  # a checkout whose models were never pulled
    with pytest.raises(OpcostError, match="no trained model found under .*models: run `dvc pull`"):
        Predictor(paths=Paths(tmp_path)).predict("resnet18", "32,3,32,32", "A30", "inference")


def test_recommend_ranks_devices(trained):
    paths, _, _ = trained

    def fresh() -> Predictor:  # the fixture's models are fresh training output: no dvc.lock records them
        return Predictor(paths=paths, trust_unrecorded=True)

    df = fresh().recommend("resnet18", "32,3,32,32", "training")
    assert sorted(df["device_config"]) == ["A30_no_tf32", "RTX2080Ti"]
    # the ranking agrees with separate predictions made by a fresh predictor
    alone = {d: fresh().predict("resnet18", "32,3,32,32", d, "training") for d in df["device_config"]}
    fastest = min(alone, key=lambda d: alone[d].time_s)
    slowest = max(alone, key=lambda d: alone[d].time_s)
    assert df.loc[df["rank_time"] == 1, "device_config"].item() == fastest
    ratio = alone[slowest].time_s / alone[fastest].time_s
    assert df.loc[df["device_config"] == slowest, "slowdown"].item() == pytest.approx(ratio)
    only = fresh().recommend("resnet18", "32,3,32,32", "training", max_slowdown=1.0)
    assert list(only["device_config"]) == [fastest]


def test_registry_champion_predicts_like_local_bundle(trained, tmp_path, monkeypatch):
    """In a fresh store (nothing else registered), the champion served by the registry is the local bundle."""
    from builders import clone_of
    from opcost.model.store.registry import sync_registry
    from opcost.params.load import load_params
    from opcost.paths import Paths

    root = Paths(clone_of(trained, tmp_path))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'fresh.db'}")
    sync_registry(root, load_params(root.params))
    local = Predictor(paths=root).predict("resnet18", "32,3,32,32", "RTX2080Ti", "training")
    reg = Predictor(paths=root, registry=True).predict("resnet18", "32,3,32,32", "RTX2080Ti", "training")
    assert reg.time_s == local.time_s and reg.energy_j == local.energy_j


def test_cli_predict_json(trained):
    from opcost.cli import app

    res = CliRunner().invoke(
        app,
        [
            "predict",
            "--model",
            "resnet18",
            "--input-shape",
            "32,3,32,32",
            "--device",
            "RTX2080Ti",
            "--mode",
            "training",
            "--json",
            "--trust-unrecorded",  # the fixture's models are fresh training output: no dvc.lock records them
        ],
    )
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["time_interval_s"][0] < d["time_s"] < d["time_interval_s"][1] and len(d["operations"]) > 10
    assert sum(d["coverage"]["calls"].values()) == pytest.approx(1.0)
    bad = CliRunner().invoke(app, ["predict", "--model", "resnet18", "--input-shape", "32,3,32,32", "--device", "V100"])
    assert bad.exit_code == 2 and "no model for device 'V100'" in bad.stderr


@pytest.mark.slow
def test_compiled_trees_reproduce_the_libraries():
    """The numpy ensembles predict what XGBoost and scikit-learn predict (float32 comparisons)."""
    from sklearn.ensemble import RandomForestRegressor
    from xgboost import XGBRegressor

    from opcost.model.basis.trees import compile_ensemble

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 6)) * np.array([1, 10, 100, 1e3, 1e-3, 1])
    X[:, 5] = np.round(X[:, 5])  # ties at thresholds
    # adjacent float32 values a < b: scikit-learn splits at their float64 midpoint, which float32
    # would round (half to even) up onto b when a's mantissa is odd, sending b the wrong way
    # (near 1000: scikit-learn does not split values closer than 1e-7)
    a = np.nextafter(np.float32(1000.0), np.float32(2000.0))
    b = np.nextafter(a, np.float32(2000.0))
    X[:, 4] = np.where(rng.random(400) < 0.5, a, b)
    y = X[:, 0] * 2 + np.sin(X[:, 1]) + (X[:, 5] > 0) + 3 * (X[:, 4] > a)
    for model in (
        XGBRegressor(n_estimators=50, max_depth=5, random_state=0),
        RandomForestRegressor(n_estimators=20, random_state=0),
    ):
        model.fit(X[:300], y[:300])
        ens = compile_ensemble(model, X[:300])
        np.testing.assert_allclose(ens.predict(X[300:]), model.predict(X[300:]), rtol=1e-5, atol=1e-6)


def test_predictions_from_the_disk_cache_match_and_need_no_torch(trained):
    """A second process answers from .opcost/cache without importing torch, xgboost, sklearn or scipy.optimize
    (the composition's fits import it inside the call: model/basis/nnls.py)."""
    import os
    import subprocess
    import sys

    paths, _, _ = trained
    first = Predictor(paths=paths, trust_unrecorded=True).predict("resnet18", "32,3,32,32", "RTX2080Ti", "training")
    code = (
        "import sys, json; from opcost.model.prediction.predict import Predictor; from opcost.paths import Paths;"
        f"p = Predictor(paths=Paths(__import__('pathlib').Path({str(paths.root)!r})), trust_unrecorded=True)"
        ".predict('resnet18', '32,3,32,32', 'RTX2080Ti', 'training');"
        "mods = sorted(m for m in ('torch', 'xgboost', 'sklearn', 'scipy.optimize') if m in sys.modules);"
        "print(json.dumps({'t': p.time_s, 'mods': mods}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env={**os.environ})
    d = json.loads(out.stdout.strip().splitlines()[-1])
    assert d["mods"] == [] and d["t"] == pytest.approx(first.time_s, rel=1e-12)


def test_sync_registry_registers_pulled_bundles_once(trained, tmp_path, monkeypatch):
    """A fresh clone's store lacks the pulled models: sync registers each once, with a champion."""
    from mlflow import MlflowClient

    from builders import clone_of
    from opcost.model.store.registry import sync_registry
    from opcost.params.load import load_params
    from opcost.paths import Paths

    paths = Paths(clone_of(trained, tmp_path))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'fresh.db'}")
    params = load_params(paths.params)
    assert sync_registry(paths, params) == {"RTX2080Ti-training": "1", "A30_no_tf32-training": "1"}
    assert sync_registry(paths, params) == {"RTX2080Ti-training": None, "A30_no_tf32-training": None}
    v = MlflowClient().get_model_version_by_alias("opcost-A30_no_tf32-training", "champion")
    assert (
        v.tags["bundle_hash"]
        == json.loads((paths.model_dir("A30_no_tf32-training") / "bundle.json").read_text())["bundle_hash"]
    )


def test_train_report_declares_eight_out_of_sample_figures_per_target(trained):
    """train-report's metrics file is what `dvc metrics show` prints: the chosen models' grouped and
    family-out scores, read from each target's detail, never empty."""
    from opcost.stages.train_report import run as run_train_report

    paths, params, _ = trained
    run_train_report(paths, params)
    merged = json.loads(paths.train_metrics().read_text())
    assert set(merged) == set(params.train.targets)
    for t in params.train.targets:
        detail = json.loads(paths.train_metrics(t).read_text())[t]
        alg, fs = detail["chosen"]["time"].split("-")
        grouped = detail["ops"]["time"][alg][fs]["grouped"]
        h = merged[t]
        assert h["time"]["mape_pct"] == pytest.approx(100 * grouped["mape"])
        assert h["time"]["r2"] == pytest.approx(grouped["r2"])
        family = detail["ops"]["time"][alg][fs]["family"]
        if family["n"]:
            assert h["time"]["family_mape_pct"] == pytest.approx(100 * family["mape"])
        else:  # this small project: every row a held-out family calls is estimated, none measured
            assert h["time"]["family_mape_pct"] is None and t == "RTX2080Ti-training"
        assert set(h["time"]) == {"mape_pct", "mdape_pct", "twe_pct", "r2", "family_mape_pct"}
        assert set(h["power"]) == {"mape_pct"}
        assert sum(len(v) for v in h.values()) <= 10  # 8 + the model-left-out interval's coverage and width


def test_noops_cost_what_the_devices_measured_noops_cost(pipeline_root):
    """An identity launches no kernel: on the A30 the thesis timed convnext's p = 0 stochastic depths
    at about 3 us, below the 2nd-percentile launch floor. No-ops are costed at the median of their
    measured rows, and at the launch floor where fewer than two are measured."""
    import pandas as pd

    from opcost.model.training.fit import fit_model, launch_floor, noop_values, predict_rows, prepare

    df = pd.read_parquet(pipeline_root.target_operations("A30-inference"))
    data = prepare(df, "inference", "A30")
    rows = np.arange(data.n)
    noops = rows[data.noop]
    measured = data.y("time")[noops]
    assert len(noops) >= 2
    floor, noop_t, _ = noop_values(data, rows)
    assert floor == launch_floor(data, rows)
    assert noop_t == float(np.median(measured)) and noop_t < floor
    tp = TrainParams(folds=3, random_forest={"n_estimators": 5}, xgboost={"n_estimators": 5})
    fitted = fit_model(data, "rf", "improved", "time", rows, tp)
    assert (predict_rows(data, fitted, noops) == noop_t).all()
    # one measured no-op is not enough to say what no-ops cost: the floor
    one = np.concatenate([rows[~data.noop], noops[:1]])
    assert noop_values(data, one)[1] == launch_floor(data, one)


def test_scores_are_against_measurements_never_estimates(trained):
    """RTX 2080 Ti training rows estimated from its inference rows train the models, but the grouped
    and family scores are over the rows it really measured."""
    import pandas as pd

    paths, _, _ = trained
    target = "RTX2080Ti-training"
    df = pd.read_parquet(paths.target_operations(target))
    measured = int((~df["estimated"] & df["t_s"].notna()).sum())
    assert df["estimated"].sum() > measured > 0  # most rows are estimated, some measured
    detail = json.loads(paths.train_metrics(target).read_text())[target]
    for alg, by_fs in detail["ops"]["time"].items():
        for fs, by_split in by_fs.items():
            assert by_split["grouped"]["n"] == measured, (alg, fs)
            assert by_split["family"]["n"] <= measured * len({f for fs_ in df["families"] for f in fs_})


def test_a_network_smaller_than_the_calibration_networks_is_flagged_and_its_interval_widened(trained):
    """`opcost predict` flags a network whose per-sample input lies outside the calibration networks' by
    more than 2x (model/composition/extrapolation.py) and widens both intervals about their centre by
    compose.EXTRAPOLATION_WIDENING (2, in log half-width), the point prediction unchanged."""
    from opcost.model.composition.extrapolation import NET_SAMPLE_NUMEL

    paths, _, _ = trained
    answers = []
    for ranges in ({}, {NET_SAMPLE_NUMEL: [3 * 224 * 224.0, 3 * 224 * 224.0]}):
        pr = Predictor(paths=paths, disk_cache=False, trust_unrecorded=True)
        b = pr.bundle("RTX2080Ti", "training")
        b.ranges = {k: v for k, v in b.ranges.items() if k != NET_SAMPLE_NUMEL} | ranges
        answers.append(pr.predict("resnet18", "32,3,32,32", "RTX2080Ti", "training"))
    plain, flagged = answers
    assert not any("per sample" in w for w in plain.warnings)
    assert any("an input of 3072 values per sample (3x32x32)" in w for w in flagged.warnings)
    assert flagged.time_s == plain.time_s
    (a_lo, a_hi), (b_lo, b_hi) = plain.time_interval_s, flagged.time_interval_s
    assert math.log(b_lo * b_hi) == pytest.approx(math.log(a_lo * a_hi), rel=1e-9)  # the same centre
    assert math.log(b_hi / b_lo) == pytest.approx(2 * math.log(a_hi / a_lo), rel=1e-9)
