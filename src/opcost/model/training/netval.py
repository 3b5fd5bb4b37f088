"""Whole networks predicted by models that never saw them: three splits, strictest first.

- `model` (the headline): every input size of one model held out together: a network's other
  input sizes share its layers, so holding out one (model, input size) pair let the same layers in
  through the op data and the composition fit;
- `family`: every model of one architecture family held out (the question about a new family);
- `network`: one (model, input size) pair held out (the weakest split, kept for comparison).
For each held-out group: every op that only the held-out model (family) calls, at any input size, is removed
from the op models' training rows and from the measured look-up; an op that another model calls too (the same
kind, attributes and input shape: resnet18 and resnet34 share every layer at 224x224) was measured for that
model and stays, as in a project that never saw the held-out one (`held_only`; dropping it too is the strict
rule, docs/composition.md#holding-a-model-out). In the `network` split every op the held-out network calls
is removed. Op models are refitted on what remains (the chosen algorithm and features), the composition layer
and its per-family terms (model/composition/compose.py) are refitted on the other networks, and the held-out networks
are predicted from scratch. A held-out network gets a family term only from siblings left in the fold; in the family
split it never has one (what a new family gets). The relative errors are the scores behind prediction intervals
(model/composition/compose.py): those of the `model` split whose family kept a sibling in the fold (`family_known`) for
a network of a known family, those of the `family` split for a new family; `coverage` says how often intervals built
that way, each from the other groups' scores only, contained the measured value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np
import pandas as pd

from opcost.devices import find_device
from opcost.model.basis.features import Encoding, OpRecord, back_transform, record_of
from opcost.model.composition import compose, intervals
from opcost.model.composition.costing import OpCoster
from opcost.model.composition.extrapolation import extrapolation_warnings, network_ranges, op_ranges
from opcost.model.composition.intervals import covariate
from opcost.model.training.fit import TargetData, fit_model, noop_values, transform_of
from opcost.ops.families import family_of
from opcost.params.train import TrainParams

SPLIT_NETWORK, SPLIT_FAMILY, SPLIT_MODEL = "network", "family", "model"
SPLITS = (SPLIT_MODEL, SPLIT_FAMILY, SPLIT_NETWORK)  # headline first


@dataclass
class LibraryModel:
    """A fitted scikit-learn/XGBoost estimator behind the `predict(items)` of a bundle's model."""

    estimator: Any
    encoding: Encoding
    transform: str

    def predict(self, items: list[tuple[OpRecord, float | None]]) -> np.ndarray:
        y = self.estimator.predict(self.encoding.matrix(items))
        if self.transform != "log_roofline":
            return back_transform(y, self.transform)
        return back_transform(y, self.transform, *self.encoding.log_offset([r for r, _ in items]))


def charge_ratio(t: np.ndarray, roofline: np.ndarray, floor: float) -> float:
    """What a charged op costs above the floor per second of roofline time: the median of (t - floor)
    / roofline over the measured ops big enough to leave the floor (roofline >= floor), so the
    ratio describes ops of the size that get charged, not launch-bound ones; else median t / roofline."""
    big = roofline >= floor
    if big.sum() >= 3:
        return float(np.median((t[big] - floor) / roofline[big]))
    return float(np.median(t / roofline)) if len(t) else 1.0


def coster_params(data: TargetData, rows: np.ndarray) -> dict[str, Any]:
    """Floor, no-op time and power, charge ratio, median power and the measured look-up of `rows`."""
    floor, noop_t, noop_p = noop_values(data, rows)
    t, p = data.y("time")[rows], data.y("power")[rows]
    work = rows[~data.noop[rows]]
    ratio = charge_ratio(data.y("time")[work], data.roofline[work], floor)
    df = data.df.iloc[rows]
    default = df["clock_mhz"].isna() & df["power_limit_w"].isna()
    lookup = {
        str(i): (float(tt), float(pp), bool(e))
        for i, tt, pp, e in zip(
            df["op_id"][default], t[default.to_numpy()], p[default.to_numpy()], df["estimated"][default]
        )
    }
    median_p = float(np.nanmedian(p)) if np.isfinite(p).any() else float("nan")
    return {
        "floor_s": floor,
        "noop_s": noop_t,
        "noop_power_w": noop_p,
        "charge_ratio": ratio,
        "median_power_w": median_p,
        "lookup": lookup,
    }


def coster_from(data: TargetData, rows: np.ndarray, models: dict[str, Any]) -> OpCoster:
    return OpCoster(
        mode=data.mode,
        device=find_device(data.device_config),
        models=models,
        kinds=tuple(sorted(set(data.df["kind"].iloc[rows]))),
        **coster_params(data, rows),
    )


def network_records(nops: pd.DataFrame) -> dict[str, tuple[list[OpRecord], np.ndarray]]:
    """set_id -> (records of its ops, calls)."""
    cache: dict[str, OpRecord] = {}
    out = {}
    for set_id, g in nops.groupby("set_id", sort=True):
        recs = []
        for _, r in g.iterrows():
            if r["op_id"] not in cache:
                cache[r["op_id"]] = record_of(r)
            recs.append(cache[r["op_id"]])
        out[str(set_id)] = (recs, g["calls"].to_numpy(float))
    return out


def all_terms(
    coster: OpCoster, nets: dict[str, tuple[list[OpRecord], np.ndarray]], data: TargetData
) -> dict[str, dict[str, Any]]:
    out = {}
    device = coster.device  # resolved once for every network
    for set_id, (recs, calls) in nets.items():
        costs = coster.cost(recs)
        terms = compose.network_terms(costs, calls, recs, coster.floor_s, device, data.mode)
        # sorted: a set's order follows the string hash seed, and the shares become columns of DVC outputs
        shares = {s: float(calls[costs.mask(s)].sum() / calls.sum()) for s in sorted(set(costs.source))}
        out[set_id] = {**terms, "call_shares": shares}
    return out


def fit_composition(
    mode: str, terms: dict[str, dict[str, Any]], networks: pd.DataFrame, device_config: str
) -> compose.Composition:
    """The composition layer and its per-family terms fitted on `networks` (needs a `family` column
    for the terms; without one, none), its energy capped at `device_config`'s power limit."""
    t = [terms[s] for s in networks["set_id"]]
    e = networks["e_j"].to_numpy(float) if networks["e_j"].notna().all() else None
    comp = compose.fit(mode, t, networks["t_s"].to_numpy(float), e, compose.power_limit_w(find_device(device_config)))
    if comp.calibrated and "family" in networks:
        comp.family_terms = compose.fit_family_terms(comp, t, networks["family"], networks["t_s"].to_numpy(float), e)
    return comp


def held_out_groups(networks: pd.DataFrame, split: str) -> list[tuple[str, list[str]]]:
    """(name, set_ids) of what `split` holds out together, in the order `evaluate` visits them: each network,
    each model (every input size) or each family."""
    if split == SPLIT_NETWORK:
        return [(s, [s]) for s in networks["set_id"]]
    by = "model" if split == SPLIT_MODEL else "family"
    return [(str(m), list(g["set_id"])) for m, g in networks.groupby(by, sort=True)]


@dataclass
class Fold:
    """One held-out group of a split: what was held out, the op rows the fold's models learned from, and
    the coster built on them (its op models and its measured look-up know none of the held-out ops)."""

    name: str
    held: list[str]
    train_rows: np.ndarray
    coster: OpCoster
    models: dict[str, Any]


def op_callers(data: TargetData, networks: pd.DataFrame, nops: pd.DataFrame) -> list[frozenset[str]]:
    """Per op row of `data`, the models that call that op: the extracted networks of the target's mode (the
    `models` column of the target table, where it has one) and the target's measured networks (`nops`)."""
    model_of = dict(zip(networks["set_id"].astype(str), networks["model"].astype(str)))
    by_op: dict[str, set[str]] = {}
    for set_id, op_id in zip(nops["set_id"].astype(str), nops["op_id"].astype(str)):
        by_op.setdefault(op_id, set()).add(model_of.get(set_id, set_id.split(":", 1)[0]))
    listed = data.df["models"] if "models" in data.df else pd.Series([[]] * data.n)
    return [frozenset(by_op.get(str(o), set()) | {str(m) for m in ms}) for o, ms in zip(data.df["op_id"], listed)]


def held_only(callers: list[frozenset[str]], group: set[str], family: str | None = None) -> np.ndarray:
    """Op rows no model outside the held-out group calls, among those it calls: what a project that never
    saw the group would not have measured. The group: the models `group` (the model split), or with `family`
    every model of that family (opcost.ops.families), measured or only extracted. An op that another model
    also calls (the same kind, attributes and input shape) was measured for that model and stays."""

    def inside(m: str) -> bool:
        return m in group or (family is not None and family_of(m) == family)

    return np.array([bool(c) and all(inside(m) for m in c) for c in callers], bool)


def folds(
    data: TargetData, networks: pd.DataFrame, nops: pd.DataFrame, chosen: dict[str, tuple[str, str]],
    tp: TrainParams, split: str, keep_shared: bool = True,
) -> Iterator[Fold]:  # fmt: skip
    """The folds of `split`: one place for what a fold may learn from, used by `evaluate` and by
    bench/net_split.py. In the `model` and `family` splits the op models are refitted without every op row
    that only the held-out model (or family) calls, at any input size, measured as a network or only
    extracted (`held_only`); a row another model also calls stays, as it would in a project that never saw
    the held-out one. `keep_shared=False` (the strict rule, kept for comparison in bench/net_split.py) drops
    every op any held-out network calls, shared or not (in the family split also every op any network of the
    family calls); the `network` split always does. A group is skipped where fewer than 8 op rows or
    MIN_NETWORKS other networks remain."""
    op_sets = {s: set(g["op_id"]) for s, g in nops.groupby("set_id")}
    callers = op_callers(data, networks, nops)
    for name, held in held_out_groups(networks, split):
        held_ops = set().union(*(op_sets[s] for s in held))
        if split == SPLIT_NETWORK or not keep_shared:
            keep = ~data.df["op_id"].isin(held_ops).to_numpy()
            if split == SPLIT_FAMILY:
                keep &= np.array([name not in fs for fs in data.families])
        else:
            group = {m for m in networks.loc[networks["set_id"].isin(held), "model"].astype(str)}
            keep = ~held_only(callers, group, name if split == SPLIT_FAMILY else None)
        train_rows = np.flatnonzero(keep)
        if len(train_rows) < 8 or (~networks["set_id"].isin(held)).sum() < compose.MIN_NETWORKS:
            continue
        models = {}
        for q, (alg, fs) in chosen.items():
            f = fit_model(data, alg, fs, q, train_rows, tp)
            models[q] = LibraryModel(f.model, f.encoding(data), transform_of(q, fs))
        yield Fold(name, held, train_rows, coster_from(data, train_rows, models), models)


def evaluate(
    data: TargetData, networks: pd.DataFrame, nops: pd.DataFrame, chosen: dict[str, tuple[str, str]],
    tp: TrainParams, split: str,
) -> pd.DataFrame:  # fmt: skip
    """One row per measured network, predicted with it (or its family) held out."""
    recs = network_records(nops)
    target = f"{data.device_config}-{data.mode}"
    rows = []
    for fold in folds(data, networks, nops, chosen, tp, split):
        name, held, models = fold.name, fold.held, fold.models
        others = networks[~networks["set_id"].isin(held)]
        terms = all_terms(fold.coster, recs, data)
        comp = fit_composition(data.mode, terms, others, data.device_config)
        # what predictions would flag (model/composition/extrapolation.py), from this fold's op rows and networks
        ranges = {**op_ranges([data.records[i] for i in fold.train_rows]), **network_ranges(others["input_shape"])}
        for _, n in networks[networks["set_id"].isin(held)].iterrows():
            tt = terms[n["set_id"]]
            shape = tuple(int(x) for x in n["input_shape"])
            t_base = comp.time(tt)
            t_pred = comp.time(tt, n["family"])
            e_pred = comp.energy(tt, t_base, n["family"]) if pd.notna(n["e_j"]) and "power" in models else np.nan
            rows.append(
                {
                    "set_id": n["set_id"],
                    "model": n["model"],
                    "family": n["family"],
                    "split": split,
                    "held_out": name,
                    "family_term": comp.family_term(n["family"]),
                    "family_known": n["family"] in comp.family_terms,  # which scores its interval uses
                    "extrapolating": bool(extrapolation_warnings(ranges, target, shape, recs[n["set_id"]][0])),
                    "measured_t_s": n["t_s"],
                    "predicted_t_s": t_pred,
                    "summed_t_s": tt["raw_sum_s"],
                    "t_error": t_pred / n["t_s"] - 1,
                    "summed_t_error": tt["raw_sum_s"] / n["t_s"] - 1,
                    "measured_e_j": n["e_j"],
                    "predicted_e_j": e_pred,
                    "e_error": e_pred / n["e_j"] - 1 if pd.notna(n["e_j"]) else np.nan,
                    **{f"calls_{s}": v for s, v in tt["call_shares"].items()},
                }
            )
    df = pd.DataFrame(rows)
    calls = sorted(c for c in df.columns if c.startswith("calls_"))  # a source first seen in a later row
    return df[[c for c in df.columns if not c.startswith("calls_")] + calls]


def error_summary(df: pd.DataFrame) -> dict[str, Any]:
    """MAPE, median and time-weighted error of network predictions (time and energy), with counts."""
    if df.empty:
        return {"networks": 0}
    out: dict[str, Any] = {"networks": int(len(df))}
    for q, m, p in (("time", "measured_t_s", "predicted_t_s"), ("energy", "measured_e_j", "predicted_e_j")):
        d = df.dropna(subset=[m, p])
        if d.empty:
            continue
        ape = (d[p] - d[m]).abs() / d[m]
        out[q] = {
            "mape_pct": float(100 * ape.mean()),
            "mdape_pct": float(100 * ape.median()),
            "weighted_pct": float(100 * (d[p] - d[m]).abs().sum() / d[m].sum()),
            "max_pct": float(100 * ape.max()),
        }
    return out


COVARIATE = "the composition layer's correction, log(predicted time / plain sum of op costs)"


def score_covariates(net_pred: pd.DataFrame, col: str) -> dict[str, list[float]]:
    """The covariate of every score of `score_sets` (same keys, same order)."""
    if net_pred.empty:
        return {"known": [], "new": [], "pooled": []}
    d = net_pred.assign(_cov=covariate(net_pred["predicted_t_s"], net_pred["summed_t_s"]))
    return {k: [float(x) for x in v] for k, v in _score_rows(d, col, "_cov").items()}


def binomial_ci(k: int, n: int, level: float = 0.9) -> tuple[float, float]:
    """Clopper-Pearson `level` interval of a proportion from k successes in n trials, exact: the bounds solve
    P(X >= k | p_lo) = (1 - level) / 2 and P(X <= k | p_hi) = (1 - level) / 2 (bisection on the binomial
    CDF; n here is a few dozen networks)."""
    if n <= 0 or not 0 <= k <= n:
        raise ValueError(f"a binomial interval needs 0 <= k <= n, n >= 1; got k={k}, n={n}")
    tail = 0.5 * (1 - level)

    def cdf(j: int, p: float) -> float:  # P(X <= j)
        return float(sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(j + 1)))

    def solve(f: Any) -> float:  # f increasing in p on [0, 1], root of f
        lo, hi = 0.0, 1.0
        for _ in range(100):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
        return 0.5 * (lo + hi)

    p_lo = 0.0 if k == 0 else solve(lambda p: (1 - cdf(k - 1, p)) - tail)
    p_hi = 1.0 if k == n else solve(lambda p: tail - cdf(k, p))
    return p_lo, p_hi


def coverage_note(k: int, n: int, level: float = compose.INTERVAL_LEVEL) -> str:
    """What k of n held-out networks inside their intervals can say: the binomial 90 % interval of the
    coverage, and whether a well-calibrated interval could have shown this figure by chance."""
    lo, hi = binomial_ci(k, n)
    p_band = sum(math.comb(n, i) * level**i * (1 - level) ** (n - i) for i in range(n + 1) if 0.85 <= i / n <= 0.95)
    return (
        f"{k} of {n} networks covered: 90 % binomial interval of the coverage {100 * lo:.0f}-{100 * hi:.0f} %; "
        f"an exactly calibrated {level:.0%} interval lands in 85-95 % with probability {p_band:.0%} at n = {n} "
        "(networks of one model or family are not independent draws, so the real uncertainty is wider)"
    )


def score_sets(net_pred: pd.DataFrame, col: str) -> dict[str, list[float]]:
    """The relative errors (column `col`) behind prediction intervals, by the question they answer
    (model/composition/compose.py): "known" (model split, the family kept a sibling in the fold), "new" (family
    split), "pooled" (model split, all)."""
    return {k: [float(x) for x in v] for k, v in _score_rows(net_pred, col, col).items()}


def score_groups(net_pred: pd.DataFrame, col: str) -> dict[str, list[str]]:
    """The group label of every score of `score_sets` (same keys, same order): what was held out together
    (`held_out`: the model in the model split, the family in the family split), the unit the conformal
    quantile counts (intervals.conformal_q)."""
    return {k: [str(x) for x in v] for k, v in _score_rows(net_pred, col, "held_out").items()}


def _score_rows(net_pred: pd.DataFrame, col: str, take: str) -> dict[str, pd.Series]:
    """Column `take` of the rows with a score in `col`, per score set: one selection for the scores and
    their group labels, so the two always line up."""
    d = net_pred.dropna(subset=[col]) if len(net_pred) else net_pred
    if d.empty:
        return {"known": pd.Series(dtype=object), "new": pd.Series(dtype=object), "pooled": pd.Series(dtype=object)}
    model = d[d["split"] == SPLIT_MODEL]
    known = model[model["family_known"].astype(bool)] if "family_known" in model else model.iloc[:0]
    return {"known": known[take], "new": d.loc[d["split"] == SPLIT_FAMILY, take], "pooled": model[take]}


ERROR_COLUMNS: dict[compose.Quantity, str] = {"time": "t_error", "energy": "e_error"}  # net_pred's scores


def attach_scores(comp: compose.Composition, net_pred: pd.DataFrame) -> None:
    """Record on `comp` the held-out scores of `net_pred` (`evaluate`'s rows, every split) by question and
    quantity, each with its group labels and covariates: what its intervals rest on (model/composition/
    compose.py). No rows: nothing recorded."""
    if not len(net_pred):
        return
    for which, col in ERROR_COLUMNS.items():
        scores, groups, covs = score_sets(net_pred, col), score_groups(net_pred, col), score_covariates(net_pred, col)
        for question in compose.QUESTIONS:
            comp.scores[question, which] = compose.ScoreSet(scores[question], groups[question], covs[question])


def composition_scores(
    mode: str, terms: dict[str, dict[str, Any]], networks: pd.DataFrame, device_config: str, energy: bool
) -> dict[tuple[compose.Question, compose.Quantity], compose.ScoreSet]:
    """The pooled scores of the composition layer fitted on `networks` (`fit_composition`, without family
    terms), each model's networks (every input size) held out of the composition fit only: the op costs in
    `terms` stay in sample. Labelled by model, with covariates; energy only with `energy` (a power model)
    and for networks with measured energy."""
    rt: list[float] = []
    re: list[float] = []
    gt: list[str] = []
    ge: list[str] = []
    ct: list[float] = []
    ce: list[float] = []
    for model, g in networks.groupby("model", sort=True):
        others = networks[~networks["set_id"].isin(g["set_id"])].drop(columns="family", errors="ignore")
        c = fit_composition(mode, terms, others, device_config)
        for _, n in g.iterrows():
            t = c.time(terms[n["set_id"]])
            rt.append(float(t / n["t_s"] - 1))
            gt.append(str(model))
            ct.append(float(covariate(t, terms[n["set_id"]]["raw_sum_s"])))
            if pd.notna(n["e_j"]) and energy:
                re.append(float(c.energy(terms[n["set_id"]], t) / n["e_j"] - 1))
                ge.append(str(model))
                ce.append(ct[-1])
    return {("pooled", "time"): compose.ScoreSet(rt, gt, ct), ("pooled", "energy"): compose.ScoreSet(re, ge, ce)}


def interval_table(comp: compose.Composition) -> dict[str, dict[str, dict[str, Any]]]:
    """What the bundle's intervals rest on, per score set and quantity: the number of scores and of groups,
    half the log width as a % (exp(q) - 1), the full width % of the prediction, the bounds as % of it, and the
    rule (model/composition/intervals.py: conformal, or with too few groups normal or fallback)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    probe = {"known": next(iter(comp.family_terms), None), "new": None, "pooled": compose.ANY_FAMILY}
    for kind, family in probe.items():
        for q in ("time", "energy"):
            got, res = comp.scores_for(q, family)
            if got != kind or not res:
                continue
            iv = comp.log_interval(q, False, family)
            out.setdefault(kind, {})[q] = {
                "n_scores": iv.n,
                "n_groups": iv.groups,
                "half_width_pct": 100 * float(np.expm1(iv.half_width)),
                "width_pct": 100 * float(np.exp(iv.hi) - np.exp(iv.lo)),
                "low_pct": 100 * float(np.expm1(iv.lo)),
                "high_pct": 100 * float(np.expm1(iv.hi)),
                "conformal": iv.rule == intervals.RULE_CONFORMAL,
                "rule": iv.rule,
                "scale_ratio": iv.ratio,  # r of s(c) = sqrt(1 + r c^2); the figures above are at c = 0
            }
    return out


def interval_rows(
    df: pd.DataFrame, calib: pd.DataFrame | None = None, level: float = compose.INTERVAL_LEVEL,
    normalise: bool = True,
) -> pd.DataFrame:  # fmt: skip
    """Each held-out network's interval, built as `coverage` (below) builds it, one row per network and quantity:
    what it rested on (`rule`, `n_scores`, `n_groups`, `scale_ratio`), its bounds on the measured value as % off
    the prediction (`low_pct`, `high_pct`: measured in predicted x [1 + low/100, 1 + high/100]), its full width %
    of the prediction, the network's own error % (predicted / measured - 1), where its measured value lay in the
    bounds' terms (`measured_pct`: measured / predicted - 1) and whether the interval contained it. The place to
    name the networks an interval missed and see why (too narrow, or centred away from them); `coverage` is its
    summary. A network its fold's ranges flag (`extrapolating`, model/composition/extrapolation.py), or whose covariate
    lies beyond its calibration scores' (`LogInterval.outside`), gets the widening a prediction of it would get
    (compose.EXTRAPOLATION_WIDENING)."""
    cols = ["set_id", "model", "family", "split", "quantity", "rule", "n_scores", "n_groups", "scale_ratio",
            "covariate", "extrapolating", "low_pct", "high_pct", "width_pct", "error_pct", "measured_pct",
            "covered"]  # fmt: skip
    rows: list[dict[str, Any]] = []
    if df.empty:
        return pd.DataFrame(columns=cols)
    calib = df if calib is None else calib
    by_family = "family_known" in df and "family_known" in calib
    for q, col in (("time", "t_error"), ("energy", "e_error")):
        d, c = df.dropna(subset=[col]), calib.dropna(subset=[col])
        if d.empty or c.empty:
            continue
        # signed: the interval may be centred on the errors' mean (model/composition/intervals.py); -err = log(measured
        # / pred)
        errs = intervals.log_errors(d[col].to_numpy(float))
        c_errs = intervals.log_errors(c[col].to_numpy(float))
        c_held, c_model = c["held_out"].astype(str).to_numpy(), c["model"].astype(str).to_numpy()
        c_fam = c["family"].astype(str).to_numpy()
        c_split = c["split"].astype(str).to_numpy() if "split" in c else np.full(len(c), SPLIT_MODEL)
        c_known = c["family_known"].astype(bool).to_numpy() if by_family else np.ones(len(c), bool)
        hetero = normalise and {"predicted_t_s", "summed_t_s"} <= set(c.columns)
        c_cov = np.asarray(covariate(c["predicted_t_s"], c["summed_t_s"]), float) if hetero else None
        d_cov = np.asarray(covariate(d["predicted_t_s"], d["summed_t_s"]), float) if hetero else None
        # no family-split score at all: a new family's interval falls back to the pooled model-split scores,
        # as compose.Composition.scores_for does for a bundle without them
        new_set = (c_split == SPLIT_FAMILY) if (c_split == SPLIT_FAMILY).any() else (c_split == SPLIT_MODEL)
        for i, (_, row) in enumerate(d.iterrows()):
            known = bool(row["family_known"]) if by_family else True
            new = by_family and not known
            use = new_set if new else (c_split == SPLIT_MODEL) & c_known
            if not by_family and "split" not in c:
                use = np.ones(len(c), bool)
            drop = (c_held == str(row["held_out"])) | (c_model == str(row["model"]))
            if new or row.get("split") == SPLIT_FAMILY:
                drop |= c_fam == str(row["family"])
            m = use & ~drop
            cov_m = None if c_cov is None else c_cov[m]
            iv = compose.log_interval(c_errs[m], level, groups=c_held[m], covariates=cov_m)
            if iv.n == 0:
                continue
            cov_i = 0.0
            if d_cov is not None:
                cov_i = float(d_cov[i]) if np.isfinite(d_cov[i]) else 0.0
                iv = iv.scaled(cov_i)
            # beyond the covariates of its calibration scores: held at their edge, widened (model/prediction/answer.py)
            extrapolating = bool(row.get("extrapolating", False)) or iv.outside(cov_i)
            if extrapolating:  # as a prediction widens it (compose.Composition.log_interval)
                iv = iv.widened(compose.EXTRAPOLATION_WIDENING)
            rows.append(
                {
                    "set_id": str(row.get("set_id", row["model"])),
                    "model": str(row["model"]),
                    "family": str(row["family"]),
                    "split": str(row.get("split", SPLIT_MODEL)),
                    "quantity": q,
                    "rule": iv.rule,
                    "n_scores": iv.n,
                    "n_groups": iv.groups,
                    "scale_ratio": iv.ratio,
                    "covariate": cov_i,
                    "extrapolating": extrapolating,
                    "low_pct": 100 * float(np.expm1(iv.lo)),
                    "high_pct": 100 * float(np.expm1(iv.hi)),
                    "width_pct": 100 * float(np.exp(iv.hi) - np.exp(iv.lo)),
                    "error_pct": 100 * float(row[col]),
                    "measured_pct": 100 * float(np.expm1(-errs[i])),
                    "covered": iv.contains(-errs[i]),
                }
            )
    return pd.DataFrame(rows, columns=cols)


def coverage(
    df: pd.DataFrame, calib: pd.DataFrame | None = None, level: float = compose.INTERVAL_LEVEL,
    normalise: bool = True,
) -> dict[str, Any]:  # fmt: skip
    """How often the multiplicative conformal interval (model/composition/compose.py) contained the measured value.
    Each network's interval is built as predictions build it (`interval_rows`): from the scores that match its
    question (`calib`'s `model`-split rows whose family kept a sibling for a network whose own family did,
    `calib`'s `family`-split rows for one whose did not (none there: its `model`-split rows, as a bundle
    without family-split scores does); without a `family_known` column every
    `model`-split row of `calib`; `calib` default `df` itself), by the same quantile rule
    (compose.log_interval, model/composition/intervals.py: each held-out group weighing 1; conformal, or with too few
    groups for the level the normal prediction interval on the group means), leaving out every
    calibration network of the same held-out group, the same model, and for a new-family question (and
    in the family split) the same family: never a network's own or its siblings' errors. Coverage %,
    median full width % of the prediction (exp(hi) - exp(lo)), the median number of scores an interval
    rested on, how many intervals had too few groups for a conformal quantile, and of those how many took the
    normal rule and the fallback, for time and energy.

    With `normalise` and the predicted and summed times in the frames, the scores are heteroscedastic
    (model/composition/intervals.py): each normalised by the scale model fitted on that interval's own calibration
    scores, and the interval scaled by the network's own covariate (`covariate`), as predictions do. Beside each
    coverage: its binomial 90 % interval (`binomial_ci`), the coverage with each family weighing 1, how many intervals
    were normalised, under "coverage_note" what the figure can say (`coverage_note`), and under "missed" the networks
    outside their interval (set_id: where the measured value lay, % off the prediction, against the interval's bounds,
    and the prediction's own error %)."""
    out: dict[str, Any] = {}
    notes: dict[str, str] = {}
    missed: dict[str, dict[str, str]] = {}
    rows = interval_rows(df, calib, level, normalise)
    for q, r in rows.groupby("quantity", sort=False):
        covered = r["covered"].astype(bool).to_numpy()
        k, n = int(covered.sum()), len(covered)
        ci = binomial_ci(k, n)
        # each family weighing 1: the coverage a new family's network gets (a family is one draw)
        fam = pd.Series(covered, index=r["family"].to_numpy(), dtype=float).groupby(level=0).mean()
        rules = r["rule"].value_counts()
        out[str(q)] = {
            "coverage_pct": float(100 * np.mean(covered)),
            "coverage_ci_lo_pct": 100 * ci[0],
            "coverage_ci_hi_pct": 100 * ci[1],
            "family_weighted_coverage_pct": float(100 * fam.mean()),
            "n_families": int(len(fam)),
            "median_width_pct": float(np.median(r["width_pct"].to_numpy(float))),
            "n": n,
            "median_scores": float(np.median(r["n_scores"].to_numpy(float))),
            "too_few_scores": n - int(rules.get(intervals.RULE_CONFORMAL, 0)),
            "normal_rule": int(rules.get(intervals.RULE_NORMAL, 0)),
            "fallback_rule": int(rules.get(intervals.RULE_FALLBACK, 0)),
            "normalised": int((r["scale_ratio"].to_numpy(float) > 0).sum()),
            "extrapolating": int(r["extrapolating"].astype(bool).sum()),  # widened as predictions widen them
        }
        notes[str(q)] = coverage_note(k, n, level)
        out_rows = r[~r["covered"].astype(bool)]
        if len(out_rows):
            missed[str(q)] = {
                str(x["set_id"]): f"measured {x['measured_pct']:+.1f} % off the prediction, interval "
                f"[{x['low_pct']:+.1f}, {x['high_pct']:+.1f}] % (prediction error {x['error_pct']:+.1f} %)"
                for _, x in out_rows.iterrows()
            }
    if notes:
        out["coverage_note"] = notes
    if missed:
        out["missed"] = missed
    return out
