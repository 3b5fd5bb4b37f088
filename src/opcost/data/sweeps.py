"""Knob sweeps from public sources -> the sweeps table.

zeus-power-limit: `summary_power_<gpu>.csv` (dataset, network, batch_size, optimizer, power_limit,
time_per_epoch, average_power): one workload per (dataset, network, batch size, optimizer), swept
over the power limit; energy per epoch = time x average power.
dvfs-conv: `dvfs-conv.csv` (appName, coreF, memF, argNo, time/us, power/W, GFLOPS, GFLOPS/W): a
core x memory clock grid. The long table gets each measurement twice: once in the core-clock sweep
at its memory clock, once in the memory-clock sweep at its core clock, so every workload is a
one-knob sweep.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from opcost.errors import OpcostError

ZEUS_COLUMNS = ["dataset", "network", "batch_size", "optimizer", "power_limit", "time_per_epoch", "average_power"]
DVFS_COLUMNS = ["appName", "coreF", "memF", "argNo", "time/us", "power/W", "GFLOPS", "GFLOPS/W"]


def _read_csv(path: Path, columns: list[str]) -> pd.DataFrame:
    df = pd.read_csv(path)
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise OpcostError(f"{path}: missing column(s) {', '.join(missing)}; expected {', '.join(columns)}")
    return df


def zeus(root: Path, source: str) -> tuple[pd.DataFrame, dict]:
    files = sorted(root.glob("summary_power_*.csv"))
    if not files:
        raise OpcostError(f"no summary_power_<gpu>.csv under {root}: run `dvc pull`")
    frames, counts = [], {}
    for f in files:
        df = _read_csv(f, ZEUS_COLUMNS)
        gpu = f.stem.removeprefix("summary_power_").upper()
        out = pd.DataFrame(
            {
                "source": source,
                "device": gpu,
                "workload": df["dataset"]
                + "/"
                + df["network"]
                + "/bs"
                + df["batch_size"].astype(str)
                + "/"
                + df["optimizer"],
                "knob": "power_limit_w",
                "value": df["power_limit"].astype(float),
                "time_s": df["time_per_epoch"].astype(float),
                "power_w": df["average_power"].astype(float),
                "energy_j": df["time_per_epoch"].astype(float) * df["average_power"].astype(float),
                "core_clock_mhz": None,
                "mem_clock_mhz": None,
                "power_limit_w": df["power_limit"].astype(float),
                "detail": [json.dumps({"unit": "epoch"})] * len(df),
            }
        )
        frames.append(out)
        counts[f.name] = len(df)
    return pd.concat(frames, ignore_index=True), {"rows_per_file": counts}


def dvfs(root: Path, source: str) -> tuple[pd.DataFrame, dict]:
    path = root / "dvfs-conv.csv"
    if not path.is_file():
        raise OpcostError(f"{path} not found: run `dvc pull`")
    df = _read_csv(path, DVFS_COLUMNS)
    t = df["time/us"].astype(float) * 1e-6
    p = df["power/W"].astype(float)
    app = df["appName"] + "/" + df["argNo"]
    detail = [
        json.dumps({"gflops": g, "gflops_per_w": gw, "unit": "call"}) for g, gw in zip(df["GFLOPS"], df["GFLOPS/W"])
    ]
    common = {
        "source": source,
        "device": "unnamed Maxwell/Pascal GPU (dvfs-conv)",
        "time_s": t,
        "power_w": p,
        "energy_j": t * p,
        "core_clock_mhz": df["coreF"].astype(float),
        "mem_clock_mhz": df["memF"].astype(float),
        "power_limit_w": None,
        "detail": detail,
    }
    core = pd.DataFrame(
        {
            **common,
            "workload": app + "@mem" + df["memF"].astype(str),
            "knob": "core_clock_mhz",
            "value": df["coreF"].astype(float),
        }
    )
    mem = pd.DataFrame(
        {
            **common,
            "workload": app + "@core" + df["coreF"].astype(str),
            "knob": "mem_clock_mhz",
            "value": df["memF"].astype(float),
        }
    )
    return pd.concat([core, mem], ignore_index=True), {"rows_per_file": {path.name: len(df)}}
