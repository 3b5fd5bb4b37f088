"""Stage `views`: what `dvc metrics show` and `dvc plots show` print, sized for a terminal and offline.

Why a stage of its own: every stage's figures are many (per target, per GPU, per split), and DVC
prints every scalar of every `metrics:` file as a column: 136 columns and 5 499 characters once.
The stages keep their detail in plain JSON (reports/train/metrics.json, reports/clock/metrics.json,
reports/validate/metrics.json, declared as outputs, not metrics), and this stage condenses them into
reports/metrics.json: eight out-of-sample figures a user compares between experiments, each the
median over train targets or the pooled figure (the worst target beside the network one).

`dvc plots show` renders Vega plots with scripts from a CDN, blank offline; image plots are shown as
<img> with nothing to load. So the plots are PNGs drawn here with matplotlib (pinned by the project):
predicted vs measured networks with a y = x line and a colour per model family, summed ops vs
measured networks the same way, and the clock and power-limit sweeps, one line per GPU with a legend.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from opcost.io import atomic_path, write_report
from opcost.params.load import Params
from opcost.paths import Paths
from opcost.stages._run import execute
from opcost.validate import goals

HEADLINE_KEYS = (
    "net_t_mape", "net_e_mape", "net_t_max", "op_t_twe", "clk_t", "clk_e", "xd_net", "xd_mm",
)  # fmt: skip
# The GEMM-like op kinds of the cross-device model (model/crossdevice/xdevice.GEMM_XKINDS; a test keeps them equal):
# named here so that this stage does not import the model's training code.
GEMM_KINDS = ("bmm", "conv", "linear")


def _read(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.is_file() else {}


def _median(values: list[float]) -> float | None:
    v = [float(x) for x in values if x is not None]
    return statistics.median(v) if v else None


def headline(paths: Paths) -> dict[str, float | None]:
    """Eight headline figures, all out of sample, in percent to 0.1 (None where the stage has not run):
    networks left out one at a time (time and energy MAPE, median over targets; time's worst target),
    the chosen op time model's grouped time-weighted error (median over targets), the clock
    model's leave-one-GPU-out pooled time and energy MAPE, and the cross-device model's
    leave-one-GPU-out network time MAPE and GEMM-like op time MAPE."""
    train = _read(paths.train_metrics())
    net_t = [t.get("networks", {}).get("time_mape_pct") for t in train.values()]
    net_e = [t.get("networks", {}).get("energy_mape_pct") for t in train.values()]
    op_twe = [t.get("time", {}).get("twe_pct") for t in train.values()]
    clock = _read(paths.clock_metrics).get("logo_pooled_pct", {})
    xd = _read(paths.xdevice_metrics)
    gemm = [xd.get("ops", {}).get(k, {}) for k in GEMM_KINDS]
    gemm = [(g["mape"], g["n"]) for g in gemm if g.get("mape") is not None and g.get("n")]
    worst = [x for x in net_t if x is not None]
    head = {
        "net_t_mape": _median(net_t),
        "net_e_mape": _median(net_e),
        "net_t_max": max(worst) if worst else None,
        "op_t_twe": _median(op_twe),
        "clk_t": clock.get("time"),
        "clk_e": clock.get("energy"),
        # the cross-device model, leave-one-GPU-out: network time MAPE over every network (NeuSight configs
        # and thesis networks), and op time MAPE of the GEMM-like kinds (matmul: linear, bmm, conv) pooled
        "xd_net": xd.get("networks", {}).get("all", {}).get("mape"),
        "xd_mm": sum(m * n for m, n in gemm) / sum(n for _, n in gemm) if gemm else None,
    }
    # 0.1 percentage point is what a comparison between experiments reads; ten digits would widen
    # `dvc metrics show` past a terminal (the detail files keep every digit)
    return {k: None if v is None else round(float(v), 1) for k, v in head.items()}


def _save(fig: Any, target: Path) -> None:
    import matplotlib.pyplot as plt

    with atomic_path(target) as tmp:
        fig.savefig(tmp, format="png", dpi=110, metadata={"Software": None})  # no version stamp: stable bytes
    plt.close(fig)


def scatter(df: Any, x: str, y: str, colour: str, title: str, unit: str, target: Path) -> None:
    """Predicted (or summed) against measured, log-log, one colour per `colour` value, and y = x."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 5.2))
    d = df[(df[x] > 0) & (df[y] > 0)]
    cmap = plt.get_cmap("tab20")  # the dark shades first, then the light ones: neighbours differ in hue
    for i, (name, g) in enumerate(sorted(d.groupby(colour), key=lambda kv: str(kv[0]))):
        ax.scatter(g[x], g[y], s=14, alpha=0.75, label=str(name), color=cmap((2 * i) % 20 + (2 * i // 20) % 2))
    if len(d):
        lo, hi = float(min(d[x].min(), d[y].min())), float(max(d[x].max(), d[y].max()))
        ax.plot([lo, hi], [lo, hi], color="black", lw=1, ls="--", label="y = x")
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel(f"measured [{unit}]")
    ax.set_ylabel(f"{y.split('_')[0]} [{unit}]")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=6, ncol=2, loc="upper left")
    fig.tight_layout()
    _save(fig, target)


SWEEP_Y = "energy_rel"  # validate's sweep tables: energy over the energy at the highest setting of its curve
SWEEP_Y_LABEL = "energy / energy at the highest setting"
SWEEP_KNOBS = {  # knob column -> the axis in words, with its unit
    "power_limit_w": "power limit [W]",
    "core_clock_mhz": "core clock [MHz]",
    "mem_clock_mhz": "memory clock [MHz]",
}


def sweep_series(df: Any, x: str, y: str = SWEEP_Y) -> Any:
    """One series per GPU of a sweep table (validate's sweeps_<knob>.csv: one curve per source, device and
    workload): at each setting x of the GPU's curves, the median and quartiles of y over its workloads, each
    workload's curve interpolated linearly at the settings inside its own range (curves of one GPU are swept
    over different grids: Perseus' stages, Zeus' and Perseus' power limits on the A40). Columns: device, x,
    median, q25, q75, workloads (how many curves reach x), sources. Why: the tables hold up to 477 curves a
    knob; one line each was an unreadable, unlabelled bundle (RTX 3080 Ti alone: 325 kernels)."""
    import numpy as np
    import pandas as pd

    rows = []
    for dev, d in df.dropna(subset=[x, y]).groupby("device", sort=True):
        grid = np.sort(d[x].unique().astype(float))
        curves = []
        for _, c in d.groupby(["source", "workload"], sort=True):
            c = c.groupby(x, as_index=False)[y].median().sort_values(x)
            cx, cy = c[x].to_numpy(float), c[y].to_numpy(float)
            inside = (grid >= cx[0]) & (grid <= cx[-1])
            curves.append(np.where(inside, np.interp(grid, cx, cy), np.nan))
        m = np.vstack(curves)
        n = np.isfinite(m).sum(axis=0)
        with np.errstate(all="ignore"):
            q25, med, q75 = (np.nanquantile(m, q, axis=0) for q in (0.25, 0.5, 0.75))
        src = ", ".join(sorted(d["source"].astype(str).unique()))
        rows += [{"device": str(dev), "x": float(g), "median": float(a), "q25": float(b), "q75": float(c2),
                  "workloads": int(k), "sources": src}
                 for g, a, b, c2, k in zip(grid, med, q25, q75, n) if k]  # fmt: skip
    return pd.DataFrame(rows, columns=["device", "x", "median", "q25", "q75", "workloads", "sources"])


def sweep_figure(df: Any, x: str, title: str) -> Any:
    """The sweep of knob `x` as one line per GPU (`sweep_series`: the median over its workloads, the band their
    quartiles), a legend naming each GPU, its curves and sources, and both axes in words with units."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = sweep_series(df, x)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    cmap = plt.get_cmap("tab10")
    for i, (dev, g) in enumerate(series.groupby("device", sort=True)):
        curves = int(df.loc[df["device"] == dev].groupby(["source", "workload"]).ngroups)
        colour = cmap(i % 10)
        ax.plot(g["x"], g["median"], "o-", ms=3, lw=1.5, color=colour,
                label=f"{dev}: median of {curves} curves ({g['sources'].iloc[0]})")  # fmt: skip
        ax.fill_between(g["x"], g["q25"], g["q75"], color=colour, alpha=0.15, lw=0)
    ax.axhline(1.0, color="grey", lw=0.8, ls=":")
    ax.set_xlabel(SWEEP_KNOBS.get(x, x))
    ax.set_ylabel(SWEEP_Y_LABEL)
    ax.set_title(title + "\n(one line per GPU: median over its workloads, band: 25-75 %)", fontsize=9)
    if len(series):
        ax.legend(fontsize=6, loc="best")
    fig.tight_layout()
    return fig


def lines(df: Any, x: str, title: str, target: Path) -> None:
    """`sweep_figure` saved as a PNG at `target`."""
    _save(sweep_figure(df, x, title), target)


def plots(paths: Paths) -> list[Path]:
    """Render the image plots from validate's tables into reports/plots/ (those whose table exists)."""
    import pandas as pd

    from opcost.ops.families import family_of

    out = paths.plots_dir
    out.mkdir(parents=True, exist_ok=True)
    made = []
    f = paths.validate_out_of_sample
    if f.is_file():
        df = pd.read_csv(f)
        target = out / "predicted_vs_measured.png"
        title = "Networks predicted out of sample vs measured, time per iteration\n(one network or family left out)"
        scatter(df, "measured_t_s", "predicted_t_s", "family", title, "s", target)
        made.append(target)
    f = paths.validate_summed
    if f.is_file():
        df = pd.read_csv(f)
        df["family"] = [family_of(str(m)) for m in df["model"]]
        target = out / "summed_vs_measured.png"
        title = "Sum of measured ops vs measured network, time per iteration"
        scatter(df, "measured_t_s", "summed_t_s", "family", title, "s", target)
        made.append(target)
    for knob, what in SWEEP_KNOBS.items():
        f = paths.validate_sweeps(knob)
        if f.is_file():
            target = out / f"sweeps_{knob}.png"
            lines(pd.read_csv(f), knob, f"Energy relative to the highest setting vs {what}", target)
            made.append(target)
    return made


def write_goals(paths: Paths) -> dict[str, Any]:
    """The accuracy goals table beside the headline (reports/goals.json and goals.md)."""
    table = goals.goals(goals.read_targets(paths.train_targets_dir), _read(paths.clock_metrics))
    write_report(table, paths.goals_json)
    with atomic_path(paths.goals_md) as tmp:
        tmp.write_text(goals.markdown(table))
    return table


def run(paths: Paths, params: Params) -> dict[str, Any]:
    head = headline(paths)
    write_report(head, paths.headline_metrics)
    table = write_goals(paths)
    made = plots(paths)
    return {"metrics": head, "plots": [p.name for p in made], "goals_met": [table["met"], table["rows_total"]]}


def summary(r: dict[str, Any]) -> str:
    shown = ", ".join(f"{k} {v:.1f}" for k, v in r["metrics"].items() if v is not None)
    met, total = r["goals_met"]
    return f"views: {shown}; {len(r['plots'])} plots; issue 21 goals met on {met} of {total} rows (reports/goals.md)"


def main(argv: list[str] | None = None) -> int:
    return execute(argv, __doc__.splitlines()[0], lambda p: None, lambda paths, params, a: run(paths, params), summary)


if __name__ == "__main__":
    sys.exit(main())
