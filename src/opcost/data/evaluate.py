"""Evaluation (library of the `evaluate` stage): every measurement source into one row per
(device config, mode, phase, clock, power limit, op) -- and the same for whole networks -- plus one sweeps table.

Two sets of statistics sit side by side so they can be compared:
- `thesis_*`: the thesis method. For its logs, the values as logged (re-runs averaged, their sigmas
  combined as a root mean square). For our campaigns, computed from the raw power log the same way:
  power samples outside 3 sigma dropped by value, P = mean, sigma_P = std, e = P x t, sigma_e =
  sigma_P x t. That sigma is the spread of samples, not the uncertainty of the mean.
- `trials_*`: mean and standard deviation across independent measurements (our trials; the
  thesis' re-runs where an op was measured more than once), with their count.
The unprefixed t/e/P and sigmas are the row's best figures: trial-based for our campaigns, the
thesis figures for its logs (`method` says which).

The evaluated sweeps table holds the points along a knob of every sweep source and campaign. A
source's rows at the device's default setting (`default_setting`, value unknown: the `auto` runs
of gpu-frequency-dvfs) stay in that source's ingested table: a sweep report needs the setting.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from opcost.devices import NO_TF32_SUFFIX, lookup_device
from opcost.errors import OpcostError
from opcost.modes import OP_PHASE
from opcost.paths import Paths
from opcost.schemas import (
    NETWORKS,
    POWER_SAMPLES,
    REJECT_REASONS,
    TIMINGS,
    Table,
    conform,
)
from opcost.tables import read_parquet

STATS = ("t_s", "sigma_t_s", "e_j", "sigma_e_j", "p_w", "sigma_p_w")
OP_KEYS = ["device_config", "mode", "phase", "clock_mhz", "power_limit_w", "op_id"]
NET_KEYS = ["device_config", "mode", "phase", "clock_mhz", "power_limit_w", "set_id"]


def device_config(env: dict[str, Any], device: str) -> str:
    """The device table's key for a GPU campaign (`NVIDIA A30` -> `A30`, matched on the name NVML reported),
    `_no_tf32` where it ran with cuDNN TF32 off; a device the table does not know (a CPU host, a new GPU)
    keeps its reported name with `_` for anything but letters and digits."""
    reported = str(env.get("device_name") or env.get("nvml_device_name") or device)
    key = lookup_device(reported) if device.startswith("cuda") else None
    name = key or re.sub(r"[^A-Za-z0-9]+", "_", reported).strip("_")
    if device.startswith("cuda") and env.get("tf32_cudnn") is False:
        name += NO_TF32_SUFFIX
    return name


def _rms(s: pd.Series) -> float:
    s = s.dropna()
    return float(np.sqrt((s**2).mean())) if len(s) else np.nan


def _std(s: pd.Series) -> float:
    s = s.dropna()
    return float(s.std(ddof=1)) if len(s) > 1 else np.nan


# --------------------------------------------------------------------------------------------
# The thesis logs
# --------------------------------------------------------------------------------------------


def evaluate_logged(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Re-runs combined: thesis figures averaged, re-run spread as the trial statistics."""
    g = df.groupby(keys, dropna=False, sort=True)
    out = g.agg(
        thesis_t_s=("t_s", "mean"),
        thesis_sigma_t_s=("sigma_t_s", _rms),
        thesis_e_j=("e_j", "mean"),
        thesis_sigma_e_j=("sigma_e_j", _rms),
        thesis_p_w=("p_w", "mean"),
        thesis_sigma_p_w=("sigma_p_w", _rms),
        trials_t_s=("t_s", "mean"),
        trials_sigma_t_s=("t_s", _std),
        trials_e_j=("e_j", "mean"),
        trials_sigma_e_j=("e_j", _std),
        trials_p_w=("p_w", "mean"),
        trials_sigma_p_w=("p_w", _std),
        n_measurements=("t_s", "size"),
        sources=("source", lambda s: ",".join(sorted(set(s)))),
    ).reset_index()
    single = out["n_measurements"] < 2  # one measurement has no spread across measurements
    for col in ("trials_t_s", "trials_e_j", "trials_p_w"):
        out.loc[single, col] = np.nan
    out["n_trials"] = out["n_measurements"].where(~single, 0)
    for stat in STATS:
        out[stat] = out[f"thesis_{stat}"]
    out["method"] = "thesis-log"
    return out


# --------------------------------------------------------------------------------------------
# Our campaigns
# --------------------------------------------------------------------------------------------


def thesis_power_stats(samples: pd.DataFrame) -> tuple[float, float]:
    """Mean and sigma of power after dropping samples outside 3 sigma (by value), as the thesis did."""
    p = samples["power_w"].dropna().to_numpy(float)
    if len(p) == 0:
        return np.nan, np.nan
    mu, sd = p.mean(), p.std()
    kept = p[np.abs(p - mu) <= 3 * sd] if sd > 0 else p
    return float(kept.mean()), float(kept.std())


def flagged_energy(rows: pd.DataFrame) -> npt.NDArray[np.bool_]:
    """Rows whose energy the profiler did not trust (a non-null `energy_flag`, measure/timing.py): their
    time stands, their energy and power are left out of every statistic. A table without the column
    (written before it existed) flags nothing."""
    if "energy_flag" not in rows.columns:
        return np.zeros(len(rows), bool)
    flagged: npt.NDArray[np.bool_] = rows["energy_flag"].notna().to_numpy(bool)
    return flagged


def evaluate_campaign_rows(rows: pd.DataFrame, samples: pd.DataFrame, item_col: str, keys: list[str]) -> pd.DataFrame:
    """Trial rows (status ok) -> per-key statistics, trial-based and thesis-style; a row with flagged
    energy counts for time only (`flagged_energy`)."""
    ok = rows[rows["status"] == "ok"].copy()
    if ok.empty:
        return pd.DataFrame()
    # thesis-style power per trial, from that trial's raw samples
    # a trial is (campaign, item, mode, setting, trial): campaigns of one device config are evaluated together
    by = [c for c in ("campaign",) if c in samples.columns and c in ok.columns] + ["mode", "setting", "trial"]
    if len(samples):
        sp = samples.groupby([by[0], "item_id", *by[1:]] if by[0] == "campaign" else ["item_id", *by])
        stats = {k: thesis_power_stats(v) for k, v in sp}
    else:
        stats = {}

    def trial_key(r: pd.Series) -> tuple[Any, ...]:
        rest = tuple(r[c] for c in by if c != "campaign")
        return (r["campaign"], r[item_col], *rest) if by[0] == "campaign" else (r[item_col], *rest)

    pw = [stats.get(trial_key(r), (np.nan, np.nan)) for _, r in ok.iterrows()]
    ok["thesis_p"] = [p for p, _ in pw]
    ok["thesis_sp"] = [s for _, s in pw]
    # a row whose energy the profiler flagged (energy_flag) keeps its time and gives no energy or power:
    # neither its window's nor the thesis-style figures from its power samples
    ok.loc[flagged_energy(ok), ["energy_per_iter_j", "power_w", "thesis_p", "thesis_sp"]] = np.nan
    ok["thesis_e"] = ok["thesis_p"] * ok["mean_s"]
    ok["thesis_se"] = ok["thesis_sp"] * ok["mean_s"]
    g = ok.groupby(keys, dropna=False, sort=True)
    out = g.agg(
        trials_t_s=("mean_s", "mean"),
        trials_sigma_t_s=("mean_s", _std),
        trials_e_j=("energy_per_iter_j", "mean"),
        trials_sigma_e_j=("energy_per_iter_j", _std),
        trials_p_w=("power_w", "mean"),
        trials_sigma_p_w=("power_w", _std),
        n_trials=("mean_s", "size"),
        thesis_t_s=("mean_s", "mean"),
        thesis_sigma_t_s=("std_s", _rms),
        thesis_e_j=("thesis_e", "mean"),
        thesis_sigma_e_j=("thesis_se", _rms),
        thesis_p_w=("thesis_p", "mean"),
        thesis_sigma_p_w=("thesis_sp", _rms),
        proportional_share=("proportional", lambda s: float(s.astype("boolean").mean()) if s.notna().any() else np.nan),
        sources=("campaign", lambda s: ",".join(sorted(set(s)))),
    ).reset_index()
    out["n_measurements"] = out["n_trials"]
    for stat in STATS:
        out[stat] = out[f"trials_{stat}"]
    out["method"] = "trials"
    return out


def _read_measurements(path: Path, table: Table, stage: str, rejects: list[dict[str, Any]]) -> pd.DataFrame:
    """A campaign table, validated; one written before a nullable column existed (energy_flag,
    timing_warnings) gets that column as null (not recorded then), and nothing else is changed.
    Rows holding impossible numbers (a negative, non-finite or absurd time or energy: a corrupted file,
    never a measurement) are dropped here, where they enter, and appended to `rejects` with why."""
    df = read_parquet(path, stage)  # a corrupt file: one line naming it
    bad = table.bad_rows(df)
    for i, r in bad.iterrows():
        rejects.append(
            {"file": path.name, "row": int(df.index.get_loc(i)), "reason": r["reason"], "message": r["message"]}
        )
    if len(bad):
        df = df.drop(index=bad.index).reset_index(drop=True)
    if any(c.nullable and c.name not in df.columns for c in table.columns):
        return conform(df, table)
    return table.validate(df)


def read_campaigns(
    paths: Paths, rejects: dict[str, list[dict[str, Any]]] | None = None
) -> list[tuple[str, dict[str, Any], pd.DataFrame, pd.DataFrame, pd.DataFrame]]:
    """(name, campaign.json, timings, networks, samples) of every finished campaign under data/raw/.
    The rows refused for impossible numbers go to `rejects[name]`; a campaign with rows and none
    taken is an error (its evaluated rows would vanish without a word)."""
    found = []
    root = paths.raw_root
    for meta_path in sorted(root.glob("*/campaign.json")) if root.exists() else []:
        d = meta_path.parent
        meta = json.loads(meta_path.read_text())
        stage = f"profile@{d.name}"
        refused: list[dict[str, Any]] = []
        t = _read_measurements(d / "timings.parquet", TIMINGS, stage, refused)
        n = _read_measurements(d / "networks.parquet", NETWORKS, stage, refused)
        s = POWER_SAMPLES.validate(read_parquet(d / "power_samples.parquet", stage))
        if refused and not len(t) and not len(n):
            first = refused[0]
            raise OpcostError(
                f"campaign {d.name}: all {len(refused)} rows of {d} refused ({first['file']} row {first['row']}: "
                f"{first['message']}): a corrupted campaign; run `dvc checkout {d}` or measure it again "
                f"(`dvc repro {stage}`)"
            )
        if rejects is not None and refused:
            rejects[d.name] = refused
        found.append((d.name, meta, t, n, s))
    return found


def reject_summary(rejects: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per campaign: the rows refused, counted by reason (schemas.REJECT_REASONS), and the first few."""
    return {
        name: {
            "rejected_rows": len(rows),
            "rejected_by_reason": {k: sum(r["reason"] == k for r in rows) for k in REJECT_REASONS},
            "first": rows[:20],
        }
        for name, rows in rejects.items()
    }


def campaign_frames(
    paths: Paths, rejects: dict[str, list[dict[str, Any]]] | None = None, flagged: dict[str, int] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The evaluated ops, networks and sweeps of every campaign; refused rows go to `rejects`, and the
    number of ok rows whose energy was flagged (kept for time only) to `flagged[name]` where there are any.
    Campaigns of one device config are evaluated together: an op two campaigns measured there (the H200
    probe's and a visit's resnet50 ops) is one row over all their trials (`sources` names both)."""
    ops, nets, sweeps = [], [], []
    by_cfg: dict[str, list[tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]]] = {}
    for name, meta, t, n, s in read_campaigns(paths, rejects):
        n_flagged = sum(int(flagged_energy(df[df["status"] == "ok"]).sum()) for df in (t, n))
        if flagged is not None and n_flagged:
            flagged[name] = n_flagged
        cfg = device_config(meta["environment"], meta["parameters"]["device"])
        for df, phase_training in ((t, "forward_backward"), (n, "train_step")):
            df["device_config"] = cfg
            df["phase"] = np.where(df["mode"] == "training", phase_training, "forward")
        by_cfg.setdefault(cfg, []).append((t, n, s))
        sweeps.append(campaign_sweeps(name, cfg, _evaluated_networks(n, s)))
    for parts in by_cfg.values():
        t = pd.concat([p[0] for p in parts], ignore_index=True)
        n = pd.concat([p[1] for p in parts], ignore_index=True)
        s = pd.concat([p[2] for p in parts], ignore_index=True)
        ops.append(evaluate_campaign_rows(t, s[s["item_type"] == "op"], "op_id", OP_KEYS + ["kind"]))
        nets.append(_evaluated_networks(n, s))
    return (
        pd.concat(ops, ignore_index=True) if ops else pd.DataFrame(),
        pd.concat(nets, ignore_index=True) if nets else pd.DataFrame(),
        pd.concat(sweeps, ignore_index=True) if sweeps else pd.DataFrame(),
    )


def _evaluated_networks(n: pd.DataFrame, s: pd.DataFrame) -> pd.DataFrame:
    e_nets = evaluate_campaign_rows(n, s[s["item_type"] == "network"], "set_id", NET_KEYS + ["model"])
    if len(e_nets):
        shapes = n.drop_duplicates("set_id").set_index("set_id")["input_shape"]
        e_nets["input_shape"] = [list(shapes[i]) for i in e_nets["set_id"]]
    return e_nets


def campaign_sweeps(name: str, cfg: str, nets: pd.DataFrame) -> pd.DataFrame:
    """A campaign's whole networks along its swept knob (only where it swept exactly one)."""
    if nets.empty:
        return pd.DataFrame()
    rows = []
    for knob, col in (("core_clock_mhz", "clock_mhz"), ("power_limit_w", "power_limit_w")):
        other = "power_limit_w" if col == "clock_mhz" else "clock_mhz"
        swept = nets[nets[col].notna()]
        if swept[col].nunique() < 2 or swept[other].notna().any():
            continue
        for _, r in swept.iterrows():
            rows.append(
                {
                    "source": name,
                    "device": cfg,
                    "workload": f"{r['set_id']}/{r['mode']}",
                    "knob": knob,
                    "value": float(r[col]),
                    "default_setting": False,
                    "time_s": r["t_s"],
                    "power_w": r["p_w"],
                    "energy_j": r["e_j"],
                    "core_clock_mhz": r["clock_mhz"],
                    "mem_clock_mhz": None,
                    "power_limit_w": r["power_limit_w"],
                    "detail": json.dumps({"unit": "iteration"}),
                }
            )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------
# The stage
# --------------------------------------------------------------------------------------------


def coverage_of_networks(
    nets: pd.DataFrame, ops: pd.DataFrame, occurrences: pd.DataFrame, catalog: pd.DataFrame
) -> dict[str, Any]:
    """For each measured whole network: the share of its FLOPs and calls whose ops were measured
    (on the same device config and mode), and the kinds with no measurement."""
    flops = dict(zip(catalog["op_id"], catalog["flops"]))
    kinds = dict(zip(catalog["op_id"], catalog["kind"]))
    rows = []
    for _, n in nets.drop_duplicates(["set_id", "device_config", "mode"]).iterrows():
        occ = occurrences[(occurrences["set_id"] == n["set_id"]) & (occurrences["mode"] == n["mode"])]
        entry: dict[str, Any] = {"set_id": n["set_id"], "device_config": n["device_config"], "mode": n["mode"]}
        if occ.empty:
            rows.append({**entry, "extracted": False})
            continue
        have = set(
            ops[
                (ops["device_config"] == n["device_config"])
                & (ops["mode"] == n["mode"])
                & (ops["phase"] == OP_PHASE[n["mode"]])
            ]["op_id"]
        )
        f = occ["op_id"].map(flops).astype(float) * occ["calls"]
        hit = occ["op_id"].isin(have)
        missing = sorted({kinds[o] for o in occ.loc[~hit, "op_id"]})
        rows.append(
            {
                **entry,
                "extracted": True,
                "flops_share": float(f[hit].sum() / f.sum()) if f.sum() else None,
                "calls_share": float(occ.loc[hit, "calls"].sum() / occ["calls"].sum()),
                "missing_kinds": missing,
            }
        )
    shares = [r["flops_share"] for r in rows if r.get("flops_share") is not None]
    return {
        "networks": rows,
        "mean_flops_share": float(np.mean(shares)) if shares else None,
        "min_flops_share": float(np.min(shares)) if shares else None,
    }
