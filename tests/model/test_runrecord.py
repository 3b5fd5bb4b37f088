"""The MLflow record of a train run (model/training/runrecord.py): its numbers from hand-made scores, its
names from model/records/tracking.py, its shape what model/records/runlog.py saves and replays."""

from __future__ import annotations

import pandas as pd
import pytest

from opcost.errors import OpcostError
from opcost.model.composition.bundle import Bundle
from opcost.model.composition.compose import Composition
from opcost.model.records import runlog, tracking
from opcost.model.training import runrecord
from opcost.params.train import TrainParams

TP = TrainParams(folds=3, seed=0, xgboost={"n_estimators": 20})


def _scores(r2: float, mape: float, fold_r2: list, measured: list, predicted: list) -> dict:
    return {"r2": r2, "mape": mape, "mdape": mape / 2, "twe": mape / 4, "n": 40, "fold_r2": fold_r2,
            "measured": measured, "predicted": predicted}  # fmt: skip


RESULTS = {
    "time": {
        "xgb": {
            "physical": {
                "grouped": _scores(0.9, 0.125, [0.8, None, float("nan"), 0.6], [1.0, 2.0], [1.5, 1.0]),
                "family": _scores(0.5, 0.25, [0.5, float("nan")], [3.0], [6.0]),
            }
        }
    }
}
DETAIL = {
    "chosen": {"time": "xgb-physical"}, "device_config": "A30", "mode": "inference", "n_ops": 40,
    "data_version": "dv", "split": "grouped-k3-seed0", "composition": {"source": "calibrated"},
    "networks": {"model": {"networks": 6, "time": {"mape_pct": 7.5}, "interval": {"time": {"coverage_pct": 83.0}}},
                 "family": {"networks": 6, "energy": {"mape_pct": 12.0}}},
    "intervals": {"pooled": {"time": {"n_scores": 6, "half_width_pct": 20.0, "conformal": True, "rule": "conformal"}}},
}  # fmt: skip
NETS = pd.DataFrame(
    {"split": ["model", "model", "family"], "measured_t_s": [0.01, 0.02, 0.03], "predicted_t_s": [0.011, 0.018, 0.05]}
)


def _bundle(comp: Composition | None) -> Bundle:
    return Bundle(target="A30-inference", device_config="A30", mode="inference", phase="forward", data_version="dv",
                  bundle_hash="bh", floor_s=5e-6, composition=comp)  # fmt: skip


def _comp() -> Composition:
    return Composition(
        "inference", time_coef={"sum": 1.1, "const": 2e-4}, energy_coef={"energy_sum": 0.9, "time": 40.0},
        calibrated=True, power_cap_w=165.0,
    )  # fmt: skip


def test_the_record_of_a_train_run_from_hand_made_scores():
    """Parent: R2 over the grouped folds with a score (0.8, 0.6: mean 0.7, std 0.1), the networks' errors and
    interval scores under their split, the interval figures without the rule, the composition's coefficients
    and cap, the floor; the figure of the networks with their whole model held out. Nested: one per
    algorithm x quantity x feature set x split, errors in per cent."""
    rec = runrecord.build("A30-inference", TP, RESULTS, _bundle(_comp()), DETAIL, NETS)
    assert rec.name == "train@A30-inference"
    assert {k: v for k, v in rec.tags.items() if k != tracking.NOTE_TAG} == {
        "dvc_stage": "train@A30-inference", "data_version": "dv", "bundle_hash": "bh", "device_config": "A30",
        "mode": "inference", "split": "grouped-k3-seed0",
    }  # fmt: skip
    assert "xgb-physical, cross-validated R2 0.700 +- 0.100" in rec.tags[tracking.NOTE_TAG]
    assert rec.params == {"folds": 3, "seed": 0, "n_rows": 40, "chosen_time": "xgb-physical",
                          "composition_calibrated": True, "composition_source": "calibrated"}  # fmt: skip
    assert rec.metrics == pytest.approx(
        {"time_cv_r2_mean": 0.7, "time_cv_r2_std": 0.1, "net_model_time_mape_pct": 7.5,
         "net_model_time_interval_coverage_pct": 83.0, "net_family_energy_mape_pct": 12.0,
         "interval_pooled_time_n_scores": 6.0, "interval_pooled_time_half_width_pct": 20.0,
         "comp_time_sum": 1.1, "comp_time_const": 2e-4, "comp_energy_energy_sum": 0.9, "comp_energy_time": 40.0,
         "comp_power_cap_w": 165.0, "floor_s": 5e-6}
    )  # fmt: skip
    (fig,) = rec.figures
    assert (fig.unit, fig.measured, fig.predicted) == ("s", [0.01, 0.02], [0.011, 0.018])
    grouped, family = rec.children
    assert (grouped.name, family.name) == ("xgb-time-physical-grouped", "xgb-time-physical-family")
    assert grouped.tags == {"algorithm": "xgb", "quantity": "time", "feature_set": "physical", "split": "grouped"}
    assert grouped.params == {"xgb.n_estimators": 20, "feature_set": "physical"}
    assert grouped.metrics == pytest.approx({"r2": 0.9, "mape_pct": 12.5, "mdape_pct": 6.25, "twe_pct": 3.125, "n": 40})
    assert family.steps == {"fold_r2": [0.5, pytest.approx(float("nan"), nan_ok=True)]}
    assert [(f.file, f.unit, f.measured) for f in family.figures] == [("predicted_vs_measured_time.png", "s", [3.0])]


def test_the_record_as_saved_is_the_shape_the_replay_reads(tmp_path):
    """`as_dict`: a parent with its nested runs (which hold none of their own), the keys `runlog.child` gives;
    saved and loaded back unchanged but for rounding."""
    rec = runrecord.build("A30-inference", TP, RESULTS, _bundle(_comp()), DETAIL, NETS)
    d = rec.as_dict()
    assert list(d) == ["name", "tags", "params", "metrics", "steps", "figures", "children"]
    assert [list(c) for c in d["children"]] == [list(runlog.child("x", {}, {}, {}, {}, []))] * 2
    assert list(d["figures"][0]) == ["file", "title", "unit", "measured", "predicted"]
    runlog.save(d, tmp_path)
    back = runlog.load(tmp_path)
    assert back["children"][0]["metrics"]["mape_pct"] == 12.5 and back["metrics"]["time_cv_r2_mean"] == 0.7
    assert back["children"][1]["steps"] == {"fold_r2": [0.5, None]}  # NaN: null, left out when logged


def test_a_bundle_without_a_composition_layer_is_refused_in_one_line():
    with pytest.raises(OpcostError, match=r"^A30-inference: the trained bundle has no composition layer to log$"):
        runrecord.build("A30-inference", TP, RESULTS, _bundle(None), DETAIL, NETS)


def test_train_runs_log_errors_in_percent_and_the_parent_its_r2_and_a_description(tmp_path, monkeypatch):
    """The train stage's record: nested runs name their errors in per cent (mape_pct, the reports' unit); the
    parent carries the chosen models' cross-validated R2 (mean and std over folds) and a description, which
    the nested runs do not inherit."""
    import mlflow
    from mlflow import MlflowClient

    scores = {"r2": 0.9, "mape": 0.125, "mdape": 0.05, "twe": 0.02, "n": 40}
    kid_metrics = runrecord.child_metrics(scores)
    assert kid_metrics == pytest.approx({"r2": 0.9, "mape_pct": 12.5, "mdape_pct": 5.0, "twe_pct": 2.0, "n": 40})
    results = {"time": {"xgb": {"physical": {"grouped": {"fold_r2": [0.8, None, 0.6]}}}}}
    detail = {
        "chosen": {"time": "xgb-physical"}, "device_config": "A30", "mode": "inference", "n_ops": 40,
        "data_version": "dv", "split": "grouped-k3-seed0", "composition": {"source": "calibrated"},
        "networks": {"model": {"networks": 6, "time": {"mape_pct": 7.5}}},
    }  # fmt: skip
    headline = runrecord.parent_headline(results, detail)
    assert headline == pytest.approx({"time_cv_r2_mean": 0.7, "time_cv_r2_std": 0.1})
    note = runrecord.parent_description("A30-inference", detail, headline)
    assert "R2 0.700 +- 0.100" in note and "time MAPE of 7.5 %" in note and "net_model_time_mape_pct" in note

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'runs.db'}")
    kid = runlog.child("xgb-time-physical-grouped", {}, {}, kid_metrics, {}, [])
    parent = runlog.child("train@A30-inference", {tracking.NOTE_TAG: note}, {}, headline, {}, [])
    with runlog.replayed(mlflow, {**parent, "children": [kid]}) as run:
        parent_id = run.info.run_id
    client = MlflowClient()
    got = client.get_run(parent_id)
    assert got.data.tags[tracking.NOTE_TAG] == note and got.data.metrics["time_cv_r2_mean"] == pytest.approx(0.7)
    runs = mlflow.search_runs(experiment_ids=[got.info.experiment_id])
    kid_run = client.get_run(runs[runs["tags.mlflow.runName"] == "xgb-time-physical-grouped"].iloc[0].run_id)
    assert tracking.NOTE_TAG not in kid_run.data.tags and kid_run.data.metrics["mape_pct"] == pytest.approx(12.5)
