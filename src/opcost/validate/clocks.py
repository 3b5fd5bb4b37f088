"""Clock sweeps in the validate report: the transferred clock model's leave-one-GPU-out results
(from train-clock's tables) and predicted clock sweeps of the thesis' model-input sets.

For every extract set (the thesis' 18 inference and 26 training networks by default) and each of
the A30 and the RTX 2080 Ti, the network is predicted across a grid of the device's supported core
clocks (params clock.grid_points, the boost clock included) with the clock model where the bundle
was trained at the default clock only, and the energy- and EDP-optimal clock is read off the grid.
These are predictions, not measurements: nobody measured these networks across clocks on these GPUs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from opcost.devices import device_config
from opcost.model.composition.costing import TRANSFERRED
from opcost.model.prediction.answer import Request
from opcost.params.load import Params
from opcost.paths import Paths

SWEEP_DEVICES = ("A30", "RTX2080Ti")


def predicted_sweeps(paths: Paths, params: Params, predictor: Any) -> pd.DataFrame:
    """One row per (set, mode, device config, clock) with predicted time, energy and EDP; empty when
    no clock model or no bundle for these devices is there."""
    rows = []
    for mode in ("inference", "training"):
        # the image networks of the sweeps; a user's network (module:callable, N-D input) is not swept here
        sets = [s for s in params.extract.sets if mode in s.modes and not s.is_user]
        for device in SWEEP_DEVICES:
            if f"{device}-{mode}" not in predictor.targets() or not sets:
                continue
            clocks = [c for c in predictor.sweep_clocks(device, mode) if c is not None]
            if not clocks:
                continue
            pairs, preds = [], []
            for dtype in sorted({s.dtype for s in sets}):  # one costing per dtype, device and clock
                these = [(s, c) for s in sets if s.dtype == dtype for c in clocks]
                reqs = [Request(s.model, ",".join(map(str, s.input_shape)), device, mode, c) for s, c in these]
                pairs += these
                preds += predictor.predict_many(reqs, dtype)
            for (s, c), p in zip(pairs, preds):
                rows.append(
                    {
                        "set_id": s.set_id,
                        "mode": mode,
                        "device_config": device,
                        "clock_mhz": c,
                        "clock_source": p.clock_source,
                        "time_s": p.time_s,
                        "energy_j": p.energy_j,
                        "edp_js": None if p.energy_j is None else p.energy_j * p.time_s,
                    }
                )
    return pd.DataFrame(rows)


def optima_source(*sources: str | None) -> str | None:
    """Where the optima's clock behaviour came from: `transferred` when either optimum sits at a clock the
    cross-clock model answered (the boost clock's own source said nothing about a clock below it)."""
    return TRANSFERRED if TRANSFERRED in sources else next((s for s in sources if s), None)


def optima(sw: pd.DataFrame) -> pd.DataFrame:
    """Per set, mode and device: the energy- and EDP-optimal clock of the predicted sweep, and what it
    saves and costs against the boost clock (the reference the default-clock models stand for)."""
    rows = []
    for (set_id, mode, device), g in sw.dropna(subset=["energy_j"]).groupby(["set_id", "mode", "device_config"]):
        boost = device_config(device)[0].boost_clock_mhz  # a sweep device is a table GPU (SWEEP_DEVICES)
        ref = g[g["clock_mhz"] == boost].iloc[0]
        e, d = g.loc[g["energy_j"].idxmin()], g.loc[g["edp_js"].idxmin()]
        rows.append(
            {
                "set_id": set_id,
                "mode": mode,
                "device_config": device,
                "clock_source": optima_source(e["clock_source"], d["clock_source"]),
                "energy_optimal_mhz": e["clock_mhz"],
                "energy_saved_pct": 100 * (1 - e["energy_j"] / ref["energy_j"]),
                "slowdown_at_energy_optimum": e["time_s"] / ref["time_s"],
                "edp_optimal_mhz": d["clock_mhz"],
                "edp_saved_pct": 100 * (1 - d["edp_js"] / ref["edp_js"]),
            }
        )
    return pd.DataFrame(rows)


def fig_predicted_sweeps(sw: pd.DataFrame, path: Path, figures: list[Path]) -> None:
    """Energy relative to the boost clock against the clock, one line per set; a panel per device and mode."""
    from opcost.validate.report import _plt, _save

    plt = _plt()
    panels = sorted(sw.dropna(subset=["energy_j"]).groupby(["device_config", "mode"]).groups)
    if not panels:
        return
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.6), squeeze=False)
    for ax, (device, mode) in zip(axes[0], panels):
        g = sw[(sw["device_config"] == device) & (sw["mode"] == mode)]
        boost = device_config(device)[0].boost_clock_mhz
        for _, c in g.groupby("set_id"):
            c = c.sort_values("clock_mhz")
            ref = float(c.loc[c["clock_mhz"] == boost, "energy_j"].iloc[0])
            ax.plot(c["clock_mhz"], c["energy_j"] / ref, lw=0.8, alpha=0.7)
        ax.axvline(boost, color="grey", lw=0.8, ls="--")
        ax.set_title(f"{device} {mode} ({g['set_id'].nunique()} sets)", fontsize=9)
        ax.set_xlabel("core clock [MHz]")
        ax.set_ylabel("predicted energy / energy at boost")
    fig.suptitle("Predicted energy across core clocks (transferred clock model)", fontsize=9)
    _save(fig, path, figures)


def logo_table(paths: Paths) -> pd.DataFrame:
    """train-clock's leave-one-GPU-out summary of the shipped (physical) form, if there."""
    f = paths.clock_table("logo")
    if not f.is_file():
        return pd.DataFrame()
    df = pd.read_csv(f)
    return df[df["learner"] == "physical"].reset_index(drop=True)


def index_lines(logo: pd.DataFrame, opt: pd.DataFrame) -> list[str]:
    """The clock section's summary tables for reports/index.md."""
    lines: list[str] = []
    if len(logo):
        lines += [
            "",
            "## Clock model (leave-one-GPU-out)",
            "",
            "Each GPU predicted by a clock model fitted on the other GPUs, from each curve's highest-clock point "
            "only (stage train-clock; goals: time and energy MAPE <= 5 %, extra energy at the predicted "
            "optimum <= 2 %).",
            "",
            "| GPU | source | curves | time MAPE % | energy MAPE % | extra energy at predicted optimum % (max) "
            "| extra EDP % |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in logo.itertuples():
            lines.append(
                f"| {r.device} | {r.source} | {r.curves} | {r.time_mape:.1f} | {r.energy_mape:.1f} | "
                f"{r.extra_energy_mean:.1f} ({r.extra_energy_max:.1f}) | {r.extra_edp_mean:.1f} |"
            )
    if len(opt):
        lines += [
            "",
            "## Predicted clock optima of the thesis sets",
            "",
            "Predictions (transferred clock model), not measurements. Median over the sets.",
            "",
            "| device, mode | sets | energy-optimal clock MHz | energy saved vs boost % | slowdown there "
            "| EDP-optimal clock MHz |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for (device, mode), g in opt.groupby(["device_config", "mode"]):
            lines.append(
                f"| {device} {mode} | {len(g)} | {np.median(g['energy_optimal_mhz']):.0f} | "
                f"{np.median(g['energy_saved_pct']):.1f} | {np.median(g['slowdown_at_energy_optimum']):.2f} | "
                f"{np.median(g['edp_optimal_mhz']):.0f} |"
            )
    return lines
