"""Answers: a network's prediction as data (`NetworkPrediction`), and its assembly from per-op costs.

Why a module of its own: an own bundle's answer and a transferred one (model/prediction/xdevice_predict.py)
are the same kind of answer, with the same fields from the extraction (the inputs, the memory
footprint, the ops that could not be rebuilt); building those in one place keeps them the same.
The assembly turns per-op costs and call counts into the network's time and energy through the
composition layer (model/composition/compose.py), with its 90 % intervals (widened by the clock model's error
at a transferred clock, model/prediction/clocktransfer.py) and the notes and warnings the answer carries.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, TypedDict

import numpy as np

from opcost.model.composition.bundle import Bundle
from opcost.model.composition.compose import Composition, Costs, network_terms
from opcost.model.composition.costing import MEASURED, TRANSFERRED, OpCost, reference_clock_mhz
from opcost.model.composition.extrapolation import batch_outside, batch_range, extrapolation_warnings
from opcost.model.composition.intervals import question_covariate
from opcost.model.composition.network import Network
from opcost.ops.families import family_of
from opcost.ops.footprint import Footprint, device_fits, footprint_key, memory_summary
from opcost.ops.netspec import NetSpec, ref_kind

if TYPE_CHECKING:
    import pandas as pd

    from opcost.devices import DeviceConfig
    from opcost.model.prediction.clocktransfer import ClockTransfer

# How an answer's op costs became the network's time (`NetworkPrediction.composition`): a layer fitted on this
# config's measured networks, one transferred from other configs' layers, none fitted (the floor-corrected
# sum), or the cross-device composition (scale and host floor fitted on other GPUs' networks).
COMPOSITIONS = ("calibrated", "transferred", "uncalibrated", "cross-device")

TRAINING_NOTE = (
    "a training step: forward+backward of every op, the loss and the optimizer step through the composition "
    "layer's parameter term"
)


class FittedInfo(TypedDict):
    """What the cross-device model saw of a GPU's own ops (`fitted_info`): the answer's JSON `fitted` as is."""

    gpu: str
    ops: int | None  # None: a model saved before it counted them
    measured_by: list[str]


class MeasuredNote(TypedDict):
    """What of a transferred answer was measured on its GPU (`measured_note`): the answer's JSON `measured` as is."""

    device_config: str
    campaigns: list[str]
    ops: int
    ops_total: int
    calls_share: float
    time_share: float
    composition: str
    energy: str


@dataclass(frozen=True)
class HostSplit:
    """The host that drove a transferred step and how its time split: the host profile's name and source, the share
    of the step the GPU waits on the host, each side's busy time and the queue's time, all x the network scale;
    `reference`: the default host, not one asked for. The answer's JSON `host` is its fields, in this order."""

    name: str
    source: str
    host_bound_share: float
    host_s: float
    gpu_s: float
    queue_s: float
    reference: bool = False


class Request(NamedTuple):
    """A question: a network (a torchvision name with `input_shape`, or a NetSpec with None), on a device
    config (any spelling the device table knows), in a mode, at a core clock (None: the default clock)."""

    model: str | NetSpec
    input_shape: Any
    device: str
    mode: str
    clock_mhz: float | None = None


@dataclass
class NetworkPrediction:
    """A network's predicted time and energy with 90 % intervals, and where every op's cost came from."""

    model: str
    input_shape: tuple[int, ...]
    device_config: str
    mode: str
    clock_mhz: float | None
    time_s: float
    time_interval_s: tuple[float, float]
    energy_j: float | None
    energy_interval_j: tuple[float, float] | None
    avg_power_w: float | None
    sum_s: float  # the plain sum of op costs x calls, before the composition layer
    op_ids: list[str]
    kinds: list[str]
    calls: np.ndarray
    t_s: np.ndarray  # per call, for each op in op_ids
    e_j: np.ndarray | None
    # costing.SOURCES; a cross-device answer's costing.CROSS_DEVICE_SOURCES (model/composition/costing.py)
    sources: list[str]
    proxies: list[str | None]
    calibrated: bool  # the composition layer was fitted on this device config's measured networks
    # Which composition made `time_s` from the op costs (COMPOSITIONS): one word the note and the JSON agree on
    composition: str = ""
    # A transferred answer's host (model/crossdevice/hosts.py): name, source, host_bound_share (of the step the GPU
    # waits on the host), host_s and gpu_s (each side's busy time), reference (the default host, not one asked for)
    host: HostSplit | None = None
    note: str = ""  # how the answer was derived: every term, rule and source (`--explain`, JSON `note`)
    warnings: list[str] = field(default_factory=list)  # what the user should act on (extrapolation, trust)
    # the answer's basis in one plain sentence (what `predict` prints by default; `note` has the derivation)
    summary: str = ""
    memory: dict[str, Any] | None = None  # memory_summary of the step's footprint, fit per device
    inputs: list[str] = field(default_factory=list)  # the inputs, as --input text
    unbuildable: list[dict[str, Any]] = field(default_factory=list)  # kind, calls, reason: not costed
    # Where the clock behaviour came from (costing.CLOCK_SOURCES): "measured" (the bundle was trained on a clock
    # sweep, or the clock is the boost clock its default-clock measurements stand for), "transferred" (the
    # cross-clock model, model/clocks/clock.py), None at the default clock.
    clock_source: str | None = None
    # A transferred answer on a GPU where our campaigns measured some of its ops (model/prediction/xdevice_predict.py):
    # which, their shares and how they were composed; None otherwise (and then absent from the JSON).
    measured: MeasuredNote | None = None
    # A cross-device answer on a GPU whose own measured ops the model was trained on (costing.FITTED): the GPU,
    # how many ops, measured by whom (xdevice_predict.fitted_info); None otherwise (and then absent from the JSON).
    fitted: FittedInfo | None = None
    # The device config resolved where the question entered (the bundle's, or the transferred request's), which
    # `fits` and recommend's memory column read; None: a device the table lacks. Not part of the JSON.
    device: DeviceConfig | None = field(default=None, repr=False, compare=False)

    @property
    def fits(self) -> bool | None:
        """Whether the step fits in the predicted device's memory (None: device not in the table)."""
        if self.memory is None:
            return None
        return device_fits(
            Footprint.from_json({k: self.memory[k] for k in Footprint.__dataclass_fields__}), self.device
        )

    def operations(self) -> list[dict[str, Any]]:
        """Per-op breakdown, largest share of the op sum first."""
        rows = []
        total = float((self.t_s * self.calls).sum()) or 1.0
        for i, op in enumerate(self.op_ids):
            e = None if self.e_j is None or not np.isfinite(self.e_j[i]) else float(self.e_j[i])
            rows.append(
                {
                    "op_id": op,
                    "kind": self.kinds[i],
                    "calls": int(self.calls[i]),
                    "t_s": float(self.t_s[i]),
                    "e_j": e,
                    "source": self.sources[i],
                    "proxy": self.proxies[i],
                    "time_share": float(self.t_s[i] * self.calls[i] / total),
                }
            )
        return sorted(rows, key=lambda r: -r["time_share"])

    def coverage(self) -> dict[str, dict[str, float]]:
        """Share of calls and of the estimated time per cost source: how much is measured, predicted,
        costed from its kernels, stood in for by a proxy kind, or charged at roofline."""
        calls = self.calls.sum() or 1.0
        time = float((self.t_s * self.calls).sum()) or 1.0
        out: dict[str, dict[str, float]] = {"calls": {}, "time": {}}
        for src in dict.fromkeys(self.sources):
            m = np.array([s == src for s in self.sources])
            out["calls"][src] = float(self.calls[m].sum() / calls)
            out["time"][src] = float((self.t_s[m] * self.calls[m]).sum() / time)
        return out

    @property
    def breakdown(self) -> "pd.DataFrame":
        import pandas as pd

        cols = ["op_id", "kind", "calls", "t_s", "e_j", "source", "proxy", "time_share"]
        return pd.DataFrame(self.operations(), columns=cols)

    def composition_source(self) -> str:
        """One of COMPOSITIONS; answers built before the field existed say it from `calibrated`."""
        return self.composition or ("calibrated" if self.calibrated else "uncalibrated")

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "input_shape": list(self.input_shape),
            "device_config": self.device_config,
            "mode": self.mode,
            "clock_mhz": self.clock_mhz,
            "clock_source": self.clock_source,
            "time_s": self.time_s,
            "time_interval_s": list(self.time_interval_s),
            "energy_j": self.energy_j,
            "energy_interval_j": None if self.energy_interval_j is None else list(self.energy_interval_j),
            "avg_power_w": self.avg_power_w,
            "interval_level": 0.9,
            "sum_of_ops_s": self.sum_s,
            "composition": self.composition_source(),
            "coverage": self.coverage(),
            "unbuildable": self.unbuildable,
            "operations": self.operations(),
            "inputs": self.inputs,
            "memory": None if self.memory is None else {**self.memory, "fits_device": self.fits},
            "summary": self.summary,
            "note": self.note,
            "warnings": self.warnings,
            **({} if self.measured is None else {"measured": self.measured}),
            **({} if self.fitted is None else {"fitted": self.fitted}),
            **({} if self.host is None else {"host": asdict(self.host)}),
        }


def network_fields(spec: NetSpec, net: Network, mode: str, optimizer: str) -> dict[str, Any]:
    """The fields of an answer that come from the question and its extraction, the same for an own
    bundle's answer and a transferred one."""
    fp = net.memory.get(footprint_key(mode, optimizer))
    return {
        "model": spec.label,
        "input_shape": net.shape,
        "memory": None if fp is None else memory_summary(fp),
        "inputs": [i.text() for i in net.inputs],
        "unbuildable": net.missing,
    }


def assemble(
    spec: NetSpec,
    bundle: Bundle,
    clock: float | None,
    net: Network,
    costed: dict[str, OpCost],
    optimizer: str = "sgd",
    clocks: "ClockTransfer | None" = None,
) -> NetworkPrediction:
    """An own bundle's answer from its per-op costs (`costed`, op id -> cost of one call). `clocks` (the
    cross-clock model) is needed at a clock the bundle was not trained on: it widens the intervals."""
    ids = list(net.records)
    records = [net.records[i] for i in ids]
    calls = np.array([net.calls[i] for i in ids], float)
    t = np.array([costed[i][0] for i in ids])
    p = np.array([costed[i][1] for i in ids])
    sources = [costed[i][2] for i in ids]
    costs = Costs(t, p, sources, [costed[i][3] for i in ids])
    comp = bundle.composition or Composition(bundle.mode)
    terms = network_terms(costs, calls, records, bundle.floor_s, bundle.device, bundle.mode)
    flags = extrapolation_warnings(bundle.ranges, bundle.target, net.shape, records)
    family = question_family(spec)  # a per-family composition term where siblings were measured
    time_s = comp.time(terms, family)
    has_power = "power" in bundle.models and np.isfinite(p).all()
    # the boost clock is the default clock the bundle's measurements stand for (costing.reference_clock_mhz)
    ref = reference_clock_mhz(bundle.device)
    at_default = clock is not None and not bundle.clocks_mhz and float(clock) == ref
    clock_source = None if clock is None else (MEASURED if bundle.clocks_mhz or at_default else TRANSFERRED)
    if clock_source == TRANSFERRED and clocks is None:
        raise ValueError("an answer at a transferred clock needs the clock model (clocks=)")
    # the constant power k is the board's static draw beyond the ops' own energies: the same at any core clock
    # (compose.py, "Constant power and the clock"); the ops' powers follow the clock through `costs`
    energy = comp.energy(terms, comp.time(terms), family) if has_power else None
    notes = []
    if bundle.mode == "training":
        notes.append(TRAINING_NOTE)
    if comp.note(bundle.target, family):
        notes.append(comp.note(bundle.target, family))
    if not has_power:
        notes.append("no power model for this device (time-only measurements)")
    notes.extend(net.notes)
    # scores of this question (known/new family), scaled to its covariate (model/composition/intervals.py,
    # heteroscedastic)
    c = question_covariate(time_s, terms["raw_sum_s"])
    beyond = comp.covariate_warning(family, c, terms["raw_sum_s"], bundle.target)
    if beyond:  # a scale the measured networks never reached: held at their edge, widened as an extrapolation
        flags.append(beyond)
    time_iv = comp.interval(time_s, "time", bool(flags), family, c)
    energy_iv = None if energy is None else comp.interval(energy, "energy", bool(flags), family, c)
    # A batch outside the measured ones, and nothing else, is priced into the widened interval: the one
    # sentence says so. Other extrapolations (ops larger than any measured, inputs outside the calibration
    # networks') are warnings: the widening may not cover what the models never saw.
    batch = batch_outside(bundle.ranges, net.shape)
    batch_only = batch is not None and len(flags) == 1
    warnings = [] if batch_only else flags
    if at_default:
        notes.append(
            f"at {clock:g} MHz, the {bundle.device_config}'s boost clock, which its measurements' default clock is "
            "taken as: the answer of its own models, as at the default clock (no cross-clock model)"
        )
    if clock is not None and clocks is not None and clock_source == TRANSFERRED:
        from opcost.model.prediction.clocktransfer import transfer_device, transfer_note, widen

        # the clock model's leave-one-GPU-out error widens the intervals (not claimed narrower than that)
        et, ee = clocks.errors(transfer_device(bundle.device, bundle.device_config), clock)
        time_iv = widen(time_iv, et)
        if energy_iv is not None:
            energy_iv = widen(energy_iv, ee)
        notes.append(transfer_note(et, ee, bundle.device_config))
    return NetworkPrediction(
        **network_fields(spec, net, bundle.mode, optimizer),
        device_config=bundle.device_config,
        device=bundle.device,
        mode=bundle.mode,
        clock_mhz=clock,
        time_s=time_s,
        time_interval_s=time_iv,
        energy_j=energy,
        energy_interval_j=energy_iv,
        avg_power_w=(energy / time_s) if energy is not None and time_s else None,
        sum_s=terms["raw_sum_s"],
        op_ids=ids,
        kinds=[r.kind for r in records],
        calls=calls,
        t_s=t,
        e_j=t * p if has_power else None,
        sources=sources,
        proxies=costs.proxy,
        calibrated=comp.calibrated,
        composition=comp.source,  # never empty: Composition fills it from `calibrated`
        note="; ".join(notes + (flags if batch_only else [])),
        summary=own_summary(
            bundle.device_config, comp, family, clock, clock_source, net.shape[0] if batch_only else None, batch
        ),  # fmt: skip
        # first, the model nothing vouches for (served with trust_unrecorded; it widens no interval)
        warnings=([f"{bundle.unvouched}; served as it is because of --trust-unrecorded"] if bundle.unvouched else [])
        + warnings,
        clock_source=clock_source,
    )


def question_family(spec: NetSpec) -> str | None:
    """The architecture family of the network asked about (ops/families.py), None where it cannot be
    known: a user's file or module names no family (its path or module is no architecture)."""
    return None if ref_kind(spec.model) in ("file", "import") else family_of(spec.model)


def own_summary(
    device_config: str,
    comp: Composition,
    family: str | None,
    clock: float | None,
    clock_source: str | None,
    batch: int | None = None,
    batch_seen: tuple[float, float] | None = None,
) -> str:
    """An own bundle's answer in one plain sentence: what it stands on and what its interval means.
    `batch`: the question's batch where lying outside the measured ones (`batch_seen`) widened the interval."""
    if comp.source == "transferred":
        head = (
            f"based on {device_config}'s own op measurements, composed as on {', '.join(comp.transferred_from)} "
            "(no whole network was measured on this config)"
        )
    elif not comp.calibrated:
        head = f"the plain sum of {device_config}'s measured op costs (no whole network was measured there)"
    elif family is not None and family in comp.family_terms:
        n = int(comp.family_terms[family].get("n", 0))
        head = f"based on {device_config}'s own measurements and {n} measured {family} network(s)"
    elif family is None:
        head = f"based on {device_config}'s own measurements; unknown family, so no family correction"
    else:
        head = f"based on {device_config}'s own measurements; no {family} network was measured"
    if clock is not None and clock_source == "transferred":
        head += f"; at {clock:g} MHz through the cross-clock model"
    if batch is not None and batch_seen is not None:
        head += f"; interval widened: batch {batch} lies outside the measured batch {batch_range(batch_seen)}"
    return head
