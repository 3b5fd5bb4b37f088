"""Whole-network predictions from per-operation models: time, energy, power, breakdown, coverage.

A network is extracted on meta tensors (as the extract stage does); every unique op gets a cost and
a source (measured, estimated, launch floor, predicted, decomposed into its kernels, proxy kind or
charged at roofline:
model/costing.py), and the composition layer (model/compose.py) turns the op costs and call counts
into the network's time and energy, with 90 % intervals from its out-of-sample residuals, widened
when the question extrapolates. Models come from models/<device>-<mode>/ (the DVC outputs of the
train stages), or from the MLflow registry's champion with `registry=True`.

Speed. Bundles hold tree ensembles compiled to numpy arrays, and extracted networks are cached in
.opcost/cache/networks/ (keyed by the NetSpec's key, mode, the torch and torchvision versions
and the extraction code), so a question about a network seen before imports neither torch nor
XGBoost. A `Predictor` also keeps extractions in memory, and `predict_many` costs each device's
ops once for all the networks it is asked about.

A network is any `NetSpec` (ops/netspec.py: a torchvision name, an import path or file, or a
Hugging Face config; builder arguments; typed inputs); the old (model name, input shape) form is
the same thing with one image input. Its memory footprints (ops/memory.py) are computed at
extraction, stored beside the op records, and reported on the prediction with whether the step
fits on each device of the table; `recommend` drops device configs it does not fit on.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from opcost.errors import OpcostError
from opcost.io import write_json
from opcost.model.bundle import BUNDLE_FILE, Bundle
from opcost.model.compose import Composition, network_terms
from opcost.model.costing import Costs
from opcost.model.features import OpRecord
from opcost.modes import MODES, check_mode
from opcost.ops.families import family_of
from opcost.ops.footprint import Footprint, device_fits, footprint_key, memory_summary
from opcost.ops.netspec import InputSpec, NetSpec
from opcost.paths import Paths, find_root
from opcost.shapes import parse_input_shape

if TYPE_CHECKING:
    import pandas as pd

    from opcost.model.clock import ClockModel

TRAINING_NOTE = (
    "a training step: forward+backward of every op, the loss and the optimizer step through the composition "
    "layer's parameter term"
)


@dataclass
class Network:
    """An extracted network: its unique ops as records, calls per op, and its memory footprints."""

    records: dict[str, OpRecord]
    calls: dict[str, int]
    memory: dict[str, Footprint] = field(default_factory=dict)  # footprint_key -> footprint
    inputs: tuple[InputSpec, ...] = ()  # resolved (family defaults filled in)
    missing: list[dict[str, Any]] = field(default_factory=list)  # kind, calls, reason: not rebuildable
    notes: list[str] = field(default_factory=list)

    def to_json(self, key: Any) -> dict[str, Any]:
        return {
            "key": key,
            "records": [r.to_json() for r in self.records.values()],
            "calls": self.calls,
            "memory": {k: f.to_json() for k, f in self.memory.items()},
            "inputs": [i.to_json() for i in self.inputs],
            "missing": self.missing,
            "notes": self.notes,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Network":
        return cls(
            {r["op_id"]: OpRecord.from_json(r) for r in d["records"]},
            d["calls"],
            {k: Footprint.from_json(f) for k, f in d.get("memory", {}).items()},
            tuple(InputSpec.from_json(i) for i in d.get("inputs", [])),
            d.get("missing", []),
            d.get("notes", []),
        )


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
    sources: list[str]  # measured, estimated, floor, predicted, decomposed, proxy or charged (model/costing.py)
    proxies: list[str | None]
    calibrated: bool  # the composition layer was fitted on this device config's measured networks
    note: str = ""
    warnings: list[str] = field(default_factory=list)  # extrapolation beyond the training data
    memory: dict[str, Any] | None = None  # memory_summary of the step's footprint, fit per device
    inputs: list[str] = field(default_factory=list)  # the inputs, as --input text
    unbuildable: list[dict[str, Any]] = field(default_factory=list)  # kind, calls, reason: not costed
    # Where the clock behaviour came from: "measured" (the bundle was trained on a clock sweep),
    # "transferred" (the cross-clock model, model/clock.py), None at the default clock.
    clock_source: str | None = None

    @property
    def fits(self) -> bool | None:
        """Whether the step fits in the predicted device's memory (None: device not in the table)."""
        if self.memory is None:
            return None
        return device_fits(
            Footprint.from_json({k: self.memory[k] for k in Footprint.__dataclass_fields__}), self.device_config
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
            "composition_calibrated": self.calibrated,
            "coverage": self.coverage(),
            "unbuildable": self.unbuildable,
            "operations": self.operations(),
            "inputs": self.inputs,
            "memory": None if self.memory is None else {**self.memory, "fits_device": self.fits},
            "note": self.note,
            "warnings": self.warnings,
        }


def _version(pkg: str) -> str:
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


# What `_extract_network` imports: the cache key hashes their import closure (opcost.closure).
EXTRACTION_ENTRIES = ("opcost.ops.catalog", "opcost.ops.memory", "opcost.model.features")


def _extraction_code_hash() -> str:
    from opcost.closure import code_hash

    return code_hash(EXTRACTION_ENTRIES)[:12]


def roofline_shares(records: Sequence[OpRecord], device_config: str) -> np.ndarray:
    """Each op's compute-bound share of its roofline time on the device config (model/clock.py's
    `roofline_share`, with the matmul peak for matmul-like kinds): what the clock model scales by 1/f."""
    from opcost.model.clock import roofline_share
    from opcost.model.physics import MATMUL_KINDS, device_peaks

    mm_peak, fp32_peak, bw = device_peaks(device_config)
    return np.array(
        [
            roofline_share(
                r.metrics.get("flops", 0.0),
                float(r.metrics.get("bytes_read", 0.0)) + float(r.metrics.get("bytes_written", 0.0)),
                mm_peak if r.kind in MATMUL_KINDS else fp32_peak,
                bw,
            )
            for r in records
        ],
        dtype=float,
    )


@dataclass
class Predictor:
    """Loads bundles on first use and caches extractions and features (see module docstring)."""

    paths: Paths = field(default_factory=lambda: Paths(find_root()))
    registry: bool = False
    disk_cache: bool = True
    _bundles: dict[str, Bundle] = field(default_factory=dict)
    _networks: dict[tuple, Network] = field(default_factory=dict)
    _clock_model: "ClockModel | None" = None

    # -- models ---------------------------------------------------------------------------
    def targets(self) -> list[str]:
        """Device config and mode pairs with a trained model, e.g. ['A30-inference', ...]."""
        root = self.paths.root / "models"
        return sorted(p.parent.name for p in root.glob(f"*/{BUNDLE_FILE}")) if root.is_dir() else []

    def bundle(self, device: str, mode: str) -> Bundle:
        check_mode(mode)
        from opcost.devices import table_name

        device = table_name(device)  # `NVIDIA H100 80GB HBM3`, `h100` -> `H100`: targets are named by table keys
        target = f"{device}-{mode}"
        if target in self._bundles:
            return self._bundles[target]
        if self.registry:  # the registered model carries the bundle: no local models/ needed
            from opcost.model.registry import champion_bundle

            self._bundles[target] = champion_bundle(self.paths, target)
            return self._bundles[target]
        available = self.targets()
        if not available:
            from opcost.model.registry import no_models_error

            raise no_models_error(self.paths)
        if (self.paths.model_dir(target)).is_dir() and target not in available:
            Bundle.load(self.paths.model_dir(target))  # a folder without bundle.json: names the missing file
        if target not in available:
            devices = sorted({t.rpartition("-")[0] for t in available if t.endswith(f"-{mode}")})
            raise OpcostError(
                f"no model for device {device!r} in mode {mode}; trained: {', '.join(devices) or 'none in this mode'} "
                f"(all: {', '.join(available)})"
            )
        from opcost.model.integrity import locked_md5  # content checked against dvc.lock (issue 24.3)

        folder = self.paths.model_dir(target)
        expect = locked_md5(self.paths.root, folder)
        try:
            self._bundles[target] = Bundle.load(folder, expect_md5=expect)
        except OpcostError as exc:
            if expect is None or "was modified" not in str(exc):
                raise
            # the folder differs from what dvc.lock records: tampered, or retrained outside DVC
            raise OpcostError(
                f"{exc}: if you retrained it yourself (`opcost train`), record it with `dvc commit train@{target}`; "
                f"otherwise restore the pipeline's copy with `dvc checkout {folder.relative_to(self.paths.root)}`"
            ) from None
        return self._bundles[target]

    def clock_model(self) -> "ClockModel":
        """The transferred clock model (models/clock/, stage train-clock), loaded once."""
        if self._clock_model is None:
            from opcost.model.clock import ClockModel

            self._clock_model = ClockModel.load(self.paths.clock_model_dir)
        return self._clock_model

    def clock_grid(self, device_config: str) -> list[float]:
        """The clocks `recommend` sweeps for a device config without a measured sweep: evenly over the
        device's supported range (params clock.grid_points), its boost clock included."""
        from opcost.devices import find_device
        from opcost.params.clock import ClockParams
        from opcost.params.load import load_params

        found = find_device(device_config)
        if found is None:
            return []
        n = (
            load_params(self.paths.params).clock.grid_points
            if self.paths.params.is_file()
            else ClockParams().grid_points
        )
        lo, hi = found[0].clock_range_mhz
        grid = {float(round(x)) for x in np.linspace(lo, hi, n)} | {float(found[0].boost_clock_mhz)}
        return sorted(grid)

    # -- networks -------------------------------------------------------------------------
    def _cache_file(self, key: tuple) -> Path:
        ident = json.dumps([*key, _version("torch"), _version("torchvision"), _extraction_code_hash()])
        name = hashlib.sha256(ident.encode()).hexdigest()[:20]
        return self.paths.root / ".opcost" / "cache" / "networks" / f"{name}.json"

    def network(
        self,
        model: "str | NetSpec",
        shape: tuple[int, ...] | None = None,
        dtype: str = "float32",
        mode: str = "inference",
    ) -> Network:
        """The extracted network: `network(NetSpec, mode=...)`, or the old `network(name, shape, dtype, mode)`."""
        spec = as_netspec(model, shape, dtype)
        key = (json.dumps(spec.key(), sort_keys=True), mode)
        if key in self._networks:
            return self._networks[key]
        f = self._cache_file(key) if self.disk_cache else None
        net = _read_cached(f) if f is not None and f.is_file() else None
        if net is None:
            net = _extract_network(spec, mode)
            if f is not None:
                write_json(net.to_json([spec.key(), mode]), f, digits=None)
        self._networks[key] = net
        return net

    # -- predictions ----------------------------------------------------------------------
    def predict(
        self,
        model: "str | NetSpec",
        input_shape: Any,
        device: str,
        mode: str = "inference",
        clock_mhz: float | None = None,
        dtype: str = "float32",
        optimizer: str = "sgd",
    ) -> NetworkPrediction:
        """`model` is a NetSpec (then `input_shape` is None) or a torchvision name with an image shape."""
        return self.predict_many([(model, input_shape, device, mode, clock_mhz)], dtype, optimizer)[0]

    def predict_many(
        self,
        requests: Sequence[tuple["str | NetSpec", Any, str, str, float | None]],
        dtype: str = "float32",
        optimizer: str = "sgd",
    ) -> list[NetworkPrediction]:
        """Several (model, input_shape, device, mode, clock) questions; each device's model runs once."""
        prepared = []
        transferred: dict[int, NetworkPrediction] = {}  # GPUs without own bundles (model/xdevice_predict.py)
        for k, (model, input_shape, device, mode, clock) in enumerate(requests):
            spec = as_netspec(model, input_shape, dtype)
            if mode == "training":
                footprint_key(mode, optimizer)  # an unknown optimizer fails before any work
            device, xfer = self._transfer(device, mode)
            if xfer is not None:
                from opcost.model import xdevice_predict

                cm = None
                if clock is not None:  # range first (one line naming it), then the clock model
                    from opcost.model.clock import check_device_clock

                    check_device_clock(xfer, float(clock))
                    cm = self.clock_model()
                net = self.network(spec, mode=mode)
                transferred[k] = xdevice_predict.network_prediction(
                    self.paths.xdevice_model_dir, spec, net, xfer, mode, optimizer, clock, cm
                )
                continue
            bundle = self.bundle(device, mode)
            if clock is not None:
                from opcost.model.clock import check_device_clock

                check_device_clock(bundle.device_config, float(clock))
                if not bundle.clocks_mhz:
                    self._transfer_device(bundle)  # a device the table lacks, or no clock model: refused here
                    self.clock_model()
            net = self.network(spec, mode=bundle.mode)
            prepared.append((spec, net.inputs[0].shape if net.inputs else (), bundle, clock, net, k))
        # one costing per (target, clock) over the union of the requests' ops
        costed: dict[tuple, dict[str, tuple[float, float, str, str | None]]] = {}
        groups: dict[tuple, dict[str, OpRecord]] = {}
        for _, _, bundle, clock, net, _k in prepared:
            groups.setdefault((bundle.target, clock), {}).update(net.records)
        base: dict[tuple, Costs] = {}  # costs at the reference clock, shared by every transferred clock
        for (target, clock), recs in groups.items():
            ids = sorted(recs)
            b = self._bundles[target]
            if clock is not None and not b.clocks_mhz:
                key = (target, tuple(ids))
                if key not in base:
                    base[key] = b.coster().cost([recs[i] for i in ids], None)
                costs = self._transferred(b, [recs[i] for i in ids], base[key], float(clock))
            else:
                costs = b.coster().cost([recs[i] for i in ids], clock)
            costed[(target, clock)] = {
                i: (float(t), float(p), src, px)
                for i, t, p, src, px in zip(ids, costs.t_s, costs.p_w, costs.source, costs.proxy)
            }
        own = {k: self._assemble(m, s, b, c, n, costed[(b.target, c)], optimizer) for m, s, b, c, n, k in prepared}
        return [own[k] if k in own else transferred[k] for k in range(len(requests))]

    def _transfer(self, device: str, mode: str) -> tuple[str, str | None]:
        """(device config, config to answer with the cross-device model or None). None where the device
        has its own bundle in this mode (an NVML name becomes its key) or no models/xdevice is there."""
        from opcost.model.xdevice import MODEL_FILE

        if mode not in MODES or not (self.paths.xdevice_model_dir / MODEL_FILE).is_file():
            return device, None
        from opcost.model.xdevice_predict import transfer_config

        cfg, how = transfer_config(device, mode, self.targets())
        return cfg, (cfg if how is not None else None)

    @staticmethod
    def _transfer_device(bundle: Bundle) -> Any:
        from opcost.devices import find_device

        found = find_device(bundle.device_config)
        if found is None:
            raise OpcostError(
                f"{bundle.device_config} is not in the device table (opcost/devices.py): no clock range or TDP "
                "to transfer the clock model with; leave out --clock"
            )
        return found[0]

    def _transferred(self, bundle: Bundle, records: list[OpRecord], ref: Costs, clock: float) -> Costs:
        """Per-op costs at `clock` from those at the device's boost clock (the reference the default-clock
        models stand for): each op's compute-bound share from its roofline split (model/clock.py)."""
        device = self._transfer_device(bundle)
        share = roofline_shares(records, bundle.device_config)
        t, p = self.clock_model().at_clock(device, clock, np.asarray(ref.t_s, float), np.asarray(ref.p_w, float), share)
        return Costs(t, p, list(ref.source), list(ref.proxy))

    def _assemble(
        self,
        spec: NetSpec,
        shape: tuple[int, ...],
        bundle: Bundle,
        clock: float | None,
        net: Network,
        costed: dict[str, tuple[float, float, str, str | None]],
        optimizer: str = "sgd",
    ) -> NetworkPrediction:
        ids = list(net.records)
        records = [net.records[i] for i in ids]
        calls = np.array([net.calls[i] for i in ids], float)
        t = np.array([costed[i][0] for i in ids])
        p = np.array([costed[i][1] for i in ids])
        sources = [costed[i][2] for i in ids]
        costs = Costs(t, p, sources, [costed[i][3] for i in ids])
        comp = bundle.composition or Composition(bundle.mode)
        terms = network_terms(costs, calls, records, bundle.floor_s, bundle.device_config, bundle.mode)
        warnings = extrapolation_warnings(bundle, shape, records)
        family = family_of(spec.model)  # a per-family composition term where siblings were measured
        time_s = comp.time(terms, family)
        has_power = "power" in bundle.models and np.isfinite(p).all()
        energy = comp.energy(terms, comp.time(terms), family) if has_power else None
        notes = []
        if bundle.mode == "training":
            notes.append(TRAINING_NOTE)
        if comp.note(bundle.target, family):
            notes.append(comp.note(bundle.target, family))
        if not has_power:
            notes.append("no power model for this device (time-only measurements)")
        notes.extend(net.notes)
        fp = net.memory.get(footprint_key(bundle.mode, optimizer))
        time_iv = comp.interval(time_s, "time", extrapolating=bool(warnings))
        energy_iv = None if energy is None else comp.interval(energy, "energy", extrapolating=bool(warnings))
        clock_source = None if clock is None else ("measured" if bundle.clocks_mhz else "transferred")
        if clock_source == "transferred":
            # the clock model's leave-one-GPU-out error widens the intervals (not claimed narrower than that)
            found = self._transfer_device(bundle)
            et, ee = self.clock_model().error_at(float(clock) / found.boost_clock_mhz)
            # multiplicative both ways: a lower bound never reaches zero (issue 21, section 5)
            time_iv = (time_iv[0] / (1.0 + et), time_iv[1] * (1.0 + et))
            if energy_iv is not None:
                energy_iv = (energy_iv[0] / (1.0 + ee), energy_iv[1] * (1.0 + ee))
            notes.append(
                f"clock behaviour transferred from the cross-clock model (its leave-one-GPU-out error this far from "
                f"the reference clock, time {100 * et:.0f} %, energy {100 * ee:.0f} %, widens the intervals), "
                f"not measured on {bundle.device_config}"
            )
        return NetworkPrediction(
            model=spec.label,
            input_shape=shape,
            device_config=bundle.device_config,
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
            note="; ".join(notes),
            warnings=warnings,
            memory=None if fp is None else memory_summary(fp),
            inputs=[i.text() for i in net.inputs],
            unbuildable=net.missing,
            clock_source=clock_source,
        )

    # -- recommendations ------------------------------------------------------------------
    def sweep_clocks(self, device: str, mode: str) -> tuple[float | None, ...]:
        """The clocks `recommend` asks about for a device config: its measured sweep, else (when the
        clock model is there and the device is in the table) a grid over its supported range, else
        only the default clock."""
        from opcost.model.clock import CLOCK_MODEL_FILE

        b = self.bundle(device, mode)
        if b.clocks_mhz:
            return tuple(b.clocks_mhz)
        grid = self.clock_grid(b.device_config)
        if grid and (self.paths.clock_model_dir / CLOCK_MODEL_FILE).is_file():
            return tuple(grid)
        return (None,)

    def transferred_clocks(self, device_config: str) -> tuple[float | None, ...]:
        """The clocks `recommend` asks the cross-device model about: the same grid as for an own bundle
        without a measured sweep when the clock model is there, else only the default clock."""
        from opcost.model.clock import CLOCK_MODEL_FILE

        grid = self.clock_grid(device_config)
        return tuple(grid) if grid and (self.paths.clock_model_dir / CLOCK_MODEL_FILE).is_file() else (None,)

    def recommend(
        self,
        model: "str | NetSpec",
        input_shape: Any = None,
        mode: str = "inference",
        max_slowdown: float | None = None,
        optimizer: str = "sgd",
        devices: str | None = None,
    ) -> "pd.DataFrame":
        """Device configs (and clocks, where a model knows them) ranked by time, energy and EDP.

        Configs whose device is too small for the step's memory are dropped; `df.attrs["dropped"]`
        lists them with what the step needs and what the device has. Configs the device table does
        not know (a CPU host) are kept with `fits_memory` empty. Intervals, ties and marks: model/recommend.py.
        """

        if max_slowdown is not None and not max_slowdown >= 1:  # NaN too: it would keep no row
            raise OpcostError(
                f"--max-slowdown {max_slowdown} must be >= 1 (1.2 = at most 20 % slower than the fastest)"
            )
        check_mode(mode)
        own = [t.rpartition("-")[0] for t in self.targets() if t.endswith(f"-{mode}")]
        if devices is not None:  # `--devices H100,A100,L4,T4`: own bundles where they exist, else transferred
            from opcost.model.xdevice_predict import table_configs

            chosen = [self._transfer(d, mode)[0] for d in table_configs(devices)]
            requests = [
                (model, input_shape, d, mode, c)
                for d in chosen
                for c in (self.sweep_clocks(d, mode) if d in own else self.transferred_clocks(d))
            ]
        else:
            if not own:
                raise OpcostError(f"no trained model in mode {mode}; trained: {', '.join(self.targets()) or 'none'}")
            requests = [(model, input_shape, d, mode, c) for d in own for c in self.sweep_clocks(d, mode)]
        preds = self.predict_many(requests, optimizer=optimizer)
        dropped = []
        kept = []
        for p in preds:
            if p.fits is False:
                dropped.append(
                    {
                        "device_config": p.device_config,
                        "clock_mhz": p.clock_mhz,
                        "needed_bytes": p.memory["needed_bytes"],
                        "device_memory_bytes": _device_memory(p.device_config),
                    }
                )
            else:
                kept.append(p)
        if not kept:
            raise OpcostError(
                f"{preds[0].model} ({mode}) fits on none of the trained device configs: it needs "
                f"{preds[0].memory['needed_bytes'] / 2**30:.2f} GiB; dropped "
                + ", ".join(dict.fromkeys(d["device_config"] for d in dropped))
            )
        from opcost.model.recommend import settings_table

        return settings_table(kept, max_slowdown, dropped)


# How far outside the training range a figure may lie before a prediction says it extrapolates.
EXTRAPOLATION_FACTOR = 2.0


def extrapolation_warnings(bundle: Bundle, shape: tuple[int, ...], records: Sequence[OpRecord]) -> list[str]:
    """What about this question lies outside the data the model learned from (bundle.ranges)."""
    out = []
    lo, hi = bundle.ranges.get("batch", (None, None))
    if lo is not None and shape and not lo / EXTRAPOLATION_FACTOR <= shape[0] <= hi * EXTRAPOLATION_FACTOR:
        out.append(
            f"batch {shape[0]} lies outside the batch sizes the {bundle.target} model was trained on "
            f"({lo:g}..{hi:g}): the prediction extrapolates"
        )
    for key, what in (("in_numel", "input size"), ("flops", "FLOPs")):
        lo, hi = bundle.ranges.get(key, (None, None))
        if lo is None or not records:
            continue
        values = [float(r.in_numel if key == "in_numel" else r.metrics["flops"]) for r in records]
        far = [v for v in values if v > hi * EXTRAPOLATION_FACTOR]
        if far:
            out.append(
                f"{len(far)} of {len(values)} ops exceed by more than {EXTRAPOLATION_FACTOR:g}x the largest {what} "
                f"the {bundle.target} model was trained on ({hi:.3g}; up to {max(far) / hi:.3g}x): extrapolating"
            )
    return out


def as_netspec(model: "str | NetSpec", input_shape: Any = None, dtype: str = "float32") -> NetSpec:
    """A NetSpec as is, or the old form: a torchvision name with an image shape `B,C,H,W`."""
    if isinstance(model, NetSpec):
        return model
    if input_shape is None:
        return NetSpec.make(model, (), None, dtype)
    return NetSpec.make(model, [InputSpec(parse_input_shape(input_shape, "--input-shape"), dtype)], None, dtype)


def _device_memory(device_config: str) -> float | None:
    from opcost.devices import find_device

    found = find_device(device_config)
    return None if found is None else found[0].memory_bytes


def _read_cached(f: Path) -> Network | None:
    """A cached extraction, or None (and the file discarded, to be rebuilt) where it cannot be read:
    a write cut short, a disk error, a file edited by hand. A cache never fails a prediction."""
    try:
        d = json.loads(f.read_text())
        if not isinstance(d, dict):
            raise ValueError("not a JSON object")
        net = Network.from_json(d)
        if not set(net.calls) <= set(net.records):
            raise KeyError("calls of ops without a record")
        return net
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        f.unlink(missing_ok=True)
        return None


def _extract_network(spec: NetSpec, mode: str) -> Network:
    """Trace the network (imports torch) into records, call counts and memory footprints."""
    from opcost.model.features import op_record
    from opcost.ops.catalog import extract_nets
    from opcost.ops.memory import network_memory
    from opcost.ops.nodynamo import dynamo_stub

    check_mode(mode)
    cat = extract_nets([(spec, mode)], show_progress=False)
    res = cat.results[0]
    records = {
        i: op_record(s, {**cat.metrics[i].as_dict(), "parts": cat.parts.get(i, [])}) for i, s in cat.built.items()
    }
    traced = res.traced
    with dynamo_stub():
        memory = network_memory(traced.loaded.module, traced.args, traced.kwargs, mode)
    missing = [{"kind": k, **v} for k, v in cat.missing(res).items()]
    calls = {i: n for i, n in res.calls.items() if i in records}
    return Network(records, calls, memory, traced.net.inputs, missing, traced.notes)
