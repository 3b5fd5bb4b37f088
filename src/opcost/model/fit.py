"""Fitting and scoring the per-operation models of one device config and mode (library of `train`).

For one target: random forest and XGBoost, for time and for power, each on the thesis' baseline
encoding (raw target, as the thesis trained) and on the improved encoding (log target: times span
five orders of magnitude). All combinations share the same folds:
- a held-out test split of `test_size` of the operations (GroupShuffleSplit by op), scored once;
- `folds`-fold cross-validation grouped by op on the rest (R^2 per fold, mean and std; MAPE).
The best time and best power model (by mean CV R^2) are refitted on all rows and compiled to
arrays (model/trees.py). Nothing here reads or writes files or talks to MLflow.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestRegressor
from sklearn.metrics import mean_absolute_percentage_error, r2_score
from sklearn.model_selection import GroupKFold, GroupShuffleSplit

from opcost.config import TrainParams
from opcost.errors import OpcostError
from opcost.model.bundle import QuantityModel
from opcost.model.features import FEATURE_SETS, Encoding, encodings, record_of
from opcost.model.trees import compile_ensemble

ALGORITHMS = ("rf", "xgb")
TARGET_COLUMN = {"time": "t_s", "power": "p_w"}


def estimator(algorithm: str, params: TrainParams, seed: int) -> Any:
    if algorithm == "rf":
        kw = {"n_estimators": 200, **params.random_forest}
        return RandomForestRegressor(random_state=seed, n_jobs=2, **kw)
    from xgboost import XGBRegressor

    kw = {"n_estimators": 400, "max_depth": 6, **params.xgboost}
    return XGBRegressor(random_state=seed, n_jobs=2, tree_method="hist", **kw)


def _items(df: pd.DataFrame) -> list[tuple[Any, float | None]]:
    return [(record_of(r), None if pd.isna(r["clock_mhz"]) else float(r["clock_mhz"])) for _, r in df.iterrows()]


def _mape(y: np.ndarray, p: np.ndarray) -> float:
    return float(mean_absolute_percentage_error(y, p))


def evaluate_combo(
    make: Callable[[], Any],
    X: np.ndarray,
    y: np.ndarray,
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


def score_all(df: pd.DataFrame, tp: TrainParams) -> tuple[dict[str, Any], dict[str, Encoding], dict[str, np.ndarray]]:
    """Every algorithm x feature set x quantity scored on the shared splits.
    Returns (results[quantity][algorithm][feature_set], encodings, feature matrices)."""
    items = _items(df)
    groups = df["op_id"].to_numpy()
    encs = encodings(df["kind"])
    X = {fs: encs[fs].matrix(items) for fs in FEATURE_SETS}
    train_idx, test_idx, folds = splits(groups, tp)
    results: dict[str, Any] = {}
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
                    fs == "improved",
                    tr_q,
                    te_q,
                    folds_q,
                )
                results.setdefault(quantity, {}).setdefault(alg, {})[fs] = res
    return results, encs, X


def fit_chosen(
    df: pd.DataFrame, tp: TrainParams, results: dict[str, Any], encs: dict[str, Encoding], X: dict[str, np.ndarray]
) -> dict[str, QuantityModel]:
    """Per quantity, the combination with the best mean CV R^2, refitted on every row and compiled."""
    chosen: dict[str, QuantityModel] = {}
    for quantity, by_alg in results.items():
        best_alg, best_fs = max(
            ((a, f) for a in by_alg for f in by_alg[a]), key=lambda af: by_alg[af[0]][af[1]]["cv_r2_mean"]
        )
        ok = df[TARGET_COLUMN[quantity]].notna().to_numpy()
        log_t = best_fs == "improved"
        y = df.loc[ok, TARGET_COLUMN[quantity]].to_numpy(float)
        est = estimator(best_alg, tp, tp.seed).fit(X[best_fs][ok], np.log(y) if log_t else y)
        compiled = compile_ensemble(est, X[best_fs][ok])  # checked against the library's predictions
        chosen[quantity] = QuantityModel(f"{best_alg}-{best_fs}", compiled, encs[best_fs], log_t)
    return chosen


def training_ranges(df: pd.DataFrame) -> dict[str, list[float]]:
    """[min, max] of the batch size of 4-D (image) inputs, of an op's input size and of its FLOPs over
    the rows a model learns from: predictions far outside them are extrapolations and say so."""
    recs = [record_of(r) for _, r in df.iterrows()]
    batches = [r.input_shape[0] for r in recs if len(r.input_shape) == 4]
    out = {
        "in_numel": [float(min(r.in_numel for r in recs)), float(max(r.in_numel for r in recs))],
        "flops": [float(df["flops"].min()), float(df["flops"].max())],
    }
    if batches:
        out["batch"] = [float(min(batches)), float(max(batches))]
    return out


def bundle_hash(version: str, params: TrainParams, target: str) -> str:
    """The registry identity of a bundle: its data version, training parameters, target, and the code
    that shapes a model (this module, encodings, bundle format, tree compiler)."""
    import opcost.model.bundle
    import opcost.model.features
    import opcost.model.fit
    import opcost.model.trees

    modules = (opcost.model.features, opcost.model.fit, opcost.model.bundle, opcost.model.trees)
    code = b"".join(Path(m.__file__).read_bytes() for m in modules)
    text = json.dumps({"data": version, "params": params.__dict__, "target": target}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode() + code).hexdigest()[:16]
