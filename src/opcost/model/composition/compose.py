"""The composition layer: from the costs of a network's ops to the network's time and energy.

Isolated op measurements each carry a call's launch cost, ops no model covers still take time, and a
training step adds a loss and an optimizer step that no op measurement holds. Per device config and mode,
fitted on its measured networks by non-negative least squares on relative error:

    time   = a * S + m * S_m + l * S_l2 + b * N x floor + o * P + c
    energy = min(a_e * S_e + k * time, cap * time)

S: calls x (t - floor)+ summed over every op; S_m: the same over the ops that are not matrix products; S_l2:
those weighted by the share of their input that fits in L2; N: calls; P: parameter bytes / bandwidth (training);
S_e: S weighted by op power; cap: the power the limiter held (powerlimit.py). Too few measured networks: the
layer is uncalibrated, or transferred from the calibrated configs of its mode. Per-family terms and
multiplicative 90 % intervals (intervals.py) complete the answer. Why each term, its figures and the
commands: docs/composition.md; intervals: docs/intervals.md; energy and constant power: docs/power.md.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Literal, Sequence

import numpy as np

from opcost.devices import DeviceConfig
from opcost.model.basis.features import OpRecord
from opcost.model.basis.nnls import nnls_relative
from opcost.model.basis.physics import NOMINAL_BANDWIDTH
from opcost.model.clocks.powerlimit import capped_energy, fit_energy
from opcost.model.composition.intervals import (
    INTERVAL_LEVEL,
    UNCALIBRATED_HALF_WIDTH,
    LogInterval,
    log_errors,
    log_interval,
    question_covariate,
)
from opcost.ops.kinds import facts as kind_facts

TIME_TERMS = ("sum", "memory_sum", "l2_sum", "calls_floor", "params_bw", "const")
ENERGY_TERMS = ("energy_sum", "time")
TRANSFERRED = "transferred"  # a layer carried from calibrated configs of the same mode (`transfer`)
POWER_RATIO = "power_ratio"  # energy_coef key: network power over its ops' time-weighted power (`power_ratio`)
MIN_NETWORKS = 4
DEFAULT_TIME = {"sum": 1.0, "memory_sum": 0.0, "l2_sum": 0.0, "calls_floor": 0.0, "params_bw": 0.0, "const": 0.0}
DEFAULT_ENERGY = {"energy_sum": 1.0, "time": 0.0}
EXTRAPOLATION_WIDENING = 2.0  # interval half-widths (in log space) doubled when extrapolating


@dataclass
class Costs:
    """Per-op cost of one call, for a list of records."""

    t_s: np.ndarray
    p_w: np.ndarray  # NaN where the device has no power model
    source: list[str]
    proxy: list[str | None]

    def mask(self, *sources: str) -> np.ndarray:
        return np.array([s in sources for s in self.source], bool)


LEGACY_TRANSFER_WIDENING = 1.5  # read only: transferred bundles written before the widening was measured
NEW_FAMILY_RULE = (
    "time and energy x exp(term) for a network of a family listed here (log of its measured siblings' "
    "measured / composed, summed, / (n + 1)); a family not listed (a new family) gets no term"
)
SOURCES = ("calibrated", "transferred", "uncalibrated")
ANY_FAMILY = "*"  # interval() asked without a family: every model-split score (the pooled rule)
SCORE_SETS = {  # which scores an interval rests on (docs/intervals.md), as a note names them
    "known": "model-left-out scores of networks whose family had measured siblings",
    "new": "family-left-out scores",
    "pooled": "model-left-out scores",
}
Question = Literal["pooled", "known", "new"]  # which question a score set answers (docs/intervals.md)
Quantity = Literal["time", "energy"]
QUESTIONS: tuple[Question, ...] = ("pooled", "known", "new")
QUANTITIES: tuple[Quantity, ...] = ("time", "energy")
# bundle.json's names of each score set's list (its key in `residual_groups` and `residual_covariates` too)
_JSON_NAME: dict[tuple[Question, Quantity], str] = {
    ("pooled", "time"): "residuals_t",
    ("pooled", "energy"): "residuals_e",
    ("known", "time"): "residuals_known_t",
    ("known", "energy"): "residuals_known_e",
    ("new", "time"): "residuals_new_t",
    ("new", "energy"): "residuals_new_e",
}


@dataclass(frozen=True)
class ScoreSet:
    """The held-out relative errors (predicted / measured - 1) one kind of interval rests on, with what was
    recorded beside them: each score's group label (what was held out together, the unit `conformal_q`
    counts) and covariate (log(predicted / plain sum of op costs), model/composition/intervals.py's scale).
    None: none recorded. Labels or covariates that do not match the scores one to one are kept as written
    (a bundle reads back as it was) but never used (`labels`, `matched_covariates`)."""

    scores: list[float] = field(default_factory=list)
    groups: list[str] | None = None
    covariates: list[float] | None = None

    def labels(self) -> list[str] | None:
        """The group labels, or None (every score its own group)."""
        return _labels(self.groups, len(self.scores))

    def matched_covariates(self) -> list[float] | None:
        """The covariates, or None (the plain, unnormalised rule)."""
        cov = self.covariates
        return [float(x) for x in cov] if cov is not None and len(cov) == len(self.scores) else None


NO_SCORES = ScoreSet()


def quantity(which: str) -> Quantity:
    """`which` as a Quantity; anything else is a caller's error, not energy."""
    if which == "time":
        return "time"
    if which == "energy":
        return "energy"
    raise ValueError(f"quantity {which!r} is not one of {', '.join(QUANTITIES)}")


def network_terms(costs: Costs, calls: np.ndarray, records: Sequence[OpRecord], floor_s: float,
                  device: DeviceConfig | None, mode: str) -> dict[str, float]:  # fmt: skip
    """The composition terms of one network from its ops' costs and call counts on `device`, resolved by the
    caller (None: a device the table lacks, a CPU host: nominal bandwidth, no L2)."""
    calls = np.asarray(calls, float)
    excess = np.clip(costs.t_s - floor_s, 0.0, None)
    p = np.nan_to_num(costs.p_w, nan=0.0)
    bw = device.device.bandwidth if device is not None else NOMINAL_BANDWIDTH
    l2_bytes = device.device.l2_bytes if device is not None else 0.0
    param_bytes = sum(c * r.metrics["params"] * 4 for c, r in zip(calls, records))
    memory = np.array([not kind_facts(r.kind).matmul for r in records], bool)
    return {
        "sum": float((calls * excess).sum()),
        "memory_sum": float((calls * excess)[memory].sum()),
        "l2_sum": float((calls * excess * l2_share(records, l2_bytes))[memory].sum()),
        "calls_floor": float(calls.sum() * floor_s),
        "params_bw": float(param_bytes / bw) if mode == "training" else 0.0,
        "const": 1.0,
        "energy_sum": float((calls * excess * p).sum()),
        "raw_sum_s": float((calls * costs.t_s).sum()),
        "raw_sum_j": float((calls * costs.t_s * p).sum()),
    }


def l2_share(records: Sequence[OpRecord], l2_bytes: float) -> np.ndarray:
    """Per op, the share of its input that fits in an L2 of `l2_bytes`: min(1, L2 / bytes read); an op that
    reads nothing fits; no L2 known (0): none."""
    read = np.array([float(r.metrics.get("bytes_read", 0.0)) for r in records], float)
    if not l2_bytes > 0:
        return np.zeros(len(records))
    share: np.ndarray = np.minimum(1.0, l2_bytes / np.maximum(read, 1.0))
    return share


@dataclass
class Composition:
    mode: str
    time_coef: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_TIME))
    energy_coef: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_ENERGY))
    calibrated: bool = False
    n_networks: int = 0
    source: str = ""  # calibrated / transferred / uncalibrated ("" : from `calibrated`)
    transferred_from: list[str] = field(default_factory=list)  # targets a transferred layer came from
    # family -> {"time": f_t, "energy": f_e, "n": siblings}: log-scale terms (docs/composition.md, per-family term)
    family_terms: dict[str, dict[str, float]] = field(default_factory=dict)
    # a transferred layer: factor on q per quantity ("time", "energy"; 1.0 where the scores are themselves
    # leave-one-config-out) and where that came from (docs/intervals.md, `transfer_calibrated`)
    transfer_widening: dict[str, float] = field(default_factory=dict)
    transfer_evidence: str = ""
    # the power the device's limiter held (model/clocks/powerlimit.py): energy never above cap x time; 0 (older
    # bundles, a device with no known limit): no cap
    power_cap_w: float = 0.0
    # The out-of-sample scores by the question they answer (docs/intervals.md) and quantity: "pooled" (model
    # split, every network), "known" (model split, the family had siblings in its fold), "new" (family split).
    # Absent: none (a known or new question then rests on the pooled set).
    scores: dict[tuple[Question, Quantity], ScoreSet] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.source:
            self.source = "calibrated" if self.calibrated else "uncalibrated"

    def time(self, terms: dict[str, float], family: str | None = None) -> float:
        base = float(sum(self.time_coef.get(k, 0.0) * terms.get(k, 0.0) for k in TIME_TERMS))
        return base * float(np.exp(self.family_term(family, "time")))

    def energy(self, terms: dict[str, float], time_s: float, family: str | None = None) -> float:
        """Energy from the op energies and the time; `time_s` is the time without a family term. The constant
        power k is static: the same at any core clock (docs/power.md)."""
        k = self.energy_coef["time"]
        if self.source == TRANSFERRED and terms.get("raw_sum_s", 0.0) > 0 and "raw_sum_j" in terms:  # docs/power.md
            k = self.energy_coef.get(POWER_RATIO, 1.0) * terms["raw_sum_j"] / terms["raw_sum_s"]
            base = float(capped_energy(0.0, k, 0.0, time_s, self.power_cap_w))
            return base * float(np.exp(self.family_term(family, "energy")))
        base = float(capped_energy(self.energy_coef["energy_sum"], k, terms["energy_sum"], time_s, self.power_cap_w))
        return base * float(np.exp(self.family_term(family, "energy")))

    def family_term(self, family: str | None, which: str = "time") -> float:
        """log-scale per-family term; 0 for a family without measured siblings (a new family)."""
        if family is None or family not in self.family_terms:
            return 0.0
        return float(self.family_terms[family].get(which, 0.0))

    def note(self, target: str, family: str | None) -> str:
        """What a prediction should say about this layer: transferred / uncalibrated, and the family
        term (or that a new family gets none)."""
        parts = []
        if self.source == TRANSFERRED:
            parts.append(
                f"the {target} composition layer is transferred from {', '.join(self.transferred_from)} (no measured "
                f"networks on this config): their time coefficients and constant time in launch floors of this "
                f"device; energy: that time x the network's time-weighted op power on this device (at most its "
                f"power limit); interval: {self.transfer_evidence or 'not validated'} "
                f"({self._log_interval('time', family).note(INTERVAL_LEVEL)})"
            )
        elif not self.calibrated:
            parts.append(
                f"the {target} composition layer is uncalibrated (no measured networks): the floor-corrected "
                f"sum of op costs, interval +-{UNCALIBRATED_HALF_WIDTH:.0%}"
            )
        elif family is not None and family in self.family_terms:
            f = self.family_terms[family]
            parts.append(
                f"family term for {family} from {int(f.get('n', 0))} measured sibling network(s): time "
                f"x{np.exp(f['time']):.3f}"
            )
        elif family is not None and self.family_terms:
            parts.append(f"no measured network of family {family}: no family term (a new family)")
        elif self.family_terms:  # a user's own file or module: no family can be read from its name
            parts.append("unknown family: no family term")
        if self.calibrated and (self.score_set("known", "time").scores or self.score_set("new", "time").scores):
            parts.append(self.interval_note(family))
        return "; ".join(parts)

    def interval_note(self, family: str | None) -> str:
        """Which scores the 90 % time interval rests on, how many, and which rule (model/composition/intervals.py) made
        it."""
        kind, _ = self.scores_for("time", family)
        iv = self._log_interval("time", family)
        groups = self.groups_for("time", family)
        of = f" of {iv.groups} held-out groups, each weighing 1" if groups is not None else ""
        return f"90 % interval from {iv.n} {SCORE_SETS[kind]}{of} ({iv.note(INTERVAL_LEVEL)})"

    def score_set(self, question: Question, which: Quantity) -> ScoreSet:
        """The scores recorded for `question` and quantity `which` (empty where none were)."""
        return self.scores.get((question, which), NO_SCORES)

    def question(self, which: str, family: str | None) -> Question:
        """The question an interval for a network of `family` answers: "known" for a family with a term,
        "new" for any other family (None: a family nobody named), "pooled" where that set is empty or no
        family was asked (ANY_FAMILY)."""
        q = quantity(which)
        if family != ANY_FAMILY:
            if family is not None and family in self.family_terms:
                if self.score_set("known", q).scores:
                    return "known"
            elif self.family_terms:
                if self.score_set("new", q).scores:
                    return "new"
        return "pooled"

    def scores_for(self, which: str = "time", family: str | None = ANY_FAMILY) -> tuple[Question, list[float]]:
        """(question, relative errors) an interval for a network of `family` rests on (`question`)."""
        kind = self.question(which, family)
        return kind, self.score_set(kind, quantity(which)).scores

    def groups_for(self, which: str = "time", family: str | None = ANY_FAMILY) -> list[str] | None:
        """The group labels of `scores_for`'s scores (None: none recorded, every score its own group)."""
        return self.score_set(self.question(which, family), quantity(which)).labels()

    def covariates_for(self, which: str = "time", family: str | None = ANY_FAMILY) -> list[float] | None:
        """The covariates of `scores_for`'s scores (None: none recorded: the unnormalised rule)."""
        return self.score_set(self.question(which, family), quantity(which)).matched_covariates()

    def _log_interval(self, which: str, family: str | None, covariate: float = 0.0) -> LogInterval:
        """The interval of the scores that match the question, before any widening (model/composition/intervals.py),
        scaled to the question's covariate where the scores carry covariates."""
        _, res = self.scores_for(which, family)
        groups = self.groups_for(which, family)
        cov = self.covariates_for(which, family)
        iv = _interval_of(tuple(res), None if groups is None else tuple(groups), None if cov is None else tuple(cov))
        return iv.scaled(covariate if np.isfinite(covariate) else 0.0)

    def covariate_warning(self, family: str | None, covariate: float, summed_s: float, target: str) -> str | None:
        """A warning where a question's covariate (log(predicted / plain sum of op costs)) lies beyond every
        measured network's that its time interval rests on: its answer rests on the layer's overhead terms
        (constant time, launch floors) more than any network they were fitted on, the scale model is held at
        its edge (model/composition/intervals.py) and the question is an extrapolation (widened like one). None
        inside."""
        iv = self._log_interval("time", family)
        if not iv.outside(covariate):
            return None
        return (
            f"the {target} composition layer's answer is {np.exp(covariate):.3g}x the plain sum of op costs "
            f"({summed_s * 1e3:.4g} ms; c = log of that ratio = {covariate:.2f}), beyond its measured networks "
            f"(|c| <= {iv.span:.2f}): the interval's spread is taken at |c| = {iv.span:.2f} and widened as an "
            f"extrapolation"
        )

    def log_interval(
        self, which: str = "time", extrapolating: bool = False, family: str | None = ANY_FAMILY,
        covariate: float = 0.0,
    ) -> LogInterval:  # fmt: skip
        """Bounds on log(measured / predicted) (docs/intervals.md; the rule: model/composition/intervals.py), scaled to
        the question's `covariate` (log(predicted / plain sum of op costs); 0: the scale of a network the composition
        layer did not move), the half-width widened about its centre for a transferred layer (its measured
        `transfer_widening`) and when extrapolating."""
        iv = self._log_interval(which, family, covariate)
        if self.source == "transferred":
            iv = iv.widened(self.transfer_widening.get(which, 1.0))
        if extrapolating:
            iv = iv.widened(EXTRAPOLATION_WIDENING)
        return iv

    def half_width(self, which: str = "time", extrapolating: bool = False, family: str | None = ANY_FAMILY) -> float:
        """Half the log width of `log_interval`: q of predicted x exp(+-q) where the interval is symmetric."""
        return self.log_interval(which, extrapolating, family).half_width

    def interval(
        self, value: float, which: str = "time", extrapolating: bool = False, family: str | None = ANY_FAMILY,
        covariate: float = 0.0,
    ) -> tuple[float, float]:  # fmt: skip
        """90 % interval of the measured value given the predicted one: value x [exp(lo), exp(hi)], from the
        held-out errors that match `family`'s question (docs/intervals.md) by model/composition/intervals.py's rule,
        scaled to the question's `covariate` (`log_interval`); asymmetric where that rule centres on the errors'
        mean."""
        return self.log_interval(which, extrapolating, family, covariate).bounds(value)

    def to_json(self) -> dict[str, Any]:
        """The layer as bundle.json holds it: each score set under its list's name (`_JSON_NAME`, every one
        written, empty where none), its labels and covariates under that name in `residual_groups` and
        `residual_covariates` where recorded."""
        sets = {name: self.score_set(*key) for key, name in _JSON_NAME.items()}
        return {
            "mode": self.mode,
            "time_coef": self.time_coef,
            "energy_coef": self.energy_coef,
            "calibrated": self.calibrated,
            "n_networks": self.n_networks,
            **{name: s.scores for name, s in sets.items()},
            "source": self.source,
            "transferred_from": self.transferred_from,
            "family_terms": self.family_terms,
            "family_terms_rule": NEW_FAMILY_RULE,
            "transfer_widening": self.transfer_widening,
            "transfer_evidence": self.transfer_evidence,
            "residual_groups": {name: s.groups for name, s in sets.items() if s.groups is not None},
            "residual_covariates": {name: s.covariates for name, s in sets.items() if s.covariates is not None},
            "power_cap_w": self.power_cap_w,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Composition":
        tc = {k: float(d["time_coef"].get(k, 0.0)) for k in TIME_TERMS}  # older bundles: no memory_sum (0)
        ec = {k: float(d["energy_coef"][k]) for k in ENERGY_TERMS}
        if POWER_RATIO in d["energy_coef"]:  # older bundles: none (a transferred layer then takes 1)
            ec[POWER_RATIO] = float(d["energy_coef"][POWER_RATIO])
        legacy = d.get("source") == "transferred" and "transfer_widening" not in d
        widening = d.get("transfer_widening", {})
        if legacy:
            widening = dict.fromkeys(("time", "energy"), LEGACY_TRANSFER_WIDENING)
        comp = cls(
            str(d["mode"]),
            tc,
            ec,
            bool(d["calibrated"]),
            int(d["n_networks"]),
            source=str(d.get("source", "")),
            transferred_from=[str(x) for x in d.get("transferred_from", [])],
            family_terms={str(f): {k: float(v) for k, v in t.items()} for f, t in d.get("family_terms", {}).items()},
            scores=_score_sets(d),
        )
        comp.transfer_widening = {str(q): float(v) for q, v in widening.items()}
        comp.transfer_evidence = (
            f"the sources' held-out errors x{LEGACY_TRANSFER_WIDENING} (an older bundle)"
            if legacy
            else str(d.get("transfer_evidence", ""))
        )
        comp.power_cap_w = float(d.get("power_cap_w", 0.0))  # older bundles: no cap, as they were fitted
        return comp


@functools.lru_cache(maxsize=256)
def _interval_of(
    res: tuple[float, ...], groups: tuple[str, ...] | None, covariates: tuple[float, ...] | None = None
) -> LogInterval:
    """`log_interval` of relative errors, memoised on their values: a prediction asks for the same few
    intervals (time and energy, its note and its bounds) of the same scores, and the rule's group means and t
    quantile were a quarter of a warm predict_many (bench/predictor_latency.py). Keyed on the values, not on
    the Composition, whose score sets are filled after construction (netval.attach_scores). With covariates: the
    normalised interval, which each question scales to its own covariate (cheap, outside the cache)."""
    return log_interval(log_errors(res), groups=groups, covariates=covariates)


def _score_sets(d: dict[str, Any]) -> dict[tuple[Question, Quantity], ScoreSet]:
    """The score sets of a composition's JSON (`Composition.to_json`): the pooled ones always there; an older
    bundle may lack the known and new scores, the labels or the covariates (none: the rules it was written
    with). A set with nothing recorded is left out, as a layer built in memory leaves it."""
    groups, covs = d.get("residual_groups", {}), d.get("residual_covariates", {})
    out: dict[tuple[Question, Quantity], ScoreSet] = {}
    for key, name in _JSON_NAME.items():
        got = ScoreSet(
            [float(x) for x in (d[name] if key[0] == "pooled" else d.get(name, []))],
            None if name not in groups else [str(x) for x in groups[name]],
            None if name not in covs else [float(x) for x in covs[name]],
        )
        if got != NO_SCORES:
            out[key] = got
    return out


def power_limit_w(device: DeviceConfig | None) -> float:
    """The nominal power limit (TDP) of a resolved device; 0 where the device table lacks it (None)."""
    return float(device.device.tdp_w) if device is not None else 0.0


def fit(
    mode: str, terms: list[dict[str, float]], time_s: np.ndarray, energy_j: np.ndarray | None,
    limit_w: float = 0.0,
) -> Composition:  # fmt: skip
    """The composition layer of one device config and mode from its measured networks; `limit_w` the
    device's nominal power limit (`power_limit_w`; 0: none known, no cap), for the energy layer's cap
    (model/clocks/powerlimit.py)."""
    comp = Composition(mode, n_networks=len(terms))
    if len(terms) < MIN_NETWORKS:
        return comp
    # three classes of excess as non-negative columns: matrix products (S - S_m), the rest where their input
    # does not fit in L2 (S_m - S_l2) and where it does (S_l2); stored as a on S, m = (share of the rest,
    # not in L2) - a on S_m and l = (share in L2) - (share not in L2) on S_l2 (docs/composition.md)
    names = [k for k in TIME_TERMS if not (k == "params_bw" and mode == "inference")]
    cols = {k: np.array([t.get(k, 0.0) for t in terms], float) for k in names}
    cols["sum"] = cols["sum"] - cols["memory_sum"]
    cols["memory_sum"] = cols["memory_sum"] - cols["l2_sum"]
    A = np.array([cols[k] for k in names]).T
    x = dict(zip(names, map(float, nnls_relative(A, np.asarray(time_s, float)))))
    # a class no network has says nothing of its share: it takes its neighbour's (in L2 <-> not, then the
    # matrix products'), so a difference never stands for a class that was never fitted
    seen = {k: bool(np.any(cols[k] > 0)) for k in ("memory_sum", "l2_sum")}
    if not seen["memory_sum"]:
        x["memory_sum"] = x["l2_sum"] if seen["l2_sum"] else x["sum"]
    if not seen["l2_sum"]:
        x["l2_sum"] = x["memory_sum"]
    x["l2_sum"] -= x["memory_sum"]
    x["memory_sum"] -= x["sum"]
    comp.time_coef = {k: 0.0 for k in TIME_TERMS} | x
    comp.calibrated, comp.source = True, "calibrated"
    if energy_j is not None and np.isfinite(energy_j).all():
        s_e = np.array([t["energy_sum"] for t in terms])
        a_e, k, comp.power_cap_w = fit_energy(s_e, np.asarray(time_s, float), np.asarray(energy_j, float), limit_w)
        comp.energy_coef = dict(zip(ENERGY_TERMS, (a_e, k)))
        ratio = power_ratio(terms, np.asarray(time_s, float), np.asarray(energy_j, float))
        if ratio is not None:
            comp.energy_coef[POWER_RATIO] = ratio
    return comp


def power_ratio(terms: Sequence[dict[str, float]], time_s: np.ndarray, energy_j: np.ndarray) -> float | None:
    """The median ratio of a network's measured average power (energy / time) to the time-weighted power of its
    ops (raw_sum_j / raw_sum_s): dimensionless, so it carries to a config without measured networks
    (`Composition.energy` of a transferred layer). None where the terms hold no op powers."""
    pb = np.array([t.get("raw_sum_j", np.nan) / t["raw_sum_s"] if t.get("raw_sum_s", 0) > 0 else np.nan for t in terms])
    pb[~(pb > 0)] = np.nan  # no op power (a bundle without a power model): no ratio, not a division by zero
    r = np.asarray(energy_j, float) / (np.asarray(time_s, float) * pb)
    r = r[np.isfinite(r) & (r > 0)]
    return float(np.exp(np.median(np.log(r)))) if len(r) else None


def fit_family_terms(
    comp: Composition, terms: list[dict[str, float]], families: Sequence[str], time_s: np.ndarray,
    energy_j: np.ndarray | None,
) -> dict[str, dict[str, float]]:  # fmt: skip
    """Per-family log terms from the networks the layer was fitted on (their in-fold residuals):
    sum of log(measured / composed) over a family's n networks / (n + 1). A family needs at least
    one network here to get a term; a network predicted later gets it only if it is not that network
    (in cross-validation the held-out ones are never among `terms`)."""
    out: dict[str, dict[str, float]] = {}
    fams = np.asarray(list(families), dtype=object)
    t_pred = np.array([comp.time(t) for t in terms])
    lt = np.log(np.asarray(time_s, float) / t_pred)
    le = None
    if energy_j is not None and np.isfinite(energy_j).all():
        e_pred = np.array([comp.energy(t, tp) for t, tp in zip(terms, t_pred)])
        le = np.log(np.asarray(energy_j, float) / e_pred)
    for f in sorted(set(fams)):
        m = fams == f
        n = int(m.sum())
        out[str(f)] = {"time": float(lt[m].sum() / (n + 1)), "n": float(n)}
        if le is not None:
            out[str(f)]["energy"] = float(le[m].sum() / (n + 1))
    return out


def transfer(
    sources: Sequence[tuple[str, Composition, float, float]], mode: str, floor_s: float, power_w: float,
    cap_w: float = 0.0,
) -> Composition:  # fmt: skip
    """A composition for a config without measured networks from calibrated ones of the same mode
    (target name, composition, its floor [s], its median op power [W]): dimensionless coefficients
    averaged; the constant time in floors and the constant power in median op powers (kept, unused: a
    transferred layer's energy is its time x the op powers, `Composition.energy`), converted with
    this config's floor and power, capped at `cap_w` (this device's power limit; 0: none). The sources'
    held-out residuals (pooled) become this layer's, with no
    widening: `transfer_calibrated` puts the held-out evidence of transfer on them."""
    cal = [(n, c, f, p) for n, c, f, p in sources if c.calibrated and c.mode == mode]
    if not cal:
        return Composition(mode)
    tc = {k: float(np.mean([c.time_coef.get(k, 0.0) for _, c, _, _ in cal])) for k in TIME_TERMS}
    tc["const"] = float(np.mean([c.time_coef["const"] / f for _, c, f, _ in cal])) * floor_s
    ec = {"energy_sum": float(np.mean([c.energy_coef["energy_sum"] for _, c, _, _ in cal]))}
    ratios = [c.energy_coef[POWER_RATIO] for _, c, _, _ in cal if c.energy_coef.get(POWER_RATIO, 0) > 0]
    if ratios:  # geometric mean: a ratio
        ec[POWER_RATIO] = float(np.exp(np.mean(np.log(ratios))))
    ok_p = [(c, p) for _, c, _, p in cal if np.isfinite(p) and p > 0]
    ec["time"] = float(np.mean([c.energy_coef["time"] / p for c, p in ok_p])) * power_w if ok_p and np.isfinite(
        power_w) else 0.0  # fmt: skip
    pooled = {
        q: ScoreSet(
            [r for _, c, _, _ in cal for r in c.score_set("pooled", q).scores],
            _pooled_groups([(n, c) for n, c, _, _ in cal], q),
            _pooled_covariates([c for _, c, _, _ in cal], q) or None,
        )
        for q in QUANTITIES
    }
    return Composition(
        mode, tc, ec, calibrated=False, n_networks=0, source=TRANSFERRED,
        transferred_from=[n for n, _, _, _ in cal], power_cap_w=float(cap_w),
        scores={("pooled", q): s for q, s in pooled.items()},
    )  # fmt: skip


def _pooled_covariates(sources: Sequence[Composition], which: Quantity) -> list[float] | None:
    """The covariates of sources' pooled scores of `which`, or None where any source recorded none for them
    (a partly normalised pool would mix two scales)."""
    out: list[float] = []
    for c in sources:
        cov = c.score_set("pooled", which).matched_covariates()
        if cov is None:
            return None
        out += cov
    return out


def _pooled_groups(sources: Sequence[tuple[str, Composition]], which: Quantity) -> list[str]:
    """Group labels of sources' pooled scores of `which`, each prefixed with its source (a model held out on
    two configs is two groups); a source without labels: every score its own group."""
    out: list[str] = []
    for name, c in sources:
        got = c.score_set("pooled", which)
        out += [f"{name}:{x}" for x in got.labels() or range(len(got.scores))]
    return out


def _labels(groups: "Sequence[str] | None", n: int) -> list[str] | None:
    """Group labels recorded for n scores, or None (every score its own group) where none were recorded or
    they do not match the scores one to one (a bundle whose scores and labels were written apart)."""
    return list(groups) if groups is not None and len(groups) == n else None


@dataclass
class SourceNetworks:
    """A calibrated config's composition with what leave-one-config-out needs: its measured networks'
    terms (in its own floor and power units) and measured time and energy, its floor and median op power."""

    name: str
    comp: Composition
    floor_s: float
    power_w: float
    terms: list[dict[str, float]]
    t_s: np.ndarray
    e_j: np.ndarray | None
    groups: list[str] | None = None  # each network's model (the unit held out together); None: each its own

    def labels(self) -> list[str]:
        n = len(self.terms)
        return [f"{self.name}:{x}" for x in _labels(self.groups, n) or range(n)]

    def has_energy(self) -> bool:
        return self.e_j is not None and bool(np.isfinite(self.e_j).all())

    def as_source(self) -> tuple[str, Composition, float, float]:
        return self.name, self.comp, self.floor_s, self.power_w


def leave_one_config_out(sources: Sequence[SourceNetworks], mode: str) -> tuple[list[float], list[float], list[str]]:
    """Relative errors (predicted / measured - 1; time, energy) of every calibrated config's measured networks
    predicted by the composition `transfer`red from the other calibrated configs of `mode` only, and the
    configs so held out. A config is never among the sources of its own prediction; with fewer than two
    calibrated configs there is nothing to hold out (empty lists)."""
    rt, re, held, _ = _leave_one_config_out(sources, mode)
    return rt, re, held


def _leave_one_config_out(
    sources: Sequence[SourceNetworks], mode: str
) -> tuple[list[float], list[float], list[str], dict[Quantity, list[float]]]:
    """`leave_one_config_out` and each score's covariate, log(predicted / plain sum of op costs) (model/
    intervals.py), by quantity."""
    cal = [s for s in sources if s.comp.calibrated and s.comp.mode == mode]
    rt: list[float] = []
    re: list[float] = []
    held: list[str] = []
    cov: dict[Quantity, list[float]] = {"time": [], "energy": []}
    if len(cal) < 2:
        return rt, re, held, cov
    for s in cal:
        layer = transfer(
            [o.as_source() for o in cal if o.name != s.name], mode, s.floor_s, s.power_w, s.comp.power_cap_w
        )
        t_pred = np.array([layer.time(t) for t in s.terms])
        rt += [float(x) for x in t_pred / np.asarray(s.t_s, float) - 1]
        c = [question_covariate(float(tp), t.get("raw_sum_s", 0.0)) for t, tp in zip(s.terms, t_pred)]
        cov["time"] += c
        if s.has_energy():
            e_pred = np.array([layer.energy(t, tp) for t, tp in zip(s.terms, t_pred)])
            re += [float(x) for x in e_pred / np.asarray(s.e_j, float) - 1]
            cov["energy"] += c
        held.append(s.name)
    return rt, re, held, cov


def transfer_widening(
    loco: Sequence[float], own: Sequence[float], loco_groups: Sequence[str] | None = None,
    own_groups: Sequence[str] | None = None,
) -> float:  # fmt: skip
    """Half-width of the leave-one-config-out scores' interval over that of the same configs' own held-out
    scores (model/composition/intervals.py's rule, log scale, by group where given), never below 1."""
    if not len(loco) or not len(own):
        return 1.0
    q_own = log_interval(log_errors(own), groups=own_groups).half_width
    q_loco = log_interval(log_errors(loco), groups=loco_groups).half_width
    return max(1.0, q_loco / q_own) if q_own > 0 else 1.0


def transfer_calibrated(
    sources: Sequence[SourceNetworks], mode: str, floor_s: float, power_w: float, cap_w: float = 0.0
) -> Composition:
    """`transfer` from the calibrated configs of `mode` among `sources`, its interval from held-out evidence of
    transfer (docs/intervals.md): the mode's leave-one-config-out scores where it has two or more calibrated
    configs; else its sources' own scores widened by the leave-one-config-out widening measured in the other
    modes of `sources`; else the sources' own scores, said not validated."""
    same = [s for s in sources if s.comp.calibrated and s.comp.mode == mode]
    layer = transfer([s.as_source() for s in same], mode, floor_s, power_w, cap_w)
    if not layer.transferred_from:
        return layer
    rt, re, held, cov = _leave_one_config_out(same, mode)
    if held:
        lg = _loco_groups(same, held, by_config=True)
        layer.scores = {
            ("pooled", "time"): ScoreSet(rt, lg["time"], cov["time"]),
            ("pooled", "energy"): ScoreSet(re, lg["energy"], cov["energy"]),
        }
        layer.transfer_widening = {"time": 1.0, "energy": 1.0}
        layer.transfer_evidence = (
            f"leave-one-config-out errors of {len(rt)} networks of {', '.join(held)}, each predicted by the "
            f"composition transferred from the others"
        )
        return layer
    lt, le, own_t, own_e, where = [], [], [], [], []
    groups: dict[str, list[str]] = {"lt": [], "le": [], "ot": [], "oe": []}
    for m in sorted({s.comp.mode for s in sources if s.comp.mode != mode}):
        ms = [s for s in sources if s.comp.calibrated and s.comp.mode == m]
        t, e, h = leave_one_config_out(ms, m)
        if not h:
            continue
        lt += t
        le += e
        own_t += [r for s in ms if s.name in h for r in s.comp.score_set("pooled", "time").scores]
        own_e += [r for s in ms if s.name in h for r in s.comp.score_set("pooled", "energy").scores]
        lg = _loco_groups(ms, h)
        groups["lt"] += lg["time"]
        groups["le"] += lg["energy"]
        held_comps = [(s.name, s.comp) for s in ms if s.name in h]
        groups["ot"] += _pooled_groups(held_comps, "time")
        groups["oe"] += _pooled_groups(held_comps, "energy")
        where.append(f"{m} ({', '.join(h)})")
    if not where:
        layer.transfer_widening = {"time": 1.0, "energy": 1.0}
        layer.transfer_evidence = (
            f"the held-out errors of {', '.join(layer.transferred_from)} on their own networks; not validated "
            f"for transfer: no mode has two calibrated configs to hold one out"
        )
        return layer
    layer.transfer_widening = {
        "time": transfer_widening(lt, own_t, groups["lt"], groups["ot"]),
        "energy": transfer_widening(le, own_e, groups["le"], groups["oe"]),
    }
    layer.transfer_evidence = (
        f"the held-out errors of {', '.join(layer.transferred_from)} on their own networks x"
        f"{layer.transfer_widening['time']:.2f} (time) / x{layer.transfer_widening['energy']:.2f} (energy): "
        f"{mode} has one calibrated config, none can be held out; the widening is the ratio of leave-one-config-"
        f"out to own held-out 90 % quantiles measured in {'; '.join(where)}"
    )
    return layer


def _loco_groups(
    sources: Sequence[SourceNetworks], held: Sequence[str], by_config: bool = False
) -> dict[Quantity, list[str]]:
    """Group labels of `leave_one_config_out`'s scores, in its order (energy only for configs with measured
    energy of every network): config:model per network, or with `by_config` the config alone: as the
    interval of a transferred layer, the question is a new config, and configs are what is exchangeable
    (with fewer than 19, model/composition/intervals.py's normal rule on the configs' mean errors). The widening
    compares like with like: leave-one-config-out and own scores both by model."""
    by = {s.name: s for s in sources}

    def labels(s: SourceNetworks) -> list[str]:
        return [s.name] * len(s.terms) if by_config else s.labels()

    return {
        "time": [x for h in held for x in labels(by[h])],
        "energy": [x for h in held if by[h].has_energy() for x in labels(by[h])],
    }
