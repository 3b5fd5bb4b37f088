"""Cross-clock measurements from public sources -> the sweeps table.

One parser per source (perseus-stage-profiles, perseus-power-limit, nv-dvfs-kernels,
gpu-frequency-dvfs), all to the same conventions: `time_s` is the time of one unit of work,
`energy_j` the energy of that same unit and `power_w` the average power over it (`detail.unit`
names the unit); clocks are the clocks the work ran at, `value` the setting of the swept knob.
Each file's format and its quirks: docs/data-sources.md#cross-clock-sources; what each file is and
where it comes from: data/external/README.md and CROSS_CLOCK.md.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from opcost.data.sweeps import SweepRead, globbed, number, positive, read_sweep_file, sweep_row, text, whole
from opcost.data.textfile import Line, LineError
from opcost.errors import OpcostError

# --------------------------------------------------------------------------------------------
# perseus-stage-profiles
# --------------------------------------------------------------------------------------------

PERSEUS_STAGE_COLUMNS = ["stage", "instruction", "frequency", "time", "energy"]
PERSEUS_STAGE_FILE = re.compile(r"(?P<model>[A-Za-z0-9_.-]+)\+(?P<gpu>[a-z0-9_]+)_(?P<dtype>bf16|fp16|fp32)\.csv")
PERSEUS_STAGE_GPUS = {"a40": "A40", "a100_sxm": "A100"}  # device-table keys (A100: SXM4 80GB)
INSTRUCTIONS = ("forward", "backward")


def perseus_stages(root: Path, source: str) -> SweepRead:
    out = SweepRead()
    dropped: dict[str, dict[str, list[int]]] = {}
    for f in globbed(root, "*.csv", "Perseus stage profiles"):
        m = PERSEUS_STAGE_FILE.fullmatch(f.name)
        if not m or m.group("gpu") not in PERSEUS_STAGE_GPUS:
            raise OpcostError(
                f"{f}: expected a name <model>+<gpu>_<dtype>.csv with gpu one of {', '.join(PERSEUS_STAGE_GPUS)}"
            )
        model, device, dtype = m.group("model"), PERSEUS_STAGE_GPUS[m.group("gpu")], m.group("dtype")
        first = len(out.rows)

        def rows_of(
            line: Line, rec: dict[str, str], model: str = model, device: str = device, dtype: str = dtype
        ) -> list[dict[str, Any]]:
            stage = whole(rec, "stage")
            if stage < 0:
                raise LineError("out_of_range", f"stage = {stage}, expected a stage number >= 0")
            instruction = rec["instruction"].strip()
            if instruction not in INSTRUCTIONS:
                raise LineError("bad_value", f"instruction = {rec['instruction']!r}, expected forward or backward")
            f_mhz, t, e = number(rec, "frequency"), positive(rec, "time"), number(rec, "energy")
            detail = {"unit": "stage instruction", "model": model, "stage": stage, "dtype": dtype}
            return [
                sweep_row(
                    source,
                    device,
                    f"{model}/stage{stage}/{instruction}",
                    "core_clock_mhz",
                    f_mhz,
                    t,
                    detail,
                    energy_j=e,
                    power_w=e / t,
                    core_clock_mhz=f_mhz,
                    phase=instruction,
                )
            ]

        read_sweep_file(f, f.name, PERSEUS_STAGE_COLUMNS, rows_of, out)
        kept, copies = _drop_identical_stages(out.rows[first:])
        n_dropped = len(out.rows) - first - len(kept)
        out.rows[first:] = kept
        out.files[f.name]["sweep_rows"] = len(kept)
        out.files[f.name]["identical_stage_rows_dropped"] = n_dropped
        dropped[f.name] = {f"stage{k}": v for k, v in copies.items()}
    out.info["identical_stages"] = dropped
    out.info["identical_stage_rows_dropped"] = sum(v["identical_stage_rows_dropped"] for v in out.files.values())
    return out


# A stage's profile: (phase, clock, time, energy) of each of its points, sorted.
StageProfile = tuple[tuple[str, float, float, float], ...]


def _drop_identical_stages(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[int, list[int]]]:
    """Keep the first of every group of stages whose profiles (instruction, clock, time, energy at
    every point) are identical; the kept rows name their copies. Returns the rows and, per kept
    stage that had copies, the stage numbers dropped."""
    by_stage: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        by_stage.setdefault(json.loads(r["detail"])["stage"], []).append(r)
    first_of: dict[StageProfile, int] = {}
    copies: dict[int, list[int]] = {}
    for stage in sorted(by_stage):
        profile: StageProfile = tuple(
            sorted((r["phase"], r["value"], r["time_s"], r["energy_j"]) for r in by_stage[stage])
        )
        if profile in first_of:
            copies.setdefault(first_of[profile], []).append(stage)
        else:
            first_of[profile] = stage
    kept = []
    for r in rows:
        d = json.loads(r["detail"])
        if any(d["stage"] in v for v in copies.values()):
            continue
        if d["stage"] in copies:
            d["identical_stages"] = sorted([d["stage"], *copies[d["stage"]]])
            r = {**r, "detail": json.dumps(d, sort_keys=True)}
        kept.append(r)
    return kept, copies


# --------------------------------------------------------------------------------------------
# perseus-power-limit
# --------------------------------------------------------------------------------------------

PERSEUS_PL_COMMON = [
    "model_name",
    "partition_method",
    "batch_size",
    "dp",
    "tp",
    "pp",
    "microbatch_size",
    "num_microbatches",
    "power_limit_0",
    "time",
    "energy",
]
PERSEUS_PL_MODES = {
    "global": ["optimal_power_limit"],
    "local": ["heaviest_stage", "heaviest_stage_power_limit", "optimal_heaviest_stage_power_limit"],
}
PERSEUS_PL_FILE = re.compile(r"(?P<gpu>A40|A100)_zeus_(?P<mode>global|local)\.csv")
PERSEUS_PL_GPUS = {"A40": "A40", "A100": "A100_PCIe"}  # kronos README node list: A100-80G PCIe
MAX_STAGES = 64


def perseus_power_limit(root: Path, source: str) -> SweepRead:
    out = SweepRead()
    for f in globbed(root, "*_zeus_*.csv", "Perseus Zeus power-limit baselines"):
        m = PERSEUS_PL_FILE.fullmatch(f.name)
        if not m:
            raise OpcostError(f"{f}: expected a name <A40|A100>_zeus_<global|local>.csv")
        device, mode = PERSEUS_PL_GPUS[m.group("gpu")], m.group("mode")

        def rows_of(line: Line, rec: dict[str, str], device: str = device, mode: str = mode) -> list[dict[str, Any]]:
            dp, tp, pp = whole(rec, "dp"), whole(rec, "tp"), whole(rec, "pp")
            if not (1 <= dp <= 4096 and 1 <= tp <= 4096 and 1 <= pp <= MAX_STAGES):
                raise LineError("out_of_range", f"dp, tp, pp = {dp}, {tp}, {pp}: expected 1..4096 and pp <= 64")
            limits = _stage_limits(rec, pp)
            t, e = positive(rec, "time"), number(rec, "energy")
            gpus = dp * tp * pp
            if mode == "global":
                if len(set(limits)) != 1:
                    raise LineError("bad_value", f"zeus_global row with different stage limits {limits}")
                value = limits[0]
                extra = {"optimal_power_limit_w": number(rec, "optimal_power_limit")}
            else:
                heaviest = whole(rec, "heaviest_stage")
                value = number(rec, "heaviest_stage_power_limit")
                if not 0 <= heaviest < pp or limits[heaviest] != value:
                    raise LineError(
                        "bad_value",
                        f"heaviest_stage {heaviest} with limit {value} W does not match the stage limits {limits}",
                    )
                extra = {
                    "heaviest_stage": heaviest,
                    "optimal_heaviest_stage_power_limit_w": number(rec, "optimal_heaviest_stage_power_limit"),
                }
            bs = whole(rec, "batch_size")
            partition = rec["partition_method"].strip()
            if not partition or "/" in partition:
                raise LineError("bad_value", f"partition_method = {rec['partition_method']!r}")
            workload = f"{text(rec, 'model_name')}/bs{bs}/dp{dp}-tp{tp}-pp{pp}/{partition}/zeus_{mode}"
            detail = {
                "unit": "training iteration; energy_j and power_w per GPU (iteration energy / GPUs)",
                "gpus": gpus,
                "iteration_energy_j": e,
                "stage_power_limits_w": limits,
                "partition_method": partition,
                "microbatch_size": whole(rec, "microbatch_size"),
                "num_microbatches": whole(rec, "num_microbatches"),
                "mode": mode,
                **extra,
            }
            return [
                sweep_row(
                    source,
                    device,
                    workload,
                    "power_limit_w",
                    value,
                    t,
                    detail,
                    energy_j=e / gpus,
                    power_w=e / t / gpus,
                    power_limit_w=value,
                )
            ]

        read_sweep_file(f, f.name, PERSEUS_PL_COMMON + PERSEUS_PL_MODES[mode], rows_of, out)
    return out


def _stage_limits(rec: dict[str, str], pp: int) -> list[float]:
    """The power limits of the pp stages; columns for stages >= pp must be absent or 0.0 (no such
    stage), columns for existing stages present and > 0."""
    limits = []
    for i in range(MAX_STAGES):
        col = f"power_limit_{i}"
        if col not in rec:
            if i < pp:
                raise LineError("value_count", f"pp = {pp} but the file has no {col} column")
            break
        v = number(rec, col)
        if i < pp:
            if v <= 0:
                raise LineError("out_of_range", f"{col} = {v} for a stage that exists (pp = {pp}); must be > 0 W")
            limits.append(v)
        elif v != 0:
            raise LineError("bad_value", f"{col} = {v} for a stage beyond pp = {pp}; expected 0.0 (no such stage)")
    return limits


# --------------------------------------------------------------------------------------------
# nv-dvfs-kernels
# --------------------------------------------------------------------------------------------

NV_DVFS_COLUMNS = ["benchmark", "kernel", "argNo", "core_frequency", "memory_frequency", "time", "average_power"]
DCGM_COLUMNS = {
    "SMACT": "sm_active",
    "SMOCC": "sm_occupancy",
    "TENSO": "tensor_active",
    "DRAMA": "dram_active",
    "FP64A": "fp64_active",
    "FP32A": "fp32_active",
    "FP16A": "fp16_active",
}
NV_DVFS_NAMED = set(NV_DVFS_COLUMNS) | set(DCGM_COLUMNS)  # every other column is a PTX count
NV_DVFS_FILE = re.compile(r"(?P<gpu>[a-z0-9]+)-dvfs-real\.csv")
NV_DVFS_GPUS = {"v100": "V100", "rtx8000": "RTX8000"}


def nv_dvfs(root: Path, source: str) -> SweepRead:
    out = SweepRead()
    for f in globbed(root, "*-dvfs-real.csv", "NV-DVFS kernel sweeps"):
        m = NV_DVFS_FILE.fullmatch(f.name)
        if not m or m.group("gpu") not in NV_DVFS_GPUS:
            raise OpcostError(f"{f}: expected a name <gpu>-dvfs-real.csv with gpu one of {', '.join(NV_DVFS_GPUS)}")
        device = NV_DVFS_GPUS[m.group("gpu")]

        def rows_of(line: Line, rec: dict[str, str], device: str = device) -> list[dict[str, Any]]:
            core, mem = number(rec, "core_frequency"), number(rec, "memory_frequency")
            t = number(rec, "time") / 1000  # ms
            p = number(rec, "average_power")
            dcgm = {col: number(rec, name) for name, col in DCGM_COLUMNS.items()}
            ptx = {k: number(rec, k) for k in sorted(rec) if k not in NV_DVFS_NAMED}
            detail = {
                "unit": "kernel call (the benchmark's reported average time)",
                "arg": rec["argNo"].strip(),
                "ptx_counts": {k: int(v) if v.is_integer() else v for k, v in ptx.items() if v != 0},
            }
            return [
                sweep_row(
                    source,
                    device,
                    f"{text(rec, 'benchmark')}/{text(rec, 'kernel')}",
                    "core_clock_mhz",
                    core,
                    t,
                    detail,
                    power_w=p,
                    energy_j=t * p,
                    core_clock_mhz=core,
                    mem_clock_mhz=mem,
                    **dcgm,
                )
            ]

        read_sweep_file(f, f.name, NV_DVFS_COLUMNS + list(DCGM_COLUMNS), rows_of, out)
    return out


# --------------------------------------------------------------------------------------------
# gpu-frequency-dvfs
# --------------------------------------------------------------------------------------------

GPU_FREQ_FILE = "aggregated_all_kernels_effective.csv"
GPU_FREQ_DEVICE = "RTX3080Ti"
GPU_FREQ_COLUMNS = [
    "workload",
    "kernel",
    "requested_core_clock",
    "requested_mem_clock",
    "is_auto_baseline",
    "applied_core_clock",
    "applied_mem_clock",
    "n",
    "measured_launches_mean",
    "avg_power_mean_W",
    "time_per_launch_mean_ms",
    "energy_per_launch_mean_mJ",
    "requested_core_clock_original",
    "requested_pairs_merged",
]


def gpu_frequency(root: Path, source: str) -> SweepRead:
    out = SweepRead()
    if root.exists() and not root.is_dir():
        raise OpcostError(f"{root} is a file; expected the folder holding {GPU_FREQ_FILE}")
    path = root / GPU_FREQ_FILE

    def rows_of(line: Line, rec: dict[str, str]) -> list[dict[str, Any]]:
        auto = rec["is_auto_baseline"].strip()
        if auto not in ("0", "1"):
            raise LineError("bad_value", f"is_auto_baseline = {rec['is_auto_baseline']!r}, expected 0 or 1")
        app = f"{text(rec, 'workload')}/{text(rec, 'kernel')}"
        t = number(rec, "time_per_launch_mean_ms") / 1000
        e = number(rec, "energy_per_launch_mean_mJ") / 1000
        p = number(rec, "avg_power_mean_W")
        launches = number(rec, "measured_launches_mean")
        if launches < 1:
            raise LineError("out_of_range", f"measured_launches_mean = {launches}, expected >= 1")
        detail: dict[str, Any] = {"unit": "kernel launch", "launches": launches, "pairs_merged": whole(rec, "n")}
        if auto == "1":
            if (rec["requested_core_clock"].strip(), rec["requested_mem_clock"].strip()) != ("auto", "auto"):
                raise LineError("bad_value", "is_auto_baseline = 1 on a row with requested clocks")
            detail.update(
                setting="auto (unlocked default clocks; the run clocks are unknown)",
                recorded_core_clock_mhz=number(rec, "applied_core_clock"),
                recorded_mem_clock_mhz=number(rec, "applied_mem_clock"),
            )
            return [
                sweep_row(
                    source,
                    GPU_FREQ_DEVICE,
                    f"{app}@default",
                    "core_clock_mhz",
                    None,
                    t,
                    detail,
                    default_setting=True,
                    power_w=p,
                    energy_j=e,
                )
            ]
        core, mem = number(rec, "applied_core_clock"), number(rec, "applied_mem_clock")
        requested_core = whole(rec, "requested_core_clock_original")
        detail.update(
            requested_core_clock_mhz=requested_core,
            requested_pairs=rec["requested_pairs_merged"].strip(),
        )
        common = dict(power_w=p, energy_j=e, core_clock_mhz=core, mem_clock_mhz=mem)
        return [
            sweep_row(source, GPU_FREQ_DEVICE, f"{app}@mem{mem:g}", "core_clock_mhz", core, t, detail, **common),
            sweep_row(source, GPU_FREQ_DEVICE, f"{app}@core{core:g}", "mem_clock_mhz", mem, t, detail, **common),
        ]

    read_sweep_file(path, path.name, GPU_FREQ_COLUMNS, rows_of, out)
    out.info["default_setting_rows"] = sum(1 for r in out.rows if r["default_setting"])
    return out
