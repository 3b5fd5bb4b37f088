"""Stage `train@<device>-<mode>`: per-operation time and power models, scored, tracked, registered.

For one device config and mode: random forest and XGBoost, for time and for power, each on the
thesis' baseline encoding (raw target, as the thesis trained) and on the improved encoding (log
target: times span five orders of magnitude). All eight share the same folds:
- a held-out test split of 20 % of the operations (GroupShuffleSplit by op), scored once;
- 15-fold cross-validation grouped by op on the rest (R^2 per fold, mean and std; MAPE).
The best time and best power model (by mean CV R^2) are refitted on all data and bundled with
their encodings into models/<target>/ and the MLflow registry. A bundle is registered only if no
version with the same content hash (data version, parameters, code) exists, so re-running the
stage on unchanged inputs registers nothing new.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestRegressor
from sklearn.metrics import mean_absolute_percentage_error, r2_score
from sklearn.model_selection import GroupKFold, GroupShuffleSplit

from opcost.config import Params, Paths, TrainParams
from opcost.errors import OpcostError
from opcost.io import round_floats, write_json
from opcost.model import tracking
from opcost.model.bundle import Bundle, QuantityModel
from opcost.model.features import FEATURE_SETS, encodings, record_of
from opcost.model.trees import compile_ensemble
from opcost.ops.catalog import known_operations
from opcost.schemas import EVALUATED_OPERATIONS

ALGORITHMS = ("rf", "xgb")
TARGET_COLUMN = {"time": "t_s", "power": "p_w"}
PHASE = {"inference": "forward", "training": "forward_backward"}


def estimator(algorithm: str, params: TrainParams, seed: int) -> Any:
    if algorithm == "rf":
        kw = {"n_estimators": 200, **params.random_forest}
        return RandomForestRegressor(random_state=seed, n_jobs=2, **kw)
    from xgboost import XGBRegressor

    kw = {"n_estimators": 400, "max_depth": 6, **params.xgboost}
    return XGBRegressor(random_state=seed, n_jobs=2, tree_method="hist", **kw)


def data_version(paths: Paths) -> str:
    """md5 of the evaluated operations table: what DVC calls this data."""
    return hashlib.md5(paths.evaluated_operations.read_bytes()).hexdigest()


def training_data(paths: Paths, params: Params, target: str) -> pd.DataFrame:
    device, mode = TrainParams.split_target(target)
    ev = EVALUATED_OPERATIONS.validate(pd.read_parquet(paths.evaluated_operations))
    rows = ev[(ev["device_config"] == device) & (ev["mode"] == mode) & (ev["phase"] == PHASE[mode])]
    if rows.empty:
        have = sorted({f"{d}-{m}" for d, m in zip(ev["device_config"], ev["mode"])})
        raise OpcostError(f"no evaluated operations for {target}; device configs and modes present: {', '.join(have)}")
    cat = known_operations(paths, params)
    missing = sorted(set(rows["op_id"]) - set(cat.index))
    if missing:
        raise OpcostError(f"{len(missing)} evaluated ops have no spec in any operations table (e.g. {missing[0]})")
    return rows.join(
        cat[["spec_json", "flops", "bytes_read", "bytes_written", "params", "is_view", "output_shapes"]], on="op_id"
    )


def _items(df: pd.DataFrame) -> list[tuple[Any, float | None]]:
    return [(record_of(r), None if pd.isna(r["clock_mhz"]) else float(r["clock_mhz"])) for _, r in df.iterrows()]


def _mape(y: np.ndarray, p: np.ndarray) -> float:
    return float(mean_absolute_percentage_error(y, p))


def evaluate_combo(
    make: Callable[[], Any],
    X: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray,
    log_target: bool,
    train_idx: np.ndarray,
    test_idx: np.ndarray,
    folds: list[tuple[np.ndarray, np.ndarray]],
) -> dict[str, Any]:
    """Fold scores on the training part, then a fit on it scored on the held-out test part."""
    fy = np.log if log_target else (lambda v: v)
    inv = np.exp if log_target else (lambda v: v)
    r2s, mapes = [], []
    for tr, va in folds:
        m = make().fit(X[tr], fy(y[tr]))
        p = inv(m.predict(X[va]))
        r2s.append(float(r2_score(y[va], p)))
        mapes.append(_mape(y[va], p))
    m = make().fit(X[train_idx], fy(y[train_idx]))
    p_test = inv(m.predict(X[test_idx]))
    return {
        "cv_r2": r2s,
        "cv_r2_mean": float(np.mean(r2s)),
        "cv_r2_std": float(np.std(r2s)),
        "cv_mape_mean": float(np.mean(mapes)),
        "test_r2": float(r2_score(y[test_idx], p_test)),
        "test_mape": _mape(y[test_idx], p_test),
        "n_train": int(len(train_idx)),
        "n_test": int(len(test_idx)),
        "test_measured": y[test_idx].tolist(),
        "test_predicted": p_test.tolist(),
    }


def splits(
    groups: np.ndarray, params: TrainParams
) -> tuple[np.ndarray, np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    """Held-out test split and CV folds, all grouped by op."""
    idx = np.arange(len(groups))
    gss = GroupShuffleSplit(n_splits=1, test_size=params.test_size, random_state=params.seed)
    train_idx, test_idx = next(gss.split(idx, groups=groups))
    n_groups = len(set(groups[train_idx]))
    k = min(params.folds, n_groups)
    if k < 2:
        raise OpcostError(f"only {n_groups} distinct ops to train on: need at least 2 for cross-validation")
    folds = [(train_idx[a], train_idx[b]) for a, b in GroupKFold(n_splits=k).split(train_idx, groups=groups[train_idx])]
    return train_idx, test_idx, folds


def _figure(measured: list[float], predicted: list[float], title: str, unit: str) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    ax.scatter(measured, predicted, s=8, alpha=0.6)
    lo = min(min(measured), min(predicted))
    hi = max(max(measured), max(predicted))
    ax.plot([lo, hi], [lo, hi], color="grey", lw=1)
    if lo > 0 and hi / lo > 100:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel(f"measured [{unit}]")
    ax.set_ylabel(f"predicted [{unit}]")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig


def bundle_hash(version: str, params: TrainParams, target: str) -> str:
    import opcost.model.bundle
    import opcost.model.features
    import opcost.model.train
    import opcost.model.trees

    modules = (opcost.model.features, opcost.model.train, opcost.model.bundle, opcost.model.trees)
    code = b"".join(Path(m.__file__).read_bytes() for m in modules)
    text = json.dumps({"data": version, "params": params.__dict__, "target": target}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode() + code).hexdigest()[:16]


def run_train_stage(paths: Paths, params: Params, target: str, log_to_mlflow: bool = True) -> dict[str, Any]:
    tp = params.train
    device, mode = TrainParams.split_target(target)
    df = training_data(paths, params, target).reset_index(drop=True)
    items = _items(df)
    groups = df["op_id"].to_numpy()
    encs = encodings(df["kind"])
    X = {fs: encs[fs].matrix(items) for fs in FEATURE_SETS}
    train_idx, test_idx, folds = splits(groups, tp)
    version = data_version(paths)

    results: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    for quantity, col in TARGET_COLUMN.items():
        ok = df[col].notna().to_numpy()
        if ok.sum() < 4:
            continue  # no power measured (a time-only campaign): no power model
        keep = np.flatnonzero(ok)
        pos = {i: j for j, i in enumerate(keep)}
        tr_q = np.array([pos[i] for i in train_idx if i in pos])
        te_q = np.array([pos[i] for i in test_idx if i in pos])
        folds_q = [
            (np.array([pos[i] for i in a if i in pos]), np.array([pos[i] for i in b if i in pos])) for a, b in folds
        ]
        folds_q = [(a, b) for a, b in folds_q if len(a) and len(b)]
        y = df.loc[ok, col].to_numpy(float)
        for alg in ALGORITHMS:
            for fs in FEATURE_SETS:
                res = evaluate_combo(
                    lambda alg=alg: estimator(alg, tp, tp.seed),
                    X[fs][ok],
                    y,
                    groups[ok],
                    fs == "improved",
                    tr_q,
                    te_q,
                    folds_q,
                )
                results.setdefault(quantity, {}).setdefault(alg, {})[fs] = res

    chosen: dict[str, QuantityModel] = {}
    for quantity, by_alg in results.items():
        best_alg, best_fs = max(
            ((a, f) for a in by_alg for f in by_alg[a]), key=lambda af: by_alg[af[0]][af[1]]["cv_r2_mean"]
        )
        col = TARGET_COLUMN[quantity]
        ok = df[col].notna().to_numpy()
        log_t = best_fs == "improved"
        y = df.loc[ok, col].to_numpy(float)
        est = estimator(best_alg, tp, tp.seed).fit(X[best_fs][ok], np.log(y) if log_t else y)
        compiled = compile_ensemble(est, X[best_fs][ok])  # checked against the library's predictions
        chosen[quantity] = QuantityModel(f"{best_alg}-{best_fs}", compiled, encs[best_fs], log_t)

    metrics = {target: {"device_config": device, "mode": mode, "n_ops": int(len(df)), "data_version": version}}
    for quantity, by_alg in results.items():
        metrics[target][quantity] = {
            a: {
                f: {k: v for k, v in r.items() if k not in ("cv_r2", "test_measured", "test_predicted")}
                for f, r in fs.items()
            }
            for a, fs in by_alg.items()
        }
        base = max(by_alg[a]["baseline"]["cv_r2_mean"] for a in by_alg)
        base_mape = min(by_alg[a]["baseline"]["cv_mape_mean"] for a in by_alg)
        imp = max(by_alg[a]["improved"]["cv_r2_mean"] for a in by_alg)
        imp_mape = min(by_alg[a]["improved"]["cv_mape_mean"] for a in by_alg)
        metrics[target][quantity]["comparison"] = {
            "best_baseline_cv_r2": base,
            "best_improved_cv_r2": imp,
            "best_baseline_cv_mape": base_mape,
            "best_improved_cv_mape": imp_mape,
            "mape_ratio_improved_over_baseline": imp_mape / base_mape if base_mape else None,
            "improved_beats_baseline": bool(imp > base and imp_mape < base_mape),
        }
        metrics[target][quantity]["chosen"] = chosen[quantity].name

    clocks = tuple(sorted({float(c) for c in df["clock_mhz"].dropna()}))
    bundle = Bundle(
        target=target,
        device_config=device,
        mode=mode,
        phase=PHASE[mode],
        models=chosen,
        kinds=tuple(sorted(set(df["kind"]))),
        clocks_mhz=clocks,
        scores={q: metrics[target][q][chosen[q].name.split("-")[0]][chosen[q].name.split("-")[1]] for q in chosen},
        data_version=version,
        bundle_hash=bundle_hash(version, tp, target),
    )
    bundle.save(paths.model_dir(target))
    write_json(round_floats(metrics), paths.train_metrics(target))
    registered = None
    if log_to_mlflow:
        registered = log_and_register(paths, tp, target, results, bundle)
    return {"target": target, "metrics": metrics[target], "registered_version": registered}


def log_and_register(paths: Paths, tp: TrainParams, target: str, results: dict, bundle: Bundle) -> str | None:
    """Parent run per stage, nested runs per algorithm x quantity x feature set; register the bundle."""
    mlflow = tracking.setup(paths.root)
    bhash = bundle.bundle_hash
    units = {"time": "s", "power": "W"}
    with mlflow.start_run(run_name=tracking.stage_run_name(target)):
        mlflow.set_tags({"dvc_stage": f"train@{target}", "data_version": bundle.data_version, "bundle_hash": bhash})
        mlflow.log_params({"folds": tp.folds, "test_size": tp.test_size, "seed": tp.seed, "n_ops": len(bundle.kinds)})
        for quantity, by_alg in results.items():
            for alg, by_fs in by_alg.items():
                for fs, r in by_fs.items():
                    with mlflow.start_run(run_name=tracking.nested_run_name(alg, quantity, fs), nested=True):
                        mlflow.set_tags(
                            {
                                "algorithm": alg,
                                "quantity": quantity,
                                "feature_set": fs,
                                "dvc_stage": f"train@{target}",
                                "data_version": bundle.data_version,
                            }
                        )
                        mlflow.log_params(
                            {f"{alg}.{k}": v for k, v in (tp.random_forest if alg == "rf" else tp.xgboost).items()}
                        )
                        mlflow.log_param("log_target", fs == "improved")
                        for step, v in enumerate(r["cv_r2"]):
                            mlflow.log_metric("cv_r2", v, step=step)
                        mlflow.log_metrics(
                            {k: r[k] for k in ("cv_r2_mean", "cv_r2_std", "cv_mape_mean", "test_r2", "test_mape")}
                        )
                        fig = _figure(
                            r["test_measured"], r["test_predicted"], f"{target} {quantity} {alg}-{fs}", units[quantity]
                        )
                        mlflow.log_figure(fig, f"predicted_vs_measured_{quantity}.png")
                        import matplotlib.pyplot as plt

                        plt.close(fig)
        return register_bundle(mlflow, bundle)


def register_bundle(mlflow: Any, bundle: Bundle) -> str | None:
    """Register `bundle` in the active run unless a version with its content hash exists; move the
    champion alias to it if its score (sum of the chosen models' mean CV R^2) is at least the
    champion's. Returns the new version, or None when nothing new was registered."""
    from mlflow import MlflowClient

    from opcost.model.pyfunc import BundleModel

    name = tracking.registered_name(bundle.target)
    client = MlflowClient()
    if tracking.find_version(client, name, bundle.bundle_hash) is not None:
        return None  # the same bundle is registered already
    score = sum(bundle.scores[q]["cv_r2_mean"] for q in bundle.scores)
    with tempfile.TemporaryDirectory() as tmp:
        bundle.save(Path(tmp))
        info = mlflow.pyfunc.log_model(
            name="bundle",
            python_model=BundleModel(),
            artifacts={"bundle": tmp},
            registered_model_name=name,
            pip_requirements=[],
        )
    version = str(info.registered_model_version)
    tags = {
        "bundle_hash": bundle.bundle_hash,
        "data_version": bundle.data_version,
        "score": score,
        **{
            f"{q}_{k}": bundle.scores[q][k]
            for q in bundle.scores
            for k in ("cv_r2_mean", "cv_mape_mean", "test_r2", "test_mape")
        },
        **{f"{q}_model": m.name for q, m in bundle.models.items()},
    }
    for k, v in tags.items():
        client.set_model_version_tag(name, version, k, str(v))
    champ = tracking.champion_version(client, name)
    if champ is None or score >= float(champ.tags.get("score", "-inf")):
        client.set_registered_model_alias(name, tracking.CHAMPION, version)
    mlflow.log_metric("bundle_score", score)
    return version


def sync_registry(paths: Paths, params: Params) -> dict[str, str | None]:
    """Register the bundles under models/ that this tracking store lacks (a fresh clone's `dvc pull`
    brings models without their MLflow runs). Each gets a run `sync@<target>` with its scores."""
    mlflow = tracking.setup(paths.root)
    from mlflow import MlflowClient

    client = MlflowClient()
    done: dict[str, str | None] = {}
    for target in params.train.targets:
        folder = paths.model_dir(target)
        if not (folder / "bundle.joblib").is_file():
            raise OpcostError(f"{folder} has no bundle: run `dvc pull` or `dvc repro train@{target}`")
        bundle = Bundle.load(folder)
        if tracking.find_version(client, tracking.registered_name(target), bundle.bundle_hash) is not None:
            done[target] = None
            continue
        with mlflow.start_run(run_name=f"sync@{target}"):
            mlflow.set_tags(
                {
                    "dvc_stage": f"train@{target}",
                    "data_version": bundle.data_version,
                    "bundle_hash": bundle.bundle_hash,
                    "synced_from": "models/",
                }
            )
            for q, s in bundle.scores.items():
                mlflow.log_metrics({f"{q}_{k}": v for k, v in s.items() if isinstance(v, (int, float))})
            done[target] = register_bundle(mlflow, bundle)
    return done


def merge_metrics(paths: Paths, params: Params) -> dict[str, Any]:
    """Stage `train-report`: the per-target metrics into reports/train/metrics.json."""
    merged: dict[str, Any] = {}
    for t in params.train.targets:
        f = paths.train_metrics(t)
        if not f.is_file():
            raise OpcostError(f"{f} missing: run `dvc repro train@{t}`")
        merged.update(json.loads(f.read_text()))
    write_json(merged, paths.train_metrics())
    return merged
