"""`opcost devices`: the device table, what the project holds for each GPU, and how it predicts for it.

Per GPU (the table's key; a device config's `_no_tf32` counts towards its GPU):
- specs from `opcost.devices` (the one table);
- what is measured: op rows and networks of data/evaluated/{operations,networks}.parquet, clock-sweep
  rows (core-clock knob) of data/evaluated/sweeps.parquet, and power data (evaluated op and network
  rows with an energy or power figure, sweep rows with power): counts, 0 where a table lacks the GPU,
  null where the table itself is missing (not pulled or not evaluated yet);
- how predictions are made: `own measurements` where models/<config>-<mode>/ holds a trained bundle for
  a config of the GPU, else `fitted` where the cross-device model (models/xdevice/) was fitted on the GPU's
  own measured ops (NeuSight's GPUs: an in-sample fit), `transferred` where it never saw the GPU, else
  `none yet`.
"""

from __future__ import annotations

from pathlib import Path
from typing import AbstractSet, Any

import pandas as pd

from opcost.devices import DEVICES, NO_TF32_SUFFIX, Device, lookup_device
from opcost.paths import Paths

XDEVICE_DIR = "xdevice"  # models/xdevice/: the cross-device model (stage train-xdevice)
XDEVICE_FILE = "xdevice.json"  # opcost.model.crossdevice.xdevice.MODEL_FILE (not imported: it loads the tree learners)
BUNDLE_FILE = "bundle.json"  # opcost.model.composition.bundle.BUNDLE_FILE (not imported: it loads scikit-learn)


def specs(d: Device) -> dict[str, Any]:
    """The table row of one GPU in display units (TFLOP/s, GiB, GB/s, MiB)."""
    return {
        "key": d.name,
        "product": d.product,
        "nvml_names": list(d.nvml_names),
        "architecture": d.architecture,
        "compute_capability": ".".join(map(str, d.compute_capability)),
        "tensor_cores": d.tensor_cores,
        "sms": d.sms,
        "base_clock_mhz": d.base_clock_mhz,
        "boost_clock_mhz": d.boost_clock_mhz,
        "clock_range_mhz": list(d.clock_range_mhz),
        "fp32_tflops": d.fp32_flops / 1e12,
        "tf32_tflops": None if d.tf32_flops is None else d.tf32_flops / 1e12,
        "fp16_tflops": d.fp16_flops / 1e12,
        "memory_gib": d.memory_bytes / 2**30,
        "bandwidth_gbs": d.bandwidth / 1e9,
        "l2_mib": d.l2_bytes / 2**20,
        "tdp_w": d.tdp_w,
    }


def _gpu(config: Any) -> str | None:
    """The table key of a device config or sweep device name (None: not a table GPU)."""
    c = str(config)
    return lookup_device(c[: -len(NO_TF32_SUFFIX)] if c.endswith(NO_TF32_SUFFIX) else c)


def _counts(path: Path, column: str, mask: Any = None, unique: str | None = None) -> dict[str, int] | None:
    """Rows (or distinct `unique` values) per table GPU of a parquet table; None if the file is missing."""
    if not path.is_file():
        return None
    df = pd.read_parquet(path)
    if mask is not None:
        df = df[mask(df)]
    gpus = df[column].map(_gpu)
    df = df.assign(_gpu=gpus)[gpus.notna()]
    if unique is not None:
        return {str(k): int(v) for k, v in df.groupby("_gpu")[unique].nunique().items()}
    return {str(k): int(v) for k, v in df.groupby("_gpu").size().items()}


def _has_power(df: pd.DataFrame) -> pd.Series:
    return df["e_j"].notna() | df["p_w"].notna()


def holdings(paths: Paths) -> dict[str, dict[str, int | None]]:
    """What the project measured per table GPU (module docstring)."""
    ops = _counts(paths.evaluated_operations, "device_config", unique="op_id")
    nets = _counts(paths.evaluated_networks, "device_config", unique="set_id")
    sweeps = _counts(paths.evaluated_sweeps, "device", lambda d: d["knob"] == "core_clock_mhz")
    op_power = _counts(paths.evaluated_operations, "device_config", _has_power)
    net_power = _counts(paths.evaluated_networks, "device_config", _has_power)
    sweep_power = _counts(paths.evaluated_sweeps, "device", lambda d: d["power_w"].notna())
    out: dict[str, dict[str, int | None]] = {}
    for key in DEVICES:
        power_parts = [c for c in (op_power, net_power, sweep_power) if c is not None]
        out[key] = {
            "measured_ops": None if ops is None else ops.get(key, 0),
            "measured_networks": None if nets is None else nets.get(key, 0),
            "clock_sweep_rows": None if sweeps is None else sweeps.get(key, 0),
            "power_rows": sum(c.get(key, 0) for c in power_parts) if power_parts else None,
        }
    return out


def trained_targets(models: Path) -> dict[str, list[str]]:
    """Targets (`<config>-<mode>`) with a trained bundle under models/, per table GPU."""
    out: dict[str, list[str]] = {}
    for f in sorted(models.glob(f"*/{BUNDLE_FILE}")) if models.is_dir() else []:
        target = f.parent.name
        config, sep, _mode = target.rpartition("-")
        key = _gpu(config) if sep else None
        if key is not None:
            out.setdefault(key, []).append(target)
    return out


def xdevice_trained_on(models: Path) -> set[str]:
    """The GPUs whose measured ops the cross-device model was fitted on (its `trained_on`); empty without it."""
    import json

    try:
        d = json.loads((models / XDEVICE_DIR / XDEVICE_FILE).read_text())
    except (OSError, ValueError):
        return set()
    got = d.get("trained_on") if isinstance(d, dict) else None
    return {str(g) for g in got} if isinstance(got, list) else set()


def prediction_source(
    key: str, trained: dict[str, list[str]], models: Path, fitted: AbstractSet[str] = frozenset()
) -> str:
    """`own measurements` (a bundle of its own), `fitted` (the cross-device model, fitted on this GPU's own
    measured ops: NeuSight's GPUs), `transferred` (the same model on a GPU it never saw) or `none yet`."""
    if trained.get(key):
        return "own measurements"
    if not (models / XDEVICE_DIR).is_dir():
        return "none yet"
    return "fitted" if key in fitted else "transferred"


def device_list(paths: Paths) -> list[dict[str, Any]]:
    """One entry per table GPU: specs, holdings, trained targets and how predictions are made."""
    models = paths.root / "models"
    held = holdings(paths)
    trained = trained_targets(models)
    fitted = xdevice_trained_on(models)
    return [
        {
            **specs(d),
            **held[key],
            "trained_targets": trained.get(key, []),
            "predictions": prediction_source(key, trained, models, fitted),
        }
        for key, d in DEVICES.items()
    ]
