"""Whole-network predictions from per-operation models: time, energy, power, breakdown, coverage.

A network is extracted on meta tensors (as the extract stage does), each unique op is encoded and
predicted once, and costs are summed with their call counts. Ops of kinds the device's model never
saw are left out of the sum and listed with the share of FLOPs they hold, rather than
extrapolated. Models come from models/<device>-<mode>/ (the DVC outputs of the train stages), or
from the MLflow registry's champion with `registry=True`.

A `Predictor` keeps extracted networks and encoded features in memory, so repeated questions
(another device, another clock) cost only the model evaluation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from opcost.config import MODES, ModelInputSet, Paths, find_root, parse_input_shape
from opcost.errors import OpcostError
from opcost.model.bundle import Bundle, read_summary


@dataclass
class NetworkPrediction:
    model: str
    input_shape: tuple[int, ...]
    device_config: str
    mode: str
    clock_mhz: float | None
    time_s: float
    energy_j: float | None
    avg_power_w: float | None
    breakdown: pd.DataFrame  # op_id, kind, calls, t_s, e_j (per call), time_share, energy_share
    unseen: pd.DataFrame  # op_id, kind, calls, flops: left out of the sum
    unseen_flops_share: float
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "input_shape": list(self.input_shape),
            "device_config": self.device_config,
            "mode": self.mode,
            "clock_mhz": self.clock_mhz,
            "time_s": self.time_s,
            "energy_j": self.energy_j,
            "avg_power_w": self.avg_power_w,
            "operations": self.breakdown.to_dict(orient="records"),
            "coverage": {
                "unseen_kinds": sorted(set(self.unseen["kind"])),
                "unseen_calls": int(self.unseen["calls"].sum()) if len(self.unseen) else 0,
                "unseen_flops_share": self.unseen_flops_share,
            },
            "note": self.note,
        }


@dataclass
class _Extracted:
    specs: dict[str, Any]
    metrics: dict[str, dict[str, Any]]
    calls: dict[str, int]
    kinds: dict[str, str]


@dataclass
class Predictor:
    """Loads bundles on first use and caches extractions and features (see module docstring)."""

    paths: Paths = field(default_factory=lambda: Paths(find_root()))
    registry: bool = False
    _bundles: dict[str, Bundle] = field(default_factory=dict)
    _extracted: dict[tuple, _Extracted] = field(default_factory=dict)
    _features: dict[tuple, np.ndarray] = field(default_factory=dict)

    # -- models ---------------------------------------------------------------------------
    def targets(self) -> list[str]:
        """Device config and mode pairs with a trained model, e.g. ['A30-inference', ...]."""
        root = self.paths.root / "models"
        return sorted(p.parent.name for p in root.glob("*/model.json")) if root.is_dir() else []

    def bundle(self, device: str, mode: str) -> Bundle:
        if mode not in MODES:
            raise OpcostError(f"unknown mode {mode!r}; valid modes: {', '.join(MODES)}")
        target = f"{device}-{mode}"
        if target in self._bundles:
            return self._bundles[target]
        available = self.targets()
        if not available:
            raise OpcostError(
                "no trained model found under models/: run `dvc pull` (or `dvc repro train@<device>-<mode>`) first"
            )
        if target not in available:
            devices = sorted({t.rpartition("-")[0] for t in available if t.endswith(f"-{mode}")})
            raise OpcostError(
                f"no model for device {device!r} in mode {mode}; trained: {', '.join(devices) or 'none in this mode'} "
                f"(all: {', '.join(available)})"
            )
        if self.registry:
            self._bundles[target] = _registry_bundle(self.paths, target)
        else:
            self._bundles[target] = Bundle.load(self.paths.model_dir(target))
        return self._bundles[target]

    # -- networks -------------------------------------------------------------------------
    def _extract(self, model: str, shape: tuple[int, ...], dtype: str, mode: str) -> _Extracted:
        key = (model, shape, dtype, mode)
        if key not in self._extracted:
            from opcost.ops.catalog import extract_sets

            cat = extract_sets([ModelInputSet(model, shape, dtype, (mode,))], show_progress=False)
            res = cat.results[0]
            metrics = {
                i: {
                    "flops": m.flops, "bytes_read": m.bytes_read, "bytes_written": m.bytes_written,
                    "params": m.params, "is_view": m.is_view, "output_shapes": [list(s) for s in m.output_shapes],
                }
                for i, m in cat.metrics.items()
            }
            self._extracted[key] = _Extracted(
                cat.specs, metrics, dict(res.calls), {i: s.kind for i, s in cat.specs.items()}
            )
        return self._extracted[key]

    def predict(
        self, model: str, input_shape: Any, device: str, mode: str = "inference", clock_mhz: float | None = None,
        dtype: str = "float32",
    ) -> NetworkPrediction:
        from opcost.ops.models import check_model_name

        check_model_name(model)
        shape = parse_input_shape(input_shape, "--input-shape")
        bundle = self.bundle(device, mode)
        if clock_mhz is not None and not bundle.clocks_mhz:
            raise OpcostError(
                f"the {bundle.target} model was trained at the device's default clock only; "
                "leave out --clock, or train it on a clock sweep"
            )
        ex = self._extract(model, shape, dtype, mode)
        known = set(bundle.kinds)
        seen = [i for i in ex.specs if ex.kinds[i] in known]
        unseen = [i for i in ex.specs if ex.kinds[i] not in known]
        preds = {q: self._predict_ops(bundle, q, ex, seen, clock_mhz) for q in bundle.models}
        t = preds["time"]
        p = preds.get("power")
        calls = np.array([ex.calls[i] for i in seen], float)
        e = t * p if p is not None else None
        total_t = float((t * calls).sum())
        total_e = float((e * calls).sum()) if e is not None else None
        bd = pd.DataFrame(
            {
                "op_id": seen, "kind": [ex.kinds[i] for i in seen], "calls": calls.astype(int),
                "t_s": t, "e_j": e if e is not None else np.nan,
            }
        )
        bd["time_share"] = bd["t_s"] * bd["calls"] / total_t if total_t else 0.0
        bd["energy_share"] = bd["e_j"] * bd["calls"] / total_e if total_e else np.nan
        bd = bd.sort_values("time_share", ascending=False, ignore_index=True)
        flops_all = sum(ex.metrics[i]["flops"] * ex.calls[i] for i in ex.specs)
        flops_unseen = sum(ex.metrics[i]["flops"] * ex.calls[i] for i in unseen)
        un = pd.DataFrame(
            {"op_id": unseen, "kind": [ex.kinds[i] for i in unseen], "calls": [ex.calls[i] for i in unseen],
             "flops": [ex.metrics[i]["flops"] for i in unseen]}
        )
        note = ""
        if mode == "training":
            note = "per-op forward+backward summed; the loss and the optimizer step of a training step are not covered"
        if p is None:
            note = (note + "; " if note else "") + "no power model for this device (time-only measurements)"
        return NetworkPrediction(
            model=model, input_shape=shape, device_config=device, mode=mode, clock_mhz=clock_mhz,
            time_s=total_t, energy_j=total_e, avg_power_w=(total_e / total_t) if total_e is not None and total_t else None,
            breakdown=bd, unseen=un, unseen_flops_share=(flops_unseen / flops_all) if flops_all else 0.0, note=note,
        )

    def _predict_ops(self, bundle: Bundle, quantity: str, ex: _Extracted, ids: list[str], clock: float | None) -> np.ndarray:
        qm = bundle.models[quantity]
        key = (bundle.target, quantity, tuple(ids), clock, id(ex))
        if key not in self._features:
            self._features[key] = qm.encoding.matrix([(ex.specs[i], ex.metrics[i], clock) for i in ids])
        X = self._features[key]
        if len(ids) == 0:
            return np.zeros(0)
        y = qm.estimator.predict(X)
        return np.exp(y) if qm.log_target else np.asarray(y, float)

    # -- recommendations ------------------------------------------------------------------
    def recommend(
        self, model: str, input_shape: Any, mode: str = "inference", max_slowdown: float | None = None,
    ) -> pd.DataFrame:
        """Device configs (and clocks, where a model knows them) ranked by time, energy and EDP."""
        rows = []
        devices = [t.rpartition("-")[0] for t in self.targets() if t.endswith(f"-{mode}")]
        if not devices:
            raise OpcostError(f"no trained model in mode {mode}; trained: {', '.join(self.targets()) or 'none'}")
        for dev in devices:
            bundle = self.bundle(dev, mode)
            for clock in bundle.clocks_mhz or (None,):
                p = self.predict(model, input_shape, dev, mode, clock)
                rows.append(
                    {"device_config": dev, "clock_mhz": clock, "time_s": p.time_s, "energy_j": p.energy_j,
                     "edp_js": p.time_s * p.energy_j if p.energy_j is not None else None,
                     "unseen_flops_share": p.unseen_flops_share}
                )
        df = pd.DataFrame(rows)
        fastest = df["time_s"].min()
        df["slowdown"] = df["time_s"] / fastest
        if max_slowdown is not None:
            if max_slowdown < 1:
                raise OpcostError(f"--max-slowdown {max_slowdown} must be >= 1 (1.2 = at most 20 % slower than the fastest)")
            df = df[df["slowdown"] <= max_slowdown + 1e-12]
        for col, name in (("time_s", "rank_time"), ("energy_j", "rank_energy"), ("edp_js", "rank_edp")):
            df[name] = df[col].rank(method="min", na_option="bottom").astype(int)
        return df.sort_values(["rank_energy", "rank_time"], ignore_index=True)


def _registry_bundle(paths: Paths, target: str) -> Bundle:
    from opcost.model import tracking

    mlflow = tracking.setup(paths.root)
    uri = f"models:/{tracking.registered_name(target)}@{tracking.CHAMPION}"
    try:
        model = mlflow.pyfunc.load_model(uri)
    except Exception as exc:
        raise OpcostError(f"cannot load {uri} from {tracking.tracking_uri(paths.root)}: run `dvc repro train@{target}`") from exc
    return model.unwrap_python_model().bundle


def model_summaries(paths: Paths) -> dict[str, dict[str, Any]]:
    root = paths.root / "models"
    return {p.parent.name: read_summary(p.parent) for p in sorted(root.glob("*/model.json"))} if root.is_dir() else {}


def finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)
