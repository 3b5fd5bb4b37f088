"""The MLflow record of one train run (stage train@<target>), built from its scores and bundle.

A parent run per device config and mode: the chosen models, the cross-validated R2 of each (the headline),
the out-of-sample network errors and interval scores, the composition layer's coefficients and the floors,
and a one-paragraph description; a nested run per algorithm x quantity x feature set x split with its
out-of-fold scores (errors in per cent), per-fold R2 and a predicted-vs-measured figure. Names come from
model/records/tracking.py; the record's shape and its logging from model/records/runlog.py. Nothing here
reads files or talks to MLflow.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from opcost.errors import OpcostError
from opcost.model.composition.bundle import Bundle
from opcost.model.composition.compose import Composition
from opcost.model.records import tracking
from opcost.model.records.runlog import Figure, Run, RunRecord
from opcost.model.training import netval
from opcost.params.train import TrainParams

SCORE_KEYS = ("r2", "mape", "mdape", "twe", "n")  # the scores of one candidate under one split (fit.scores)
UNITS = {"time": "s", "power": "W"}


def split_id(tp: TrainParams) -> str:
    """What makes two candidates' scores comparable: the split they were scored on."""
    return f"grouped-k{tp.folds}-seed{tp.seed}"


def floor_metrics(bundle: Bundle) -> dict[str, float]:
    """The time model's per-kind floors (data/floors.py) as train-run metrics, one per kind; none where
    it has none (training, older bundles)."""
    time_model = bundle.models.get("time")
    kind_floors = time_model.encoding.kind_floors if time_model is not None else ()
    return {tracking.kind_floor_metric(k): v for k, v in kind_floors}


def child_metrics(r: dict[str, Any]) -> dict[str, float]:
    """A nested run's out-of-fold op scores: errors in per cent under names that say so
    (tracking.OP_ERROR_METRICS), R2 and the row count as they are."""
    return {
        tracking.OP_ERROR_METRICS.get(k, k): 100 * r[k] if k in tracking.OP_ERROR_METRICS else r[k] for k in SCORE_KEYS
    }


def parent_headline(results: dict[str, Any], detail: dict[str, Any]) -> dict[str, float]:
    """What a parent run shows first: each chosen model's cross-validated R2 on the grouped split (mean and
    standard deviation over folds; a fold without a score left out)."""
    out = {}
    for q, name in detail["chosen"].items():
        alg, fs = name.split("-")
        folds = [float(x) for x in results[q][alg][fs]["grouped"]["fold_r2"] if x is not None and np.isfinite(x)]
        if folds:
            mean, std = tracking.cv_r2_metrics(q)
            out[mean], out[std] = float(np.mean(folds)), float(np.std(folds))
    return out


def parent_description(target: str, detail: dict[str, Any], headline: dict[str, float]) -> str:
    """One paragraph on the parent run's page: what was trained, what was chosen, how well it does."""
    parts = []
    for q, name in detail["chosen"].items():
        mean, std = tracking.cv_r2_metrics(q)
        if mean in headline:
            parts.append(f"{q}: {name}, cross-validated R2 {headline[mean]:.3f} +- {headline[std]:.3f} (grouped split)")
        else:
            parts.append(f"{q}: {name}")
    net = detail["networks"].get(netval.SPLIT_MODEL, {})  # the headline split: each network's whole model held out
    t = net.get("time", {})
    err = (
        f"Out of sample, networks predicted with their whole model held out have a time MAPE of {t['mape_pct']:.1f} % "
        f"over {net.get('networks', 0)} networks (metric "
        f"{tracking.net_error_metric(netval.SPLIT_MODEL, 'time', 'mape_pct')}; net_family_* and net_network_* hold "
        "the family and the single network held out)."
        if "mape_pct" in t
        else "No measured networks to score out of sample."
    )
    return (
        f"Stage train@{target}: per-operation models for {detail['device_config']} in {detail['mode']} mode, trained "
        f"on {detail['n_ops']} evaluated op rows (data version {detail['data_version']}). Chosen on the grouped "
        f"split ({detail['split']}): {'; '.join(parts)}. {err} Composition layer: {detail['composition']['source']}. "
        "The nested runs compare every algorithm x quantity x feature set x split; errors are in per cent."
    )


def nested_runs(target: str, tp: TrainParams, results: dict[str, Any]) -> tuple[Run, ...]:
    """One nested run per algorithm x quantity x feature set x split of `results` (fit.score_all)."""
    children = []
    for quantity, by_alg in results.items():
        for alg, by_fs in by_alg.items():
            settings = tp.random_forest if alg == "rf" else tp.xgboost
            for fs, by_split in by_fs.items():
                for split, r in by_split.items():
                    figure = Figure(
                        file=f"predicted_vs_measured_{quantity}.png",
                        title=f"{target} {quantity} {alg}-{fs}, {split} split (out of fold)",
                        unit=UNITS[quantity],
                        measured=[float(x) for x in r["measured"]],
                        predicted=[float(x) for x in r["predicted"]],
                    )
                    children.append(
                        Run(
                            name=tracking.nested_run_name(alg, quantity, fs, split),
                            tags={"algorithm": alg, "quantity": quantity, "feature_set": fs, "split": split},
                            params={**{f"{alg}.{k}": v for k, v in settings.items()}, "feature_set": fs},
                            metrics=child_metrics(r),
                            steps={"fold_r2": r["fold_r2"]},
                            figures=(figure,),
                        )
                    )
    return tuple(children)


def network_metrics(detail: dict[str, Any]) -> dict[str, Any]:
    """The out-of-sample network errors and interval scores under every split, then what each score set's
    intervals rest on (netval.interval_table; its rule, a name, left out)."""
    out = {}
    for split in netval.SPLITS:
        for q in ("time", "energy"):
            for k, v in detail["networks"].get(split, {}).get(q, {}).items():
                out[tracking.net_error_metric(split, q, k)] = v
            for k, v in detail["networks"].get(split, {}).get("interval", {}).get(q, {}).items():
                out[tracking.net_interval_metric(split, q, k)] = v
    for score_set, by_q in detail.get("intervals", {}).items():
        for q, v in by_q.items():
            numeric = {k: x for k, x in v.items() if k not in ("conformal", "rule")}
            out |= {tracking.interval_metric(score_set, q, k): float(x) for k, x in numeric.items()}
    return out


def composition_metrics(comp: Composition) -> dict[str, float]:
    """The composition layer's coefficients and its energy cap (model/clocks/powerlimit.py; 0: none)."""
    out = {tracking.composition_metric("time", k): v for k, v in comp.time_coef.items()} | {
        tracking.composition_metric("energy", k): v for k, v in comp.energy_coef.items()
    }
    out[tracking.COMP_POWER_CAP_METRIC] = comp.power_cap_w
    return out


def build(
    target: str, tp: TrainParams, results: dict[str, Any], bundle: Bundle, detail: dict[str, Any], nets: pd.DataFrame
) -> RunRecord:
    """The record of train@`target`: `results` (fit.score_all), the trained `bundle`, the stage's `detail`
    (its report) and `nets`, the out-of-sample network predictions (netval.evaluate's rows, every split)."""
    comp = bundle.composition
    if comp is None:  # the train stage attaches a composition layer (calibrated or not) to every bundle
        raise OpcostError(f"{target}: the trained bundle has no composition layer to log")
    figures = []
    lono = nets[nets["split"] == netval.SPLIT_MODEL] if len(nets) else nets
    if len(lono):
        figures.append(
            Figure(
                file="networks_leave_one_out.png",
                title=f"{target}: networks predicted with their whole model held out [s]",
                unit="s",
                measured=[float(x) for x in lono["measured_t_s"]],
                predicted=[float(x) for x in lono["predicted_t_s"]],
            )
        )
    params = {"folds": tp.folds, "seed": tp.seed, "n_rows": detail["n_ops"], "chosen_time": detail["chosen"]["time"]}
    if "power" in detail["chosen"]:
        params["chosen_power"] = detail["chosen"]["power"]
    params["composition_calibrated"] = comp.calibrated
    params["composition_source"] = comp.source
    headline = parent_headline(results, detail)
    tags = {
        tracking.STAGE_TAG: f"train@{target}",
        tracking.DATA_VERSION_TAG: bundle.data_version,
        tracking.BUNDLE_HASH_TAG: bundle.bundle_hash,
        "device_config": bundle.device_config,
        "mode": bundle.mode,
        tracking.SPLIT_TAG: split_id(tp),
        tracking.NOTE_TAG: parent_description(target, detail, headline),
    }
    metrics = {
        **headline,
        **network_metrics(detail),
        **composition_metrics(comp),
        **floor_metrics(bundle),
        tracking.FLOOR_METRIC: bundle.floor_s,
    }
    return RunRecord(
        name=tracking.stage_run_name(target),
        tags=tags,
        params=params,
        metrics=metrics,
        figures=tuple(figures),
        children=nested_runs(target, tp, results),
    )
