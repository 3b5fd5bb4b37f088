"""Tree ensembles compiled to numpy arrays: prediction without importing XGBoost or scikit-learn.

A trained XGBoost regressor (squared error, gbtree) or scikit-learn random forest is turned into
padded arrays (trees x nodes: split feature, threshold, children, leaf value) and evaluated for
all rows and trees at once, one tree level per step. Inputs are rounded to float32 and compared in
double precision with thresholds kept as the libraries keep them (XGBoost: float32, `x < t` goes
left; scikit-learn: float64 midpoints, `x <= t` goes left), so the
compiled ensemble reproduces the library's predictions; `compile_ensemble` checks that on the
training data. Loading a bundle then needs numpy only, which keeps a cold `opcost predict` fast.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt


@dataclass
class TreeEnsemble:
    feature: npt.NDArray[np.int32]  # int32 [trees, nodes]; leaves point at feature 0
    threshold: npt.NDArray[np.float64]  # float64 [trees, nodes], exactly the library's value
    left: npt.NDArray[np.int32]  # int32 [trees, nodes]; a leaf is its own child
    right: npt.NDArray[np.int32]  # int32 [trees, nodes]
    value: npt.NDArray[np.float64]  # float64 [trees, nodes] leaf values
    depth: int  # steps from root to the deepest leaf
    strict_less: bool  # XGBoost: x < t goes left; scikit-learn: x <= t
    base: float  # added to the sum (XGBoost base_score)
    average: bool  # random forest: mean over trees instead of sum

    def __post_init__(self) -> None:
        # flat views: node ids become offsets into trees x nodes, children point at flat ids
        t, w = self.feature.shape
        offset = (np.arange(t, dtype=np.int32) * w)[:, None]
        self._feature = self.feature.ravel().astype(np.int32)
        self._threshold = self.threshold.ravel()
        # children interleaved: [left of node 0, right of node 0, left of node 1, ...]
        self._children = (
            np.stack([(self.left + offset).ravel(), (self.right + offset).ravel()], axis=1).ravel().astype(np.int32)
        )
        self._value = self.value.ravel()
        self._roots = offset.ravel()

    def predict(self, X: npt.ArrayLike) -> npt.NDArray[np.float64]:
        # float32 rounding as the libraries do it, compared in double against exact thresholds
        Xr = np.ascontiguousarray(np.asarray(X, dtype=np.float32), dtype=np.float64)
        n, ncol = Xr.shape
        if n == 0:
            return np.zeros(0)
        flat_x = Xr.ravel()
        row_base = (np.arange(n, dtype=np.int32) * ncol)[:, None]
        node = np.broadcast_to(self._roots, (n, len(self._roots))).copy()
        for _ in range(self.depth):
            x = flat_x.take(row_base + self._feature.take(node))
            thr = self._threshold.take(node)
            go_right = x >= thr if self.strict_less else x > thr
            node = self._children.take(2 * node + go_right)
        leaves = self._value.take(node)
        # numpy's stubs type a reduction over an axis as Any; over float64 leaves it is a float64 array
        out: npt.NDArray[np.float64] = (
            leaves.mean(axis=1) if self.average else self.base + leaves.sum(axis=1, dtype=np.float64)
        )
        return out


def _pack(trees: list[dict[str, np.ndarray]], strict_less: bool, base: float, average: bool) -> TreeEnsemble:
    width = max(len(t["left"]) for t in trees)
    shape = (len(trees), width)
    feature = np.zeros(shape, np.int32)
    threshold = np.zeros(shape, np.float64)
    left = np.zeros(shape, np.int32)
    right = np.zeros(shape, np.int32)
    value = np.zeros(shape, np.float64)
    depth = 0
    for i, t in enumerate(trees):
        k = len(t["left"])
        leaf = t["left"] < 0
        idx = np.arange(k)
        feature[i, :k] = np.where(leaf, 0, t["feature"])
        threshold[i, :k] = np.where(leaf, 0, t["threshold"])
        left[i, :k] = np.where(leaf, idx, t["left"])
        right[i, :k] = np.where(leaf, idx, t["right"])
        value[i, :k] = np.where(leaf, t["value"], 0.0)
        depth = max(depth, _depth(t["left"], t["right"]))
    return TreeEnsemble(feature, threshold, left, right, value, depth, strict_less, base, average)


def _depth(left: np.ndarray, right: np.ndarray) -> int:
    depth, frontier, d = 0, [0], 0
    while frontier:
        nxt = [c for n in frontier for c in (left[n], right[n]) if c >= 0]
        if nxt:
            d += 1
            depth = d
        frontier = nxt
    return depth


def from_xgboost(model: Any) -> TreeEnsemble:
    """An XGBRegressor (reg:squarederror, gbtree, numerical splits) as arrays."""
    j = json.loads(model.get_booster().save_raw("json"))
    learner = j["learner"]
    if learner["objective"]["name"] != "reg:squarederror" or learner["gradient_booster"]["name"] != "gbtree":
        raise ValueError("only reg:squarederror gbtree models can be compiled")
    base = float(learner["learner_model_param"]["base_score"].strip("[]"))
    trees = []
    for t in learner["gradient_booster"]["model"]["trees"]:
        if any(t["split_type"]):
            raise ValueError("categorical splits cannot be compiled")
        left = np.asarray(t["left_children"], np.int64)
        trees.append(
            {
                "left": np.where(left == -1, -1, left),
                "right": np.asarray(t["right_children"], np.int64),
                "feature": np.asarray(t["split_indices"], np.int64),
                "threshold": np.asarray(t["split_conditions"], np.float32).astype(np.float64),
                "value": np.asarray(t["split_conditions"], np.float64),  # a leaf's weight sits here
            }
        )
    return _pack(trees, strict_less=True, base=base, average=False)


def from_sklearn_forest(model: Any) -> TreeEnsemble:
    """A scikit-learn RandomForestRegressor (single output) as arrays."""
    trees = []
    for est in model.estimators_:
        tr = est.tree_
        trees.append(
            {
                "left": np.asarray(tr.children_left, np.int64),
                "right": np.asarray(tr.children_right, np.int64),
                "feature": np.asarray(tr.feature, np.int64),
                "threshold": np.asarray(tr.threshold, np.float64),
                "value": np.asarray(tr.value[:, 0, 0], np.float64),
            }
        )
    return _pack(trees, strict_less=False, base=0.0, average=True)


def compile_ensemble(model: Any, X_check: np.ndarray) -> TreeEnsemble:
    """Compile `model` and check it predicts what the library predicts on `X_check`."""
    name = type(model).__name__
    ens = from_xgboost(model) if name.startswith("XGB") else from_sklearn_forest(model)
    ref = np.asarray(model.predict(X_check), np.float64)
    got = ens.predict(X_check)
    if not np.allclose(got, ref, rtol=1e-5, atol=1e-6 * max(1.0, float(np.abs(ref).max(initial=0)))):
        worst = float(np.max(np.abs(got - ref)))
        raise AssertionError(f"compiled {name} differs from the library's predictions by up to {worst}")
    return ens
