"""The validate report (library of the `validate` stage): CSV tables (also DVC plots), figures (PNG),
reports/index.md.

Every figure has labelled axes with units, log scales where values span orders of magnitude, and
legends that name devices and modes; the same figures are logged to MLflow (experiment
`opcost-validate`). reports/index.md links each figure and table with a line saying what it shows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from opcost.io import atomic_path
from opcost.params.profile import SET_ID
from opcost.paths import Paths


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="paper")
    return plt


def _save(fig: Any, path: Path, figures: list[Path]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120, bbox_inches="tight")
    _plt().close(fig)
    figures.append(path)


def write_csv(df: pd.DataFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        df.to_csv(tmp, index=False, float_format="%.6g")


def _label(set_id: str) -> str:
    """An axis label: the model (a user's network by its callable and arguments) over the shape without
    the batch. Set ids are parsed by the one pattern campaigns check them with (params/profile.SET_ID):
    a user's `networks/recurrent.py:lstm(layers=2):8x64x32` holds colons of its own."""
    m = SET_ID.fullmatch(set_id)
    if m is None:
        return set_id
    model, shape = m.group("model"), m.group("shape")
    name = model.rsplit(":", 1)[-1] if ":" in model else model
    return f"{name}\n{shape.split('x', 1)[1] if 'x' in shape else shape}"


def fig_summed(df: pd.DataFrame, out: Path, figures: list[Path]) -> list[tuple[str, str]]:
    """Grouped bars, measured vs summed, per device config and mode; small and large sets apart."""
    plt = _plt()
    made = []
    for (dev, mode), g in df.groupby(["device_config", "mode"]):
        g = g.sort_values("measured_t_s")
        halves = (
            [("small", g.iloc[: (len(g) + 1) // 2]), ("large", g.iloc[(len(g) + 1) // 2 :])]
            if len(g) > 4
            else [("all", g)]
        )
        for size, h in halves:
            if h.empty:
                continue
            has_e = h["summed_e_j"].notna().any()
            fig, axes = plt.subplots(
                1, 2 if has_e else 1, figsize=(max(6, 0.9 * len(h)) * (2 if has_e else 1), 4.2), squeeze=False
            )
            x = np.arange(len(h))
            for ax, (q, unit, scale) in zip(
                axes[0], [("t", "time per iteration [ms]", 1e3), ("e", "energy per iteration [J]", 1.0)]
            ):
                ax.bar(
                    x - 0.2,
                    h[f"measured_{q}_s" if q == "t" else "measured_e_j"] * scale,
                    0.4,
                    yerr=h["measured_sigma_t_s" if q == "t" else "measured_sigma_e_j"] * scale,
                    label="measured network",
                )
                ax.bar(
                    x + 0.2,
                    h[f"summed_{q}_s" if q == "t" else "summed_e_j"] * scale,
                    0.4,
                    yerr=h["summed_sigma_t_s" if q == "t" else "summed_sigma_e_j"] * scale,
                    label="sum of measured ops x calls",
                )
                ax.set_xticks(x, [_label(s) for s in h["set_id"]], rotation=60, ha="right", fontsize=7)
                ax.set_ylabel(unit)
                ax.set_title(f"{dev}, {mode} ({size} sets): {'time' if q == 't' else 'energy'}")
                ax.legend(fontsize=7)
            fig.tight_layout()
            name = f"summed_vs_measured_{dev}-{mode}_{size}.png"
            _save(fig, out / name, figures)
            made.append(
                (
                    name,
                    f"{dev} {mode}, {size} sets: measured network vs sum of its measured ops "
                    "(error bars: propagated sigma)",
                )
            )
    return made


def fig_scatter(df: pd.DataFrame, x: str, y: str, title: str, path: Path, figures: list[Path]) -> None:
    plt = _plt()
    import seaborn as sns

    panels = [("time", f"{x}_t_s", f"{y}_t_s", "s")]
    if df[f"{y}_e_j"].notna().any():
        panels.append(("energy", f"{x}_e_j", f"{y}_e_j", "J"))
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.6), squeeze=False)
    d = df.assign(config=df["device_config"] + " " + df["mode"])
    for ax, (q, cx, cy, unit) in zip(axes[0], panels):
        sub = d.dropna(subset=[cx, cy])
        sns.scatterplot(data=sub, x=cx, y=cy, hue="config", ax=ax, s=28)
        lo, hi = sub[[cx, cy]].min().min(), sub[[cx, cy]].max().max()
        ax.plot([lo, hi], [lo, hi], color="grey", lw=1, label="y = x")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"measured network {q} per iteration [{unit}]")
        ax.set_ylabel(f"{y} {q} per iteration [{unit}]")
        ax.legend(fontsize=7, title="device config, mode")
    fig.suptitle(title)
    fig.tight_layout()
    _save(fig, path, figures)


def fig_out_of_sample(oos: pd.DataFrame, out: Path, figures: list[Path]) -> list[tuple[str, str]]:
    """Per device config and mode: predicted vs measured network time under both splits, and the
    leave-one-family-out error per family."""
    plt = _plt()
    made = []
    for target, g in oos.groupby("target"):
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.6))
        ax = axes[0]
        for split, marker in (("network", "o"), ("family", "^")):
            d = g[g["split"] == split]
            mape = 100 * (d["t_error"].abs().mean()) if len(d) else float("nan")
            ax.scatter(d["measured_t_s"], d["predicted_t_s"], marker=marker, s=30, alpha=0.7,
                       label=f"leave one {split} out (MAPE {mape:.1f} %)")  # fmt: skip
        lo = min(g["measured_t_s"].min(), g["predicted_t_s"].min())
        hi = max(g["measured_t_s"].max(), g["predicted_t_s"].max())
        ax.plot([lo, hi], [lo, hi], color="grey", lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("measured network time per iteration [s]")
        ax.set_ylabel("predicted (out of sample) [s]")
        ax.set_title(f"{target}: networks the models never saw")
        ax.legend(fontsize=7)
        fam = g[g["split"] == "family"].groupby("family")["t_error"].apply(lambda e: 100 * e.abs().mean())
        axes[1].bar(fam.index, fam.values, color="tab:orange")
        axes[1].set_ylabel("time MAPE, family held out [%]")
        axes[1].set_title("error by architecture family")
        axes[1].tick_params(axis="x", rotation=45)
        fig.tight_layout()
        name = f"out_of_sample_{target}.png"
        _save(fig, out / name, figures)
        made.append((name, f"{target}: predicted vs measured networks (both splits) and the error by family"))
    return made


def fig_kind_errors(kinds: pd.DataFrame, path: Path, figures: list[Path]) -> None:
    plt = _plt()
    import seaborn as sns

    d = kinds[kinds["quantity"] == "time"].assign(mape_pct=lambda x: 100 * x["mape"])
    fig, ax = plt.subplots(figsize=(max(7, 0.5 * d["kind"].nunique()), 4.5))
    sns.barplot(data=d, x="kind", y="mape_pct", hue="target", ax=ax)
    ax.set_yscale("log")
    ax.set_ylabel("time MAPE, grouped split [%] (log)")
    ax.set_xlabel("op kind")
    ax.tick_params(axis="x", rotation=60)
    ax.set_title("Op time models: out-of-fold error per kind")
    ax.legend(fontsize=7, title="device config, mode")
    fig.tight_layout()
    _save(fig, path, figures)


def fig_tensor_cores(tc: pd.DataFrame, path: Path, figures: list[Path]) -> None:
    plt = _plt()
    cols = [c for c in ("A30", "A30_no_tf32", "RTX2080Ti") if c in tc.columns]
    fig, ax = plt.subplots(figsize=(max(7, 0.8 * len(tc)), 4.5))
    x = np.arange(len(tc))
    w = 0.8 / len(cols)
    for i, c in enumerate(cols):
        ax.bar(x + (i - (len(cols) - 1) / 2) * w, tc[c], w, label=c.replace("_no_tf32", " (TF32 off)"))
    ax.set_yscale("log")
    ax.set_xticks(x, [_label(s) for s in tc["set_id"]], rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("energy per inference batch [J]")
    ax.set_title("Inference energy per network: A30 with and without TF32, RTX 2080 Ti")
    ax.legend(title="device config")
    fig.tight_layout()
    _save(fig, path, figures)


def fig_sweeps(norm: pd.DataFrame, opt: pd.DataFrame, out: Path, figures: list[Path]) -> list[tuple[str, str]]:
    plt = _plt()
    made = []
    units = {
        "power_limit_w": "power limit [W]",
        "core_clock_mhz": "core clock [MHz]",
        "mem_clock_mhz": "memory clock [MHz]",
    }
    for (src, dev, knob), g in norm.groupby(["source", "device", "knob"]):
        fig, axes = plt.subplots(1, 3, figsize=(14, 4.2), sharex=True)
        for _, w in g.groupby("workload"):
            for ax, col in zip(axes, ("time_rel", "energy_rel", "edp_rel")):
                ax.plot(w["value"], w[col], color="tab:blue", alpha=0.25, lw=1)
        med = g.groupby("value")[["time_rel", "energy_rel", "edp_rel"]].median()
        o = opt[(opt["source"] == src) & (opt["device"] == dev) & (opt["knob"] == knob)]
        for ax, col, label in zip(
            axes, ("time_rel", "energy_rel", "edp_rel"), ("time", "energy", "energy-delay product")
        ):
            ax.plot(med.index, med[col], color="black", lw=2, label="median over workloads")
            if col == "energy_rel":
                ax.hist(
                    o["energy_optimal_value"],
                    bins=20,
                    weights=np.full(len(o), 0.3 / max(len(o), 1)),
                    bottom=med[col].min() * 0.9,
                    color="tab:green",
                    alpha=0.4,
                    label="energy-optimal settings",
                )
            ax.set_xlabel(units.get(knob, knob))
            ax.set_ylabel(f"{label} relative to the highest setting")
            ax.legend(fontsize=7)
        fig.suptitle(
            f"{src}: {dev}, {len(o)} workloads (thin lines), normalised to the highest {units.get(knob, knob)}"
        )
        fig.tight_layout()
        name = f"sweep_{src}_{dev.split(' ')[0]}_{knob}.png".replace("/", "_")
        _save(fig, out / name, figures)
        made.append(
            (name, f"{src} on {dev}: time, energy and EDP against the {units.get(knob, knob)}, normalised per workload")
        )
    return made


def latency_table(bench: dict[str, Any], nets_ingested: pd.DataFrame) -> pd.DataFrame | None:
    """Thesis measurement time per network against the predictor's time (bench/predictor_latency.py)."""
    if nets_ingested.empty:
        return None
    per_pred = bench["warm_batched_s"]["median"] / bench["predictions_per_pass"]
    inf = nets_ingested[nets_ingested["mode"] == "inference"]
    rows = inf.groupby("device_config")["total_time_s"].agg(["median", "min", "max"]).reset_index()
    rows = rows.rename(
        columns={"median": "measurement_median_s", "min": "measurement_min_s", "max": "measurement_max_s"}
    )
    rows["predictor_warm_s"] = per_pred
    rows["predictor_cold_cached_s"] = bench["cold_process_cached_s"]["median"]
    rows["predictor_cold_uncached_s"] = bench["cold_process_uncached_s"]["median"]
    rows["speedup_warm"] = rows["measurement_median_s"] / per_pred
    rows["speedup_cold_uncached"] = rows["measurement_median_s"] / rows["predictor_cold_uncached_s"]
    return rows


def fig_latency(lat: pd.DataFrame, path: Path, figures: list[Path]) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4))
    labels = [f"measure one network\n({d}, thesis)" for d in lat["device_config"]]
    vals = list(lat["measurement_median_s"])
    labels += [
        "predict (warm,\nper network)",
        "predict (new process,\nnetwork cached)",
        "predict (new process,\nnew network)",
    ]
    vals += [
        lat["predictor_warm_s"].iloc[0],
        lat["predictor_cold_cached_s"].iloc[0],
        lat["predictor_cold_uncached_s"].iloc[0],
    ]
    ax.barh(labels, vals, color=["tab:orange"] * len(lat) + ["tab:blue"] * 3)
    ax.set_xscale("log")
    ax.set_xlabel("seconds (log scale)")
    ax.set_title("Predicting a network's cost vs measuring it")
    fig.tight_layout()
    _save(fig, path, figures)


def write_index(
    paths: Paths, index: list[tuple[str, str, str]], metrics: dict[str, Any], extra: list[str] | None = None
) -> None:
    lines = [
        "# opcost report",
        "",
        "Written by the `validate` stage (`dvc repro validate`). Numbers behind every figure are in the CSV",
        "tables beside it; `dvc plots show` renders the DVC plots; "
        "`dvc metrics show` lists the headline figures (reports/validate/metrics.json; all of them in detail.json).",
        "",
    ]
    lines += [
        "## Errors at a glance",
        "",
        "Whole networks. Out of sample: predicted by op models and a composition layer trained without the",
        "model at any input size (model left out), without its whole architecture family, or without that",
        "one (model, input size) network (stage train). Time error as MAPE, median APE and time-weighted",
        "(sum |error| / sum measured time). Issue 21's goals, at filing and now: [goals.md](goals.md).",
        "",
        "| comparison | device config, mode | networks | time MAPE % | time median % | time-weighted % "
        "| energy MAPE % |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]

    def pct(x: Any) -> str:
        return "n/a" if x is None else f"{x:.1f}"

    splits = (
        ("model", "predicted, model left out (every input size; the headline)"),
        ("family", "predicted, family left out"),
        ("network", "predicted, network left out (one input size)"),
    )
    for split, label in splits:
        for key, v in metrics.get("out_of_sample", {}).items():
            target, _, s = key.rpartition("/")
            if s != split or "time" not in v:
                continue
            t, e = v["time"], v.get("energy", {})
            lines.append(
                f"| {label} | {target} | {v['networks']} | {pct(t['mape_pct'])} | {pct(t['mdape_pct'])} "
                f"| {pct(t['weighted_pct'])} | {pct(e.get('mape_pct'))} |"
            )
    for comp, label in (
        ("summed_vs_measured", "sum of measured ops"),
        ("predicted_in_sample", "predicted, IN-SAMPLE (the models saw these ops and networks)"),
    ):
        for k, v in metrics[comp].items():
            lines.append(
                f"| {label} | {k} | {v['networks']} | {pct(v['time_mape_pct'])} | {pct(v.get('time_mdape_pct'))} "
                f"| {pct(v.get('time_weighted_pct'))} | {pct(v['energy_mape_pct'])} |"
            )
    lines += extra or []
    section = None
    for sec, link, what in index:
        if sec != section:
            lines += ["", f"## {sec}", ""]
            section = sec
        lines.append(f"- [{link}]({link}): {what}")
    with atomic_path(paths.report_index) as tmp:
        tmp.write_text("\n".join(lines) + "\n")


DETAIL_HASH_TAG = "detail_hash"  # md5 of reports/validate/detail.json: one validate run per content


def log_mlflow(paths: Paths, metrics: dict[str, Any], figures: list[Path], tags: dict[str, str] | None = None) -> None:
    """The validate run: its network errors as metrics and the report's figures as artifacts. Called by
    the stage, and by `opcost sync-registry` to replay a pulled report into a fresh store."""
    from opcost.model.records import tracking
    from opcost.model.store.registry import json_hash

    mlflow = tracking.setup(paths.root, experiment=tracking.VALIDATE_EXPERIMENT)
    all_tags = {tracking.STAGE_TAG: tracking.VALIDATE_RUN, **(tags or {})}
    if paths.validate_detail.is_file():
        all_tags[DETAIL_HASH_TAG] = json_hash(paths.validate_detail)
    with tracking.tracked_run(mlflow, tracking.VALIDATE_RUN, tags=all_tags):
        for comp in ("summed_vs_measured", "predicted_in_sample"):
            for k, v in metrics[comp].items():
                mlflow.log_metric(f"{comp}.{k}.time_mape_pct", v["time_mape_pct"])
                if v["energy_mape_pct"] is not None:
                    mlflow.log_metric(f"{comp}.{k}.energy_mape_pct", v["energy_mape_pct"])
        xdev = metrics.get("xdevice", {})
        for gpu, v in xdev.get("energy_logo", {}).items():
            mlflow.log_metric(f"xdevice_energy_logo.{gpu}.energy_mape_pct", v["mape"])
        for gpu, v in xdev.get("energy_fewshot", {}).items():
            mlflow.log_metric(f"xdevice_energy_fewshot.{gpu}.without_mape_pct", v["energy_mape_without"])
            mlflow.log_metric(f"xdevice_energy_fewshot.{gpu}.with_mape_pct", v["energy_mape_with"])
        for f in figures:
            mlflow.log_artifact(str(f), artifact_path="figures")
