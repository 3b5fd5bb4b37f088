"""Knob sweeps: time, energy and energy-delay product against the knob, and where they are optimal.

For each (source, device, workload, knob) of the sweeps table: values normalised to the reference
setting (the highest power limit or clock measured: what a card runs at when nobody changes it),
the energy-optimal and EDP-optimal settings, the energy saved and the time lost there against the
reference, and whether the optimum sits at the edge of the measured range (then the true optimum
may lie outside it).
"""

from __future__ import annotations

import pandas as pd


def normalised(sweeps: pd.DataFrame) -> pd.DataFrame:
    """Long table with time, energy and EDP relative to each workload's reference (max) setting."""
    df = sweeps.dropna(subset=["energy_j"]).copy()
    df["edp"] = df["energy_j"] * df["time_s"]
    keys = ["source", "device", "workload", "knob"]
    ref_idx = df.groupby(keys)["value"].idxmax()
    ref = df.loc[ref_idx, keys + ["time_s", "energy_j", "edp"]].rename(
        columns={"time_s": "ref_time", "energy_j": "ref_energy", "edp": "ref_edp"}
    )
    df = df.merge(ref, on=keys)
    df["time_rel"] = df["time_s"] / df["ref_time"]
    df["energy_rel"] = df["energy_j"] / df["ref_energy"]
    df["edp_rel"] = df["edp"] / df["ref_edp"]
    return df.drop(columns=["ref_time", "ref_energy", "ref_edp"]).sort_values(keys + ["value"], ignore_index=True)


def optima(norm: pd.DataFrame) -> pd.DataFrame:
    """One row per workload: energy- and EDP-optimal settings and what they save and cost."""
    rows = []
    for (src, dev, wl, knob), g in norm.groupby(["source", "device", "workload", "knob"], sort=True):
        g = g.sort_values("value")
        lo, hi = g["value"].min(), g["value"].max()
        e_opt = g.loc[g["energy_j"].idxmin()]
        d_opt = g.loc[g["edp"].idxmin()]
        rows.append(
            {
                "source": src,
                "device": dev,
                "workload": wl,
                "knob": knob,
                "settings": int(len(g)),
                "min_value": lo,
                "reference_value": hi,
                "energy_optimal_value": e_opt["value"],
                "energy_saved": 1 - e_opt["energy_rel"],
                "time_lost_at_energy_optimum": e_opt["time_rel"] - 1,
                "energy_optimum_at_edge": bool(e_opt["value"] in (lo, hi)),
                "edp_optimal_value": d_opt["value"],
                "energy_saved_at_edp_optimum": 1 - d_opt["energy_rel"],
                "time_lost_at_edp_optimum": d_opt["time_rel"] - 1,
                "edp_optimum_at_edge": bool(d_opt["value"] in (lo, hi)),
            }
        )
    return pd.DataFrame(rows)


def optima_summary(opt: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Per source, device and knob: how many workloads, median savings, how many optima at an edge."""
    out = {}
    for (src, dev, knob), g in opt.groupby(["source", "device", "knob"]):
        out[f"{src}/{dev}/{knob}"] = {
            "workloads": int(len(g)),
            "median_energy_saved_pct": float(100 * g["energy_saved"].median()),
            "median_time_lost_at_energy_optimum_pct": float(100 * g["time_lost_at_energy_optimum"].median()),
            "energy_optima_at_edge": int(g["energy_optimum_at_edge"].sum()),
            "edp_optima_at_edge": int(g["edp_optimum_at_edge"].sum()),
        }
    return out


def grid_optima(sweeps_df: pd.DataFrame) -> pd.DataFrame:
    """Joint optimum over a core x memory clock grid (sources that swept both), per workload.

    A grid measurement appears once per knob in the sweeps table; the core-clock rows alone hold
    every grid point once, with the workload named `<app>@mem<clock>`. A workload measured at one
    memory clock only (nv-dvfs-kernels) is no grid. The reference is the highest core clock at the
    highest memory clock: a grid need not be rectangular (gpu-frequency-dvfs ran 2100 MHz requests
    at 1905-1965 MHz depending on the memory clock).
    """
    g = (
        sweeps_df[(sweeps_df["knob"] == "core_clock_mhz") & sweeps_df["mem_clock_mhz"].notna()]
        .dropna(subset=["energy_j"])
        .copy()
    )
    if g.empty:
        return pd.DataFrame()
    g["app"] = g["workload"].str.rsplit("@", n=1).str[0]
    g["edp"] = g["energy_j"] * g["time_s"]
    rows = []
    for (src, dev, app), w in g.groupby(["source", "device", "app"], sort=True):
        if w["mem_clock_mhz"].nunique() < 2:
            continue
        top_mem = w[w["mem_clock_mhz"].eq(w["mem_clock_mhz"].max())]
        ref = top_mem.loc[top_mem["core_clock_mhz"].idxmax()]
        e, d = w.loc[w["energy_j"].idxmin()], w.loc[w["edp"].idxmin()]

        def edge(r: pd.Series, w: pd.DataFrame = w) -> bool:
            return bool(
                r["core_clock_mhz"] in (w["core_clock_mhz"].min(), w["core_clock_mhz"].max())
                or r["mem_clock_mhz"] in (w["mem_clock_mhz"].min(), w["mem_clock_mhz"].max())
            )

        rows.append(
            {
                "source": src,
                "device": dev,
                "workload": app,
                "grid_points": int(len(w)),
                "reference_core_mhz": ref["core_clock_mhz"],
                "reference_mem_mhz": ref["mem_clock_mhz"],
                "energy_optimal_core_mhz": e["core_clock_mhz"],
                "energy_optimal_mem_mhz": e["mem_clock_mhz"],
                "energy_saved": 1 - e["energy_j"] / ref["energy_j"],
                "time_lost_at_energy_optimum": e["time_s"] / ref["time_s"] - 1,
                "energy_optimum_at_edge": edge(e),
                "edp_optimal_core_mhz": d["core_clock_mhz"],
                "edp_optimal_mem_mhz": d["mem_clock_mhz"],
                "energy_saved_at_edp_optimum": 1 - d["energy_j"] / ref["energy_j"],
                "time_lost_at_edp_optimum": d["time_s"] / ref["time_s"] - 1,
                "edp_optimum_at_edge": edge(d),
            }
        )
    return pd.DataFrame(rows)
