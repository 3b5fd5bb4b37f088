"""Op times measured on a table GPU that has no bundle of its own, for its transferred answers.

A campaign on a GPU (data/raw/<campaign>/, evaluated into data/evaluated/operations.parquet) measures
the ops of a few networks. A bundle trained on a few dozen ops would answer every other network from
them, so such a GPU stays `transferred` (model/prediction/xdevice_predict.py), and this table replaces the
transferred time of each op it measured there: by device config (`same_numerics`), mode and op_id.
Only our own campaigns' rows count (method `trials`), at the device's default clock and power limit,
of the phase a mode's answer costs (forward; forward+backward in training). The GPUs the cross-device
model is trained on (NeuSight, the thesis) are not in it: their transferred answers stay as they are.

Time only: measured energy is not used (a campaign's energy may be flagged; the transferred answer's
energy comes from the cross-device power model), and the table records how many of its rows had any.
Stage `measured-ops` writes it as JSON (models/measured/ops.json): data, never a pickle.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opcost.devices import find_device, same_numerics
from opcost.errors import OpcostError
from opcost.io import read_json_model
from opcost.modes import MODES, OP_PHASE

if TYPE_CHECKING:
    import pandas as pd

FORMAT = "opcost-measured/1"
FILE = "ops.json"
STAGE = "measured-ops"
METHOD = "trials"  # evaluated rows of our own campaigns (data/evaluate.py)


def measured_table(ops: pd.DataFrame) -> dict[str, Any]:
    """The table (see module docstring) from evaluated operations: device config -> campaigns, and per
    mode op_id -> kind, t_s (mean over trials), sigma_t_s and n_trials; `energy_rows` counts the rows
    that had an energy (never used)."""
    d = ops[(ops["method"] == METHOD) & ops["clock_mhz"].isna() & ops["power_limit_w"].isna()]
    d = d[[find_device(str(c)) is not None for c in d["device_config"]]]
    devices: dict[str, Any] = {}
    for cfg, rows in d.groupby(d["device_config"].map(lambda c: same_numerics(str(c))), sort=True):
        modes: dict[str, dict[str, Any]] = {}
        for mode in MODES:
            m = rows[(rows["mode"] == mode) & (rows["phase"] == OP_PHASE[mode])]
            m = m[m["t_s"].notna() & (m["t_s"] > 0)].sort_values("op_id")
            if m.empty:
                continue
            modes[mode] = {
                str(r.op_id): {
                    "kind": str(r.kind),
                    "t_s": float(r.t_s),
                    "sigma_t_s": None if not math.isfinite(float(r.sigma_t_s)) else float(r.sigma_t_s),
                    "n_trials": int(r.n_trials),
                }
                for r in m.itertuples()
            }
        if modes:
            sources = sorted({s for v in rows["sources"] for s in str(v).split(",") if s})
            devices[str(cfg)] = {
                "campaigns": sources,
                "energy_rows": int(rows["e_j"].notna().sum()),
                "modes": modes,
            }
    return {"format": FORMAT, "devices": devices}


@functools.lru_cache(maxsize=8)
def _read(path: str, _mtime_ns: int, _size: int) -> dict[str, Any]:
    table = read_json_model(Path(path), "measured-op table", STAGE)
    devices = table.get("devices")
    if table.get("format") != FORMAT or not isinstance(devices, dict):
        raise OpcostError(
            f"{path}: format {table.get('format')!r}, expected {FORMAT!r} with a `devices` object; "
            f"run `dvc repro {STAGE}`"
        )
    for cfg, entry in devices.items():
        for mode, ops in (entry.get("modes") or {}).items() if isinstance(entry, dict) else [(None, None)]:
            bad = [k for k, v in (ops or {}).items() if not _positive(v.get("t_s") if isinstance(v, dict) else None)]
            if mode not in MODES or not isinstance(ops, dict) or bad:
                what = f"op {bad[0]}" if bad else f"mode {mode!r}"
                raise OpcostError(f"{path}: {cfg} holds no valid time for {what}; run `dvc repro {STAGE}`")
    return table


def _positive(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def load(folder: Path) -> dict[str, Any]:
    """The table in `folder` (models/measured/). Where the stage has not written it, an empty table: the
    GPU's answers are then transferred for every op, as before any campaign measured it."""
    f = Path(folder) / FILE
    try:
        st = f.stat()
    except OSError:
        return {"format": FORMAT, "devices": {}}
    return _read(str(f), st.st_mtime_ns, st.st_size)


def device_entry(folder: Path, device_config: str) -> dict[str, Any] | None:
    """The table's entry for `device_config` (campaigns, energy_rows, modes), None where it has none."""
    entry = load(folder)["devices"].get(same_numerics(device_config))
    return entry if isinstance(entry, dict) else None


def with_gpu_times(table: dict[str, Any], timings: pd.DataFrame) -> dict[str, Any]:
    """`table` with `gpu_t_s` on each op whose campaign rows (raw timings: op_id, mode, status, clock_mhz,
    power_limit_w, gpu_time_per_call_s) timed its GPU side apart from its host's (measure/gputime.py): the
    median over trials at the default setting. Why: an op timed alone in training is host-bound in the
    profiler's harness (its own backward per instance costs host time a network's one backward does not), so
    its wall time over-states what it adds to a network; the host/GPU queue (model/crossdevice/hostqueue.py) takes its
    GPU time and issues it at the answer's host cost instead."""
    t = timings[(timings["status"] == "ok") & timings["clock_mhz"].isna() & timings["power_limit_w"].isna()]
    t = t[t["gpu_time_per_call_s"].notna() & (t["gpu_time_per_call_s"] > 0)]
    gpu = t.groupby(["op_id", "mode"])["gpu_time_per_call_s"].median()
    for entry in table["devices"].values():
        for mode, ops in entry["modes"].items():
            for op, v in ops.items():
                if (op, mode) in gpu.index:
                    v["gpu_t_s"] = float(gpu[(op, mode)])
    return table


def op_times(folder: Path, device_config: str, mode: str) -> dict[str, float]:
    """op_id -> measured time per call of `device_config` in `mode` (empty where nothing was measured)."""
    entry = device_entry(folder, device_config)
    ops = {} if entry is None else entry.get("modes", {}).get(mode, {})
    return {k: float(v["t_s"]) for k, v in ops.items()}


def op_gpu_times(folder: Path, device_config: str, mode: str) -> dict[str, float]:
    """op_id -> measured GPU time per call (`with_gpu_times`), for the ops whose campaign timed it."""
    entry = device_entry(folder, device_config)
    ops = {} if entry is None else entry.get("modes", {}).get(mode, {})
    return {k: float(v["gpu_t_s"]) for k, v in ops.items() if _positive(v.get("gpu_t_s"))}


def with_rows(table: dict[str, Any], catalog: pd.DataFrame) -> dict[str, Any]:
    """`table` with `row` on each op the catalog (schemas.OPERATIONS, indexed by op_id) knows and that is one
    kernel: its cross-device row (model/crossdevice/xdevice.record_row), so that a transferred answer can compare the
    op's measured time with what the cross-device model says for it and correct the ops measured nowhere
    (model/crossdevice/fewshot.py). An op costed from several kernels (attention, recurrent layers) gets none: its
    measured time cannot be split between them."""
    from opcost.model.basis.features import record_of
    from opcost.model.crossdevice.xdevice_net import op_rows

    for entry in table["devices"].values():
        for ops in entry["modes"].values():
            for op, v in ops.items():
                if op not in catalog.index:
                    continue
                rows = op_rows(record_of(catalog.loc[op]))
                if len(rows) == 1 and rows[0][1] == 1.0:
                    v["row"] = {k: (x if isinstance(x, str) else float(x)) for k, x in rows[0][0].items()}
    return table


def op_rows_measured(folder: Path, device_config: str, mode: str = "inference") -> list[tuple[dict[str, Any], float]]:
    """(cross-device row, measured GPU time per call) of each op of `device_config` whose table entry has
    both (`with_rows`, `with_gpu_times`): what the few-shot correction compares. GPU time only: a wall time
    carries the measuring host's cost per call, which the transfer answers apart (model/crossdevice/hostqueue.py)."""
    entry = device_entry(folder, device_config)
    ops = {} if entry is None else entry.get("modes", {}).get(mode, {})
    return [
        (v["row"], float(v["gpu_t_s"]))
        for v in ops.values()
        if isinstance(v.get("row"), dict) and _positive(v.get("gpu_t_s"))
    ]
