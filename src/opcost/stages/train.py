"""Stage `train@<device>-<mode>`: per-operation time and power models, scored, tracked, registered.

Reads only data/evaluated/targets/<target>/operations.parquet (that device config and mode's rows,
specs joined in), so measurements of other devices never retrain this target. Writes
models/<target>/ (bundle.json + trees.npz, and run.json: what the run logs to MLflow) and the
detailed scores reports/train/targets/<target>.json; then replays the run record into MLflow and
registers the bundle as `opcost-<target>` (model/registry.py).
"""

from __future__ import annotations

import hashlib
import sys
from typing import Any

import pandas as pd

from opcost.config import OP_PHASE, Params, Paths, TrainParams
from opcost.errors import OpcostError
from opcost.io import write_json
from opcost.model import registry, runlog, tracking
from opcost.model.bundle import Bundle
from opcost.model.fit import bundle_hash, fit_chosen, score_all, training_ranges
from opcost.schemas import TARGET_OPERATIONS
from opcost.stages._run import execute
from opcost.tables import read_table

SCORE_KEYS = ("cv_r2_mean", "cv_r2_std", "cv_mape_mean", "test_r2", "test_mape", "n_train", "n_test")
UNITS = {"time": "s", "power": "W"}


def training_rows(paths: Paths, target: str) -> pd.DataFrame:
    df = read_table(paths.target_operations(target), TARGET_OPERATIONS, "evaluate")
    if df.empty:
        raise OpcostError(f"{paths.target_operations(target)} holds no rows to train {target} on")
    return df.reset_index(drop=True)


def data_version(paths: Paths, target: str) -> str:
    """md5 of the rows this target learns from: what DVC calls this data."""
    return hashlib.md5(paths.target_operations(target).read_bytes()).hexdigest()


def detail_metrics(
    target: str, df: pd.DataFrame, results: dict[str, Any], chosen: dict[str, Any], version: str
) -> dict:
    device, mode = TrainParams.split_target(target)
    m: dict[str, Any] = {"device_config": device, "mode": mode, "n_ops": int(len(df)), "data_version": version}
    for quantity, by_alg in results.items():
        m[quantity] = {a: {f: {k: r[k] for k in SCORE_KEYS} for f, r in fs.items()} for a, fs in by_alg.items()}
        base = max(by_alg[a]["baseline"]["cv_r2_mean"] for a in by_alg)
        base_mape = min(by_alg[a]["baseline"]["cv_mape_mean"] for a in by_alg)
        imp = max(by_alg[a]["improved"]["cv_r2_mean"] for a in by_alg)
        imp_mape = min(by_alg[a]["improved"]["cv_mape_mean"] for a in by_alg)
        m[quantity]["comparison"] = {
            "best_baseline_cv_r2": base,
            "best_improved_cv_r2": imp,
            "best_baseline_cv_mape": base_mape,
            "best_improved_cv_mape": imp_mape,
            "mape_ratio_improved_over_baseline": imp_mape / base_mape if base_mape else None,
            "improved_beats_baseline": bool(imp > base and imp_mape < base_mape),
        }
        m[quantity]["chosen"] = chosen[quantity].name
    return {target: m}


def run_record(target: str, tp: TrainParams, results: dict[str, Any], bundle: Bundle, n_rows: int) -> dict[str, Any]:
    tags = {
        "dvc_stage": f"train@{target}",
        "data_version": bundle.data_version,
        "bundle_hash": bundle.bundle_hash,
        "device_config": bundle.device_config,
        "mode": bundle.mode,
    }
    children = []
    for quantity, by_alg in results.items():
        for alg, by_fs in by_alg.items():
            settings = tp.random_forest if alg == "rf" else tp.xgboost
            for fs, r in by_fs.items():
                name = tracking.nested_run_name(alg, quantity, fs)
                figure = {
                    "file": f"predicted_vs_measured_{quantity}.png",
                    "title": f"{target} {quantity} {alg}-{fs} (held-out ops)",
                    "unit": UNITS[quantity],
                    "measured": r["test_measured"],
                    "predicted": r["test_predicted"],
                }
                children.append(
                    runlog.child(
                        name,
                        {"algorithm": alg, "quantity": quantity, "feature_set": fs},
                        {**{f"{alg}.{k}": v for k, v in settings.items()}, "log_target": fs == "improved"},
                        {k: r[k] for k in SCORE_KEYS},
                        {"cv_r2": r["cv_r2"]},
                        [figure],
                    )
                )
    params = {"folds": tp.folds, "test_size": tp.test_size, "seed": tp.seed, "n_rows": n_rows}
    return {
        "name": tracking.stage_run_name(target),
        "tags": tags,
        "params": params,
        "metrics": {},
        "steps": {},
        "figures": [],
        "children": children,
    }


def run(paths: Paths, params: Params, target: str, log_to_mlflow: bool = True) -> dict[str, Any]:
    tp = params.train
    if target not in tp.targets:
        raise OpcostError(f"unknown train target {target!r}; targets in params.yaml: {', '.join(tp.targets)}")
    device, mode = TrainParams.split_target(target)
    df = training_rows(paths, target)
    version = data_version(paths, target)
    results, encs, X = score_all(df, tp)
    chosen = fit_chosen(df, tp, results, encs, X)
    metrics = detail_metrics(target, df, results, chosen, version)
    scores = {}
    for q, m in chosen.items():
        alg, fs = m.name.split("-")
        scores[q] = metrics[target][q][alg][fs]
    bundle = Bundle(
        target=target,
        device_config=device,
        mode=mode,
        phase=OP_PHASE[mode],
        models=chosen,
        kinds=tuple(sorted(set(df["kind"]))),
        clocks_mhz=tuple(sorted({float(c) for c in df["clock_mhz"].dropna()})),
        scores=scores,
        data_version=version,
        bundle_hash=bundle_hash(version, tp, target),
        ranges=training_ranges(df),
    )
    record = run_record(target, tp, results, bundle, len(df))
    folder = paths.model_dir(target)
    bundle.save(folder)
    runlog.save(record, folder)
    write_json(metrics, paths.train_metrics(target))
    registered = None
    if log_to_mlflow:
        mlflow = tracking.setup(paths.root)
        with runlog.replayed(mlflow, record, tracking.source_tags(paths.root)):
            registered = registry.register_bundle(paths.root, mlflow, bundle)
    return {"target": target, "metrics": metrics[target], "registered_version": registered}


def summary(r: dict[str, Any]) -> str:
    lines = []
    for q in ("time", "power"):
        if q in r["metrics"]:
            c = r["metrics"][q]["comparison"]
            lines.append(
                f"{r['target']} {q}: chosen {r['metrics'][q]['chosen']}; CV R2 improved {c['best_improved_cv_r2']:.3f} "
                f"vs baseline {c['best_baseline_cv_r2']:.3f}, MAPE ratio {c['mape_ratio_improved_over_baseline']:.2f}"
            )
    reg = r["registered_version"]
    lines.append(f"registered version {reg}" if reg else "registry: nothing new to register")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    def args(p: Any) -> None:
        p.add_argument("--target", required=True, help="<device config>-<mode>, e.g. A30-inference")
        p.add_argument("--no-mlflow", action="store_true", help="do not log to MLflow or register")

    return execute(
        argv,
        __doc__.splitlines()[0],
        args,
        lambda paths, params, a: run(paths, params, a.target, log_to_mlflow=not a.no_mlflow),
        summary,
    )


if __name__ == "__main__":
    sys.exit(main())
