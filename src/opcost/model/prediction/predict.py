"""Whole-network predictions from per-operation models: time, energy, power, breakdown, coverage.

`Predictor` only composes, one piece per job in its own module: bundles loaded once (store/bundlestore),
extraction behind the network cache (composition/network, netcache), costing per (target, clock)
over the union of the ops asked about (composition/costing), clock transfer
(prediction/clocktransfer), transferred GPUs (prediction/xdevice_predict), answers and `recommend`.
Cached extractions and compiled trees let a repeated question skip torch, XGBoost and pandas. The clock
grid's size is the caller's (`clock_grid_points`): the library reads no parameters file.
Design: docs/architecture.md#inside-a-prediction-one-module-per-job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from opcost.devices import DeviceConfig, find_device
from opcost.errors import OpcostError
from opcost.model.basis.features import OpRecord
from opcost.model.composition.bundle import Bundle
from opcost.model.composition.compose import Costs
from opcost.model.composition.costing import OpCost, reference_clock_mhz
from opcost.model.composition.netcache import NetworkCache, network_cache
from opcost.model.composition.network import Network, as_netspec
from opcost.model.prediction.answer import NetworkPrediction, Request, assemble
from opcost.model.prediction.clocktransfer import ClockTransfer, clock_grid, transfer_device
from opcost.model.records.integrity import locked_models
from opcost.model.store.bundlestore import BundleStore
from opcost.modes import MODES
from opcost.ops.footprint import footprint_key
from opcost.ops.netspec import NetSpec
from opcost.params.clock import ClockParams
from opcost.paths import Paths, find_root

if TYPE_CHECKING:
    import pandas as pd

    from opcost.model.clocks.clock import ClockModel

# A costing question: (target, clock in MHz or None for the default clock).
Group = tuple[str, "float | None"]


@dataclass
class Predictor:
    """Answers network questions by composing the pieces above (see module docstring)."""

    paths: Paths = field(default_factory=lambda: Paths(find_root()))
    registry: bool = False
    disk_cache: bool = True
    trust_unrecorded: bool = False  # serve bundles nothing vouches for (model/store/bundlestore.py), with a warning
    host: str | None = None  # the host of transferred answers (model/crossdevice/hosts.py); None: the reference host
    clock_grid_points: int = ClockParams().grid_points  # clocks per device `recommend` sweeps (params clock)
    bundles: BundleStore = field(init=False)
    networks: NetworkCache = field(init=False)
    clocks: ClockTransfer = field(init=False)

    def __post_init__(self) -> None:
        self.bundles = BundleStore(self.paths, self.registry, self.trust_unrecorded)
        self.networks = network_cache(self.paths.root, self.disk_cache)
        self.clocks = ClockTransfer(self.paths.clock_model_dir, self._registry_clock if self.registry else None)

    # -- models ---------------------------------------------------------------------------
    def _registry_clock(self) -> Path:
        """models/clock as the registry's `opcost-clock` champion holds it (verified by its bundle_md5 tag)."""
        from opcost.model.records import tracking
        from opcost.model.store.registry import champion_folder

        return champion_folder(self.paths, tracking.CLOCK_MODEL, "clock", self.trust_unrecorded)

    def targets(self) -> list[str]:
        """Device config and mode pairs with a trained model, e.g. ['A30-inference', ...]."""
        return self.bundles.targets()

    def bundle(self, device: str, mode: str) -> Bundle:
        return self.bundles.bundle(device, mode)

    def clock_model(self) -> ClockModel:
        """The transferred clock model (models/clock/, stage train-clock), loaded once."""
        return self.clocks.model()

    def clock_grid(self, device_config: str) -> list[float]:
        """The clocks `recommend` sweeps for a device config without a measured sweep."""
        return clock_grid(find_device(device_config), self.clock_grid_points)

    # -- networks -------------------------------------------------------------------------
    def network(
        self,
        model: "str | NetSpec",
        shape: tuple[int, ...] | None = None,
        dtype: str = "float32",
        mode: str = "inference",
    ) -> Network:
        """The extracted network: `network(NetSpec, mode=...)`, or the old `network(name, shape, dtype, mode)`."""
        return self.networks.get(as_netspec(model, shape, dtype), mode)

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
        return self.predict_many([Request(model, input_shape, device, mode, clock_mhz)], dtype, optimizer)[0]

    def predict_many(
        self, requests: Sequence[Request], dtype: str = "float32", optimizer: str = "sgd"
    ) -> list[NetworkPrediction]:
        """Several (model, input_shape, device, mode, clock) questions; each device's model runs once."""
        prepared: list[tuple[NetSpec, Bundle, float | None, Network, int]] = []
        transferred: dict[int, NetworkPrediction] = {}  # GPUs without own bundles (model/prediction/xdevice_predict.py)
        bad = next((k for k, q in enumerate(requests) if not isinstance(q, Request)), None)
        if bad is not None:  # before any work: a plain tuple would fail deep inside with an AttributeError
            raise OpcostError(
                f"question {bad} of predict_many is a {type(requests[bad]).__name__}, not an "
                "opcost.model.prediction.answer.Request(model, input_shape, device, mode, clock_mhz=None)"
            )
        own = self.targets()  # listed once, not once per question (a glob of models/)
        for k, q in enumerate(requests):
            spec, mode, clock = as_netspec(q.model, q.input_shape, dtype), q.mode, q.clock_mhz
            if mode == "training":
                footprint_key(mode, optimizer)  # an unknown optimizer fails before any work
            device, xfer = self.transfer(q.device, mode, own)
            if xfer is not None:
                transferred[k] = self._transferred_answer(spec, xfer, mode, optimizer, clock)
                continue
            bundle = self.bundle(device, mode)
            if clock is not None:
                from opcost.model.clocks.clock import check_device_clock

                check_device_clock(bundle.device, float(clock))
                if not bundle.clocks_mhz:  # a device the table lacks, or no clock model: refused here
                    transfer_device(bundle.device, bundle.device_config)
                    self.clocks.model()
            prepared.append((spec, bundle, clock, self.network(spec, mode=bundle.mode), k))
        groups: dict[Group, dict[str, OpRecord]] = {}
        for _, bundle, clock, net, _k in prepared:
            groups.setdefault((bundle.target, clock), {}).update(net.records)
        costed = cost_groups(groups, self.bundles.loaded, self._at_clock)
        answers = {k: assemble(s, b, c, n, costed[(b.target, c)], optimizer, self.clocks) for s, b, c, n, k in prepared}
        return [answers[k] if k in answers else transferred[k] for k in range(len(requests))]

    def transfer(self, device: str, mode: str, own: list[str] | None = None) -> tuple[str, DeviceConfig | None]:
        """(device config, the resolved config to answer with the cross-device model or None). None where the
        device has its own bundle in this mode (an NVML name becomes its key) or no models/xdevice is there.
        `own`: the targets, where the caller listed them already."""
        from opcost.model.prediction.xdevice_predict import own_candidates, own_config

        own = self.targets() if own is None else own
        mine = own_config(device, mode, own)  # first: an own bundle needs neither the cross-device model nor pandas
        if mode not in MODES or mine is not None:
            return mine or device, None
        self.check_checkout(own, own_candidates(device), mode)
        from opcost.model.crossdevice.xdevice import MODEL_FILE

        if not (self.paths.xdevice_model_dir / MODEL_FILE).is_file():
            return device, None
        from opcost.model.prediction.xdevice_predict import transfer_config

        return transfer_config(device, mode, own)

    def check_checkout(self, own: list[str], configs: Sequence[str], mode: str) -> None:
        """Refuse where `dvc.lock` records `models/<config>-<mode>` for one of `configs` but the checkout
        lacks it (no `dvc pull` yet, or deleted): the cross-device model would answer in its place, wider
        and off by tens of per cent, and say the GPU has no measurements of its own. Not for `--registry`
        (the registered champion carries the bundle)."""
        if self.registry:
            return
        missing = [t for t in (f"{c}-{mode}" for c in configs) if t not in own and t in locked_models(self.paths.root)]
        for t in missing:  # a folder that is there without bundle.json: its own line names the missing file
            if self.paths.model_dir(t).is_dir():
                Bundle.load(self.paths.model_dir(t))
        if missing:
            folders = " ".join(f"models/{t}" for t in missing)
            raise OpcostError(
                f"{folders} {'is' if len(missing) == 1 else 'are'} recorded in dvc.lock but missing from this "
                "checkout, so the own model cannot answer: "
                f"run `dvc pull {folders}` (or `dvc checkout {folders}` where the DVC cache holds it)"
            )

    def _transferred_answer(
        self, spec: NetSpec, found: DeviceConfig, mode: str, optimizer: str, clock: float | None
    ) -> NetworkPrediction:
        from opcost.model.prediction import xdevice_predict

        cm = None
        if clock is not None:  # range first (one line naming it), then the clock model
            from opcost.model.clocks.clock import check_device_clock

            check_device_clock(found, float(clock))
            cm = self.clocks.model()
        net = self.network(spec, mode=mode)
        return xdevice_predict.network_prediction(
            self.paths.xdevice_model_dir, spec, net, found, mode, optimizer, clock, cm, self.host
        )

    def _at_clock(self, bundle: Bundle, records: list[OpRecord], ref: Costs, clock: float) -> Costs:
        return self.clocks.costs(transfer_device(bundle.device, bundle.device_config), records, ref, clock)

    # -- recommendations ------------------------------------------------------------------
    def sweep_clocks(self, device: str, mode: str) -> tuple[float | None, ...]:
        """The clocks `recommend` asks about for a device config: its measured sweep, else (when the
        clock model is there and the device is in the table) a grid over its supported range, else
        only the default clock."""
        b = self.bundle(device, mode)
        if b.clocks_mhz:
            return tuple(b.clocks_mhz)
        return self._grid_clocks(b.device)

    def transferred_clocks(self, found: DeviceConfig) -> tuple[float | None, ...]:
        """The clocks `recommend` asks the cross-device model about for a resolved device config: the same
        grid as for an own bundle without a measured sweep when the clock model is there, else only the
        default clock."""
        return self._grid_clocks(found)

    def _grid_clocks(self, device: DeviceConfig | None) -> tuple[float | None, ...]:
        """The grid over a resolved device's range when the clock model is there, else the default clock."""
        grid = clock_grid(device, self.clock_grid_points)
        return tuple(grid) if grid and self.clocks.available() else (None,)

    def recommend(
        self,
        model: "str | NetSpec",
        input_shape: Any = None,
        mode: str = "inference",
        max_slowdown: float | None = None,
        optimizer: str = "sgd",
        devices: str | None = None,
    ) -> pd.DataFrame:
        """Device configs (and clocks) ranked by time, energy and EDP: model/prediction/recommend.py."""
        from opcost.model.prediction.recommend import recommend

        return recommend(self, model, input_shape, mode, max_slowdown, optimizer, devices)


def cost_groups(
    groups: dict[Group, dict[str, OpRecord]],
    bundles: dict[str, Bundle],
    at_clock: Callable[[Bundle, list[OpRecord], Costs, float], Costs],
) -> dict[Group, dict[str, OpCost]]:
    """One costing per (target, clock) over the union of the ops of every network asked about it.

    A clock the bundle was not trained on (no measured sweep) is costed at the reference clock once,
    shared by every such clock of the target, and moved to each clock by `at_clock` (the cross-clock
    model, model/prediction/clocktransfer.py); the reference (boost) clock itself is the default clock's costing."""
    costed: dict[Group, dict[str, OpCost]] = {}
    base: dict[tuple[str, tuple[str, ...]], Costs] = {}  # costs at the reference clock
    for (target, clock), recs in groups.items():
        ids = sorted(recs)
        b = bundles[target]
        if clock is not None and not b.clocks_mhz and float(clock) == reference_clock_mhz(b.device):
            costs = b.coster().cost([recs[i] for i in ids], None)  # the boost clock: the default clock's own costs
        elif clock is not None and not b.clocks_mhz:
            key = (target, tuple(ids))
            if key not in base:
                base[key] = b.coster().cost([recs[i] for i in ids], None)
            costs = at_clock(b, [recs[i] for i in ids], base[key], float(clock))
        else:
            costs = b.coster().cost([recs[i] for i in ids], clock)
        costed[(target, clock)] = {
            i: (float(t), float(p), src, px)
            for i, t, p, src, px in zip(ids, costs.t_s, costs.p_w, costs.source, costs.proxy)
        }
    return costed
