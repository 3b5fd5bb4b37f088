"""Section `train` of params.yaml: the targets (device config x mode) and the estimators' settings.

The estimator allow-lists live here because they are what params.yaml may pass to the estimators;
model/ reads them as parsed dicts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from opcost.errors import OpcostError
from opcost.modes import MODES
from opcost.validation import Check, as_bool, as_int, as_list, as_number, as_str, check_name, checked_fields, optional


def _max_features(v: Any, where: str) -> Any:
    """scikit-learn max_features: a share in (0, 1], a count >= 1, sqrt, log2 or null (all)."""
    if v is None or v in ("sqrt", "log2"):
        return v
    if isinstance(v, int) and not isinstance(v, bool):
        return as_int(v, where, lo=1)
    if isinstance(v, float):
        return as_number(v, where, lo=0, hi=1, lo_open=True)
    raise OpcostError(f"{where}: expected a share in (0, 1], a count >= 1, sqrt, log2 or null, got {v!r}")


def _share(v: Any, where: str) -> float:
    return as_number(v, where, lo=0, hi=1, lo_open=True)


def _non_negative(v: Any, where: str) -> float:
    return as_number(v, where, lo=0)


# The keyword arguments of RandomForestRegressor and XGBRegressor that params.yaml may set, with
# their checks. Only these pass through to the estimators (model/training/fit.py): random_state, n_jobs,
# tree_method, objective and booster are set by the code, and model/basis/trees.py compiles only
# single-output forests and squared-error gbtree boosters with numerical splits.
RANDOM_FOREST_KEYS: dict[str, Check] = {
    "n_estimators": lambda v, w: as_int(v, w, lo=1),
    "criterion": lambda v, w: as_str(v, w, ("squared_error", "absolute_error", "friedman_mse")),
    "max_depth": optional(lambda v, w: as_int(v, w, lo=1)),
    "min_samples_split": lambda v, w: as_int(v, w, lo=2),
    "min_samples_leaf": lambda v, w: as_int(v, w, lo=1),
    "max_features": _max_features,
    "max_leaf_nodes": optional(lambda v, w: as_int(v, w, lo=2)),
    "min_impurity_decrease": _non_negative,
    "bootstrap": as_bool,
    "max_samples": optional(_share),
    "ccp_alpha": _non_negative,
}
XGBOOST_KEYS: dict[str, Check] = {
    "n_estimators": lambda v, w: as_int(v, w, lo=1),
    "max_depth": lambda v, w: as_int(v, w, lo=1),
    "max_leaves": lambda v, w: as_int(v, w, lo=0),
    "max_bin": lambda v, w: as_int(v, w, lo=2),
    "learning_rate": _share,
    "subsample": _share,
    "colsample_bytree": _share,
    "colsample_bylevel": _share,
    "colsample_bynode": _share,
    "min_child_weight": _non_negative,
    "gamma": _non_negative,
    "reg_alpha": _non_negative,
    "reg_lambda": _non_negative,
}


SET_BY_THE_CODE = {
    "random_state": "the seed comes from train.seed",
    "n_jobs": "model/training/fit.py sets the thread count",
    "tree_method": "model/training/fit.py uses hist",
    "objective": "model/basis/trees.py compiles squared-error models only",
    "booster": "model/basis/trees.py compiles gbtree models only",
}


@dataclass(frozen=True)
class TrainParams:
    """Per device config and mode (`targets`, e.g. A30-inference): algorithms' settings and seeds."""

    targets: tuple[str, ...] = ()
    folds: int = 15
    seed: int = 0
    random_forest: dict[str, Any] = field(default_factory=dict)
    xgboost: dict[str, Any] = field(default_factory=dict)

    @staticmethod
    def split_target(target: str) -> tuple[str, str]:
        """`A30_no_tf32-inference` -> ("A30_no_tf32", "inference")."""
        device, _, mode = target.rpartition("-")
        if not device or mode not in MODES:
            raise OpcostError(f"train target {target!r} must be <device config>-<mode>, mode one of {', '.join(MODES)}")
        return device, mode

    @classmethod
    def from_dict(cls, raw: Any, where: str) -> "TrainParams":
        """`train`: every key checked by TRAIN_FIELDS; a target is named at most once."""
        train = cls(**checked_fields(raw, where, TRAIN_FIELDS))
        if len(set(train.targets)) != len(train.targets):
            raise OpcostError(f"{where}.targets lists a target more than once")
        return train


def _target(v: Any, where: str) -> str:
    """A train target: a safe name that splits into a device config and a mode."""
    check_name(v, where, "train target")
    try:
        TrainParams.split_target(v)
    except OpcostError as exc:
        raise OpcostError(f"{where}: {exc}") from None
    return str(v)  # a name check_name accepted: already a str


TRAIN_FIELDS: dict[str, Check] = {
    "targets": lambda v, w: as_list(v or [], w, _target),
    "folds": lambda v, w: as_int(v, w, lo=2),
    "seed": lambda v, w: as_int(v, w, lo=0),
    "random_forest": lambda v, w: checked_fields(v, w, RANDOM_FOREST_KEYS, SET_BY_THE_CODE),
    "xgboost": lambda v, w: checked_fields(v, w, XGBOOST_KEYS, SET_BY_THE_CODE),
}
