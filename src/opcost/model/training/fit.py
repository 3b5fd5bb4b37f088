"""Fitting and scoring the per-operation models of one device config and mode (library of `train`).

For one target: random forest and XGBoost, for time and for power, on the thesis' baseline encoding
(raw target, as the thesis trained) and on the improved encoding (physics features; time target
log(t / roofline), power target log p). Every combination is scored out of sample under two splits
that cannot flatter:
- `grouped`: K-fold where a layer's rows at every input shape stay in one fold (`layer_id`), so no
  shape of a layer is predicted by a model that trained on its other shapes;
- `family`: leave-one-family-out, each fold holding out every op that any extracted network of one
  architecture family calls (resnet, densenet, efficientnet, ...).
Scores: R^2, MAPE, median absolute percentage error and the time-weighted error (sum |error| / sum
time; for power, weighted by each op's time, i.e. how far energy would be off), over the pooled
out-of-fold predictions of measured rows only: rows `estimated` from another mode (data/targets.py)
train the models but are never what a model is scored against. The launch floor is the 2nd
percentile of the training rows' measured times (the fastest calls are launch- and
synchronisation-bound). No-ops (views, identities, eval-mode dropout) are never given to a tree:
they cost what the device's measured no-ops cost (the median of those rows, where at least two are
measured: an identity launches no kernel, so it sits below the launch floor), else the floor. The
improved time target is log(t / (roofline + floor)), so ops too small to leave the floor are
anchored there. The champion per quantity is chosen on the grouped split (time: lowest
time-weighted error, which is what network sums feel; power: lowest MAPE) and refitted on every
row. Nothing here reads files or talks to MLflow.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from sklearn.ensemble import RandomForestRegressor
from sklearn.model_selection import GroupKFold

from opcost.data import floors
from opcost.errors import OpcostError
from opcost.model.basis import backward, gemm
from opcost.model.basis.features import FEATURE_SETS, Encoding, OpRecord, back_transform, encodings, record_of
from opcost.model.basis.physics import compute_memory_s, is_noop
from opcost.model.basis.trees import compile_ensemble
from opcost.model.composition.bundle import QuantityModel
from opcost.params.train import TrainParams

ALGORITHMS = ("rf", "xgb")
QUANTITIES = ("time", "power")
TARGET_COLUMN = {"time": "t_s", "power": "p_w"}
SPLITS = ("grouped", "family")
CHOOSE_ON = {"time": "twe", "power": "mape"}  # grouped-split criterion per quantity (lower is better)
# `physical` changes only the time target's baseline (model/basis/gemm.py); a power model on it would be
# `improved` with two more columns, trained and scored for nothing
QUANTITY_FEATURE_SETS = {"power": ("baseline", "improved")}


def estimator(algorithm: str, params: TrainParams, seed: int) -> Any:
    if algorithm == "rf":
        kw = {"n_estimators": 200, **params.random_forest}
        return RandomForestRegressor(random_state=seed, n_jobs=2, **kw)
    from xgboost import XGBRegressor

    kw = {"n_estimators": 400, "max_depth": 6, **params.xgboost}
    # one thread: on a few hundred rows threads cost more than they give (5x slower measured on 2 cores)
    return XGBRegressor(random_state=seed, n_jobs=1, tree_method="hist", **kw)


def transform_of(quantity: str, feature_set: str) -> str:
    """How a target is learnt: raw (thesis), log, or log of time over roofline time."""
    if feature_set == "baseline":
        return "raw"
    return "log_roofline" if quantity == "time" else "log"


@dataclass
class TargetData:
    """One target's rows prepared once: records, encodings, feature matrices, offsets, groups."""

    df: pd.DataFrame
    mode: str
    device_config: str
    records: list[OpRecord]
    encs: dict[str, Encoding]
    X: dict[str, np.ndarray]
    roofline: np.ndarray  # roofline time per row [s]
    noop: np.ndarray
    layers: np.ndarray
    families: list[list[str]]
    estimated: np.ndarray  # rows estimated from another mode: trained on, never scored against
    depthwise: np.ndarray | None = None  # depthwise convolutions (model/basis/gemm.py)
    dw_compute: np.ndarray | None = None  # their FLOPs over the FP32 peak [s]
    unit: np.ndarray | None = None  # GEMM-like ops' compute unit (model/basis/gemm.py: "tf32", "fp32"; "" others)
    compute_s: np.ndarray | None = None  # FLOPs over the peak that applies (physics.op_peak) [s]
    memory_s: np.ndarray | None = None  # bytes over the bandwidth [s]
    fallback: np.ndarray | None = None  # convolutions off the TF32 tensor cores (model/basis/gemm.py)
    # training: a depthwise convolution's passes x memory time (model/basis/backward.py)
    dw_work: np.ndarray | None = None
    mm_work: np.ndarray | None = None  # training: a compute-bound Linear layer's 3 GEMMs' compute time (likewise)

    @property
    def n(self) -> int:
        return len(self.df)

    def y(self, quantity: str) -> npt.NDArray[np.float64]:
        y: npt.NDArray[np.float64] = self.df[TARGET_COLUMN[quantity]].to_numpy(np.float64)  # pandas: untyped
        return y


def prepare(df: pd.DataFrame, mode: str, device_config: str) -> TargetData:
    df = df.reset_index(drop=True)
    records = [record_of(r) for _, r in df.iterrows()]
    clocks = [None if pd.isna(c) else float(c) for c in df["clock_mhz"]]
    items = list(zip(records, clocks))
    encs = encodings(df["kind"], device_config)
    dev = encs["improved"].device  # the name resolved once, by the encodings
    cms = [compute_memory_s(r.kind, r.metrics, dev) for r in records]
    X = {fs: encs[fs].matrix(items) for fs in FEATURE_SETS}
    return TargetData(
        df=df,
        mode=mode,
        device_config=device_config,
        records=records,
        encs=encs,
        X=X,
        roofline=np.exp(encs["improved"].log_roofline(records)),  # encodings here have no floor
        noop=np.array([is_noop(r.kind, r.hp, r.metrics, mode) for r in records]),
        layers=df["layer_id"].to_numpy(),
        families=[list(f) for f in df["families"]],
        estimated=df["estimated"].to_numpy(bool) if "estimated" in df else np.zeros(len(df), bool),
        depthwise=np.array([gemm.is_depthwise(r.kind, r.hp) for r in records], bool),
        dw_compute=np.array([gemm.fp32_compute_s(r.metrics["flops"], dev) for r in records], float),
        unit=np.array([gemm.gemm_unit(r.kind, r.hp, dev) for r in records], dtype=object),
        compute_s=np.array([cm[0] for cm in cms], float),
        memory_s=np.array([cm[1] for cm in cms], float),
        fallback=np.array([gemm.tf32_fallback(r.kind, r.hp, dev) for r in records], bool),
        dw_work=backward.work_s([cm[1] for cm in cms], [backward.taps(r.kind, r.hp) for r in records])
        * (mode == backward.TRAINING_MODE),
        mm_work=backward.linear_work_s(df["kind"].tolist(), [cm[0] for cm in cms], [cm[1] for cm in cms])
        * (mode == backward.TRAINING_MODE),
    )


# --------------------------------------------------------------------------------------------
# Splits
# --------------------------------------------------------------------------------------------


def check_folds(k: int, n_groups: int, what: str = "the training data") -> None:
    """Refuse more folds than layers: a fold holds out whole layers, so `k` of them cannot be made (capping
    k quietly ran leave-one-layer-out instead, minutes of training nobody asked for)."""
    if n_groups < 2:
        raise OpcostError(f"only {n_groups} distinct layers to train on: need at least 2 for cross-validation")
    if k > n_groups:
        raise OpcostError(
            f"train.folds is {k}, but {what} hold only {n_groups} distinct layers: give at most {n_groups} "
            "(a fold holds out whole layers, so there cannot be more folds than layers)"
        )


def grouped_folds(layers: np.ndarray, k: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """K folds with every row of a layer (all its input shapes) on one side."""
    n_groups = len(set(layers))
    check_folds(k, n_groups)
    idx = np.arange(len(layers))
    return list(GroupKFold(n_splits=k, shuffle=True, random_state=seed).split(idx, groups=layers))


def family_folds(families: list[list[str]]) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """One fold per family: test = rows any network of the family calls; train = rows none of its
    networks calls (rows of no extracted network always train)."""
    names = sorted({f for fs in families for f in fs})
    out = []
    for fam in names:
        test = np.array([i for i, fs in enumerate(families) if fam in fs])
        train = np.array([i for i, fs in enumerate(families) if fam not in fs])
        if len(test) and len(train) >= 4:
            out.append((fam, train, test))
    return out


def folds_of(data: TargetData, split: str, tp: TrainParams) -> list[tuple[str, np.ndarray, np.ndarray]]:
    if split == "grouped":
        return [(str(i), tr, te) for i, (tr, te) in enumerate(grouped_folds(data.layers, tp.folds, tp.seed))]
    return family_folds(data.families)


# --------------------------------------------------------------------------------------------
# Fitting and predicting (no-ops at the floor)
# --------------------------------------------------------------------------------------------


def launch_floor(data: TargetData, rows: np.ndarray) -> float:
    """The device's launch floor from `rows` (floors.device_floor of their measured times)."""
    return floors.device_floor(data.y("time")[rows])


def kind_floors_of(data: TargetData, fs: str, quantity: str, fit_rows: np.ndarray, floor: float) -> floors.KindFloors:
    """The per-kind floors (data/floors.py) a time model with a log(t / (baseline + floor)) target learns
    from its own fit rows; () for other models."""
    if quantity != "time" or transform_of(quantity, fs) != "log_roofline":
        return ()
    if data.memory_s is None or data.compute_s is None:
        return ()
    kinds = data.df["kind"].to_numpy()[fit_rows]
    t, m, c = data.y("time")[fit_rows], data.memory_s[fit_rows], data.compute_s[fit_rows]
    return floors.kind_floors(kinds, t, m, c, floor, data.mode)


def row_floors(data: TargetData, rows: np.ndarray, floor: float, kind_floors: floors.KindFloors) -> np.ndarray:
    """Each row's floor in the offset: its kind's, else the device's (floors.per_op)."""
    return floors.per_op(data.df["kind"].to_numpy()[rows], floor, kind_floors)


MIN_MEASURED_NOOPS = 2


def noop_values(data: TargetData, rows: np.ndarray) -> tuple[float, float, float]:
    """(launch floor [s], time of a no-op [s], power of a no-op [W]) from `rows`: a no-op's time is the
    median of their measured no-ops (at least MIN_MEASURED_NOOPS), else the floor; its power the
    median power of their no-ops (at least 3), else of all rows."""
    floor = launch_floor(data, rows)
    noops = rows[data.noop[rows]]
    t = data.y("time")[noops]
    t = t[np.isfinite(t)]
    noop_t = float(np.median(t)) if len(t) >= MIN_MEASURED_NOOPS else floor
    p = data.y("power")[rows]
    nz = data.y("power")[noops]
    src = nz if np.isfinite(nz).sum() >= 3 else p
    return floor, noop_t, float(np.nanmedian(src)) if np.isfinite(src).any() else float("nan")


def _ok(data: TargetData, quantity: str) -> npt.NDArray[np.bool_]:
    return np.isfinite(data.y(quantity))


def offsets(
    data: TargetData,
    rows: np.ndarray,
    floor: "float | np.ndarray",
    dw_efficiency: float = 0.0,
    unit_eff: dict[str, float] | None = None,
    physical: bool = False,
) -> np.ndarray:
    """log(baseline + floor), `floor` one value or one per row (`row_floors`). The baseline is the roofline,
    except for a `physical` model: its compute time at the peak each op attains (model/basis/gemm.py: the FP32
    peak for convolutions the TF32 tensor cores cannot take, the unit's attained fraction `unit_eff` for
    GEMM-like ops, the depthwise baseline where `dw_efficiency` > 0), combined with the memory time as
    gemm.overlap_s does, not by their maximum. Only a physical model learns `unit_eff` and `dw_efficiency`
    (unit_efficiency_of, dw_efficiency_of), so a roofline model has nothing else to add; a physical one
    without the GEMM arrays is refused, as its baseline cannot be formed (there was a max()-roofline
    stand-in here once: a silently different model)."""
    if not physical:
        out: np.ndarray = np.log(data.roofline[rows] + floor)
        return out
    arrays = (data.compute_s, data.dw_compute, data.fallback, data.unit, data.depthwise, data.memory_s)
    if any(a is None for a in arrays):
        raise ValueError(f"a physical time model of {data.device_config}-{data.mode} needs the GEMM arrays")
    assert data.compute_s is not None and data.dw_compute is not None and data.fallback is not None
    assert data.unit is not None and data.depthwise is not None and data.memory_s is not None
    c = gemm.compute_part_s(data.compute_s[rows], data.dw_compute[rows], data.fallback[rows], data.unit[rows],
                            unit_eff or {}, data.depthwise[rows], dw_efficiency)  # fmt: skip
    physical_out: np.ndarray = np.log(gemm.overlap_s(c, data.memory_s[rows]) + floor)
    return physical_out


def dw_efficiency_of(data: TargetData, fs: str, quantity: str, fit_rows: np.ndarray, floor: float) -> float:
    """The depthwise efficiency a `physical` time model learns from its own fit rows (else 0: none).

    None in training: this baseline charges a depthwise convolution its taps' FLOPs over the FP32 peak,
    while a training step is bound by memory passes, (2 + taps) of them (the weight gradient reduces once
    per tap): model/basis/backward.py gives training rows that baseline instead, with its own learnt bandwidth
    fraction. Grouped twe of xgb-physical 15.2 ->
    10.7 % (A30), 13.4 -> 12.9 % (no TF32), 13.2 -> 9.8 % (RTX 2080 Ti)."""
    if data.mode == "training":
        return 0.0
    if fs != "physical" or quantity != "time" or data.depthwise is None or data.dw_compute is None:
        return 0.0
    dw = fit_rows[data.depthwise[fit_rows]]
    return gemm.depthwise_efficiency(data.dw_compute[dw], data.y("time")[dw], floor)


def unit_efficiency_of(
    data: TargetData, fs: str, quantity: str, fit_rows: np.ndarray, floor: float
) -> dict[str, float]:
    """The attained fraction of each unit's peak a `physical` time model learns from its own fit rows."""
    if fs != "physical" or quantity != "time" or data.unit is None or data.compute_s is None or data.memory_s is None:
        return {}
    y = data.y("time")[fit_rows]
    return gemm.unit_efficiencies(data.unit[fit_rows], data.compute_s[fit_rows], data.memory_s[fit_rows], y, floor)


@dataclass
class Fitted:
    """An estimator fitted on some rows, with the floor those rows give."""

    model: Any
    feature_set: str
    quantity: str
    rows: np.ndarray  # the rows it learned from (no no-ops)
    floor: float
    noop_time: float
    noop_power: float
    dw_efficiency: float = 0.0  # `physical` time models: learnt from `rows` only (model/basis/gemm.py)
    unit_eff: dict[str, float] = dataclasses.field(default_factory=dict)  # likewise: attained unit peaks
    dw_train_efficiency: float = 0.0  # training, log_roofline models: model/basis/backward.py, learnt from `rows`
    mm_train_efficiency: float = 0.0  # likewise, compute-bound Linear layers
    kind_floors: floors.KindFloors = ()  # log_roofline time models in inference: data/floors.py, from `rows`

    def encoding(self, data: TargetData) -> Encoding:
        return dataclasses.replace(
            data.encs[self.feature_set],
            floor_s=self.floor,
            dw_efficiency=self.dw_efficiency,
            tf32_efficiency=self.unit_eff.get(gemm.TF32_UNIT, 0.0),
            fp32_efficiency=self.unit_eff.get(gemm.FP32_UNIT, 0.0),
            dw_train_efficiency=self.dw_train_efficiency,
            mm_train_efficiency=self.mm_train_efficiency,
            kind_floors=self.kind_floors,
        )


def fit_model(data: TargetData, alg: str, fs: str, quantity: str, rows: np.ndarray, tp: TrainParams) -> Fitted:
    """The estimator fitted on `rows` (no-ops and rows without the quantity left out)."""
    floor, noop_time, noop_power = noop_values(data, rows)
    fit_rows = rows[~data.noop[rows] & _ok(data, quantity)[rows]]
    y = data.y(quantity)[fit_rows]
    dw_eff = dw_efficiency_of(data, fs, quantity, fit_rows, floor)
    unit_eff = unit_efficiency_of(data, fs, quantity, fit_rows, floor)
    kf = kind_floors_of(data, fs, quantity, fit_rows, floor)
    tr = transform_of(quantity, fs)
    dw_train = mm_train = 0.0  # model/basis/backward.py: training baselines' attained fractions, from fit_rows only
    if tr == "log_roofline" and data.dw_work is not None and data.mm_work is not None:
        dw_train = backward.efficiency(data.dw_work[fit_rows], y, floor)
        mm_train = backward.efficiency(data.mm_work[fit_rows], y, floor)
    if tr == "raw":
        target = y
    elif tr == "log":
        target = np.log(y)
    else:
        fl = row_floors(data, fit_rows, floor, kf)
        off = offsets(data, fit_rows, fl, dw_eff, unit_eff, fs == "physical")
        target = np.log(y) - backward.raised_log_offset(off, fl, _works(data, fit_rows, dw_train, mm_train))
    trees = ~backward.baseline_only(_works(data, fit_rows, dw_train, mm_train), len(fit_rows))  # baseline alone
    est = estimator(alg, tp, tp.seed).fit(data.X[fs][fit_rows[trees]], target[trees])
    if isinstance(est, RandomForestRegressor):
        # Fit in parallel (each tree has its own seed: the same trees either way), predict on one thread:
        # scikit-learn adds the trees' predictions into one array as its threads finish, in no fixed
        # order, so two runs differed in the last digits; an energy residual of the RTX 2080 Ti training
        # bundle by 1e-9, enough for a re-trained bundle of the same content hash to answer differently
        # from the registered one (tests/integration/test_1_mlflow_server.py).
        est.set_params(n_jobs=1)
    return Fitted(est, fs, quantity, fit_rows, floor, noop_time, noop_power, dw_eff, unit_eff, dw_train, mm_train, kf)


def _works(data: TargetData, rows: np.ndarray, dw_train: float, mm_train: float) -> list[tuple[np.ndarray, float]]:
    """(work, efficiency) of model/basis/backward.py's training baselines on `rows` (none where not prepared)."""
    if data.dw_work is None or data.mm_work is None:
        return []
    return [(data.dw_work[rows], dw_train), (data.mm_work[rows], mm_train)]


def predict_rows(data: TargetData, fitted: Fitted, rows: np.ndarray) -> np.ndarray:
    tr = transform_of(fitted.quantity, fitted.feature_set)
    raw = fitted.model.predict(data.X[fitted.feature_set][rows]) if len(rows) else np.zeros(0)
    if tr == "log_roofline":
        fl = row_floors(data, rows, fitted.floor, fitted.kind_floors)
        off = offsets(data, rows, fl, fitted.dw_efficiency, fitted.unit_eff, fitted.feature_set == "physical")
        works = _works(data, rows, fitted.dw_train_efficiency, fitted.mm_train_efficiency)
        only = backward.baseline_only(works, len(rows))
        raw = back_transform(raw, tr, backward.raised_log_offset(off, fl, works), only)
    else:
        raw = back_transform(raw, tr)
    return np.where(data.noop[rows], fitted.noop_time if fitted.quantity == "time" else fitted.noop_power, raw)


def scores(y: np.ndarray, p: np.ndarray, w: np.ndarray | None = None) -> dict[str, float]:
    """R^2, MAPE, median APE and weighted error (sum w|p - y| / sum w y; w = 1 for time)."""
    ok = np.isfinite(y) & np.isfinite(p)
    y, p = y[ok], p[ok]
    if not len(y):  # nothing measured to score against (every held-out row estimated)
        return {"r2": float("nan"), "mape": float("nan"), "mdape": float("nan"), "twe": float("nan"), "n": 0}
    w = np.ones_like(y) if w is None else w[ok]
    ape = np.abs(p - y) / y
    ss = float(((y - y.mean()) ** 2).sum())
    return {
        "r2": 1.0 - float(((y - p) ** 2).sum()) / ss if ss > 0 else float("nan"),
        "mape": float(ape.mean()),
        "mdape": float(np.median(ape)),
        "twe": float((w * np.abs(p - y)).sum() / (w * y).sum()),
        "n": int(len(y)),
    }


def cross_validate(data: TargetData, alg: str, fs: str, quantity: str, split: str, tp: TrainParams) -> dict[str, Any]:
    """Out-of-fold predictions under `split`, pooled, scored; per-fold R^2 for MLflow steps."""
    ys, ps, ws, fold_r2, rows_all, folds_named = [], [], [], [], [], []
    for name, tr, te in folds_of(data, split, tp):
        te = te[_ok(data, quantity)[te] & ~data.estimated[te]]
        if not len(te):
            continue
        p = predict_rows(data, fit_model(data, alg, fs, quantity, tr, tp), te)
        y = data.y(quantity)[te]
        ys.append(y)
        ps.append(p)
        ws.append(data.y("time")[te] if quantity == "power" else np.ones(len(te)))
        fold_r2.append(scores(y, p)["r2"])
        rows_all.append(te)
        folds_named.append(name)
    empty = [np.zeros(0)]
    y, p, w = np.concatenate(ys or empty), np.concatenate(ps or empty), np.concatenate(ws or empty)
    return {
        **scores(y, p, w),
        "fold_r2": fold_r2,
        "folds": folds_named,
        "rows": np.concatenate(rows_all or [np.zeros(0, int)]),
        "measured": y,
        "predicted": p,
    }


def score_all(data: TargetData, tp: TrainParams) -> dict[str, Any]:
    """results[quantity][algorithm][feature_set][split] for every quantity the data holds."""
    results: dict[str, Any] = {}
    for quantity in QUANTITIES:
        if _ok(data, quantity).sum() < 8:
            continue  # no power measured (a time-only campaign): no power model
        for alg in ALGORITHMS:
            for fs in FEATURE_SETS:
                if fs not in QUANTITY_FEATURE_SETS.get(quantity, FEATURE_SETS):
                    continue
                for split in SPLITS:
                    res = cross_validate(data, alg, fs, quantity, split, tp)
                    results.setdefault(quantity, {}).setdefault(alg, {}).setdefault(fs, {})[split] = res
    return results


def _or_inf(x: float) -> float:
    return x if math.isfinite(x) else math.inf


def choose(results: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """(algorithm, feature set) per quantity: the best on the grouped split."""
    out = {}
    for quantity, by_alg in results.items():
        crit = CHOOSE_ON[quantity]
        out[quantity] = min(
            ((a, f) for a in by_alg for f in by_alg[a]),
            key=lambda af: _or_inf(by_alg[af[0]][af[1]]["grouped"][crit]),
        )
    return out


def final_model(data: TargetData, alg: str, fs: str, quantity: str, tp: TrainParams) -> QuantityModel:
    """The chosen combination refitted on every row, compiled to arrays (checked against the library)."""
    f = fit_model(data, alg, fs, quantity, np.arange(data.n), tp)
    compiled = compile_ensemble(f.model, data.X[fs][f.rows])
    return QuantityModel(f"{alg}-{fs}", compiled, f.encoding(data), transform_of(quantity, fs))


BUNDLE_CODE_ENTRY = "opcost.stages.train"  # a bundle is this stage's output: its code is the stage's closure


def bundle_hash(version: str, params: TrainParams, target: str) -> str:
    """The registry identity of a bundle: its data version, the training parameters that shape it (not the
    list of all targets: adding a target leaves the others' bundles as they are), its target, and every
    source file of the train stage's import closure (opcost.closure: the same files DVC reruns it on)."""
    from opcost.closure import code_hash

    shaping = {k: v for k, v in dataclasses.asdict(params).items() if k != "targets"}
    text = json.dumps({"data": version, "params": shaping, "target": target}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode() + code_hash([BUNDLE_CODE_ENTRY]).encode()).hexdigest()[:16]


def finite(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)
