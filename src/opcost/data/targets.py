"""What each train target learns from, built by the evaluate stage (torch-free).

For every device config x mode with op measurements: its op rows (with the units of grouped and
family cross-validation), its measured networks and every op they call, under
data/evaluated/targets/<device>-<mode>/. Inference targets leave out dropout and stochastic depth
with p > 0 (eval mode runs them as identities). A training target whose device has far fewer training
than inference measurements gets the missing rows estimated from its own inference rows, flagged
`estimated`, never replacing a real one.
Tables: docs/data-sources.md#what-each-train-target-learns-from; the estimate and its figures:
docs/op-models.md#estimated-training-rows.
"""

from __future__ import annotations

import json

import numpy as np
import numpy.typing as npt
import pandas as pd

from opcost.data.floors import device_floor
from opcost.modes import OP_PHASE
from opcost.ops.families import family_of
from opcost.ops.kinds import DROP_KINDS
from opcost.ops.layers import layer_id
from opcost.schemas import TARGET_NETWORK_OPS, TARGET_NETWORKS, TARGET_OPERATIONS, TARGET_SPEC_COLUMNS

DEFAULT = ["clock_mhz", "power_limit_w"]


def _default(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["clock_mhz"].isna() & df["power_limit_w"].isna()]


def op_families(occurrences: pd.DataFrame) -> dict[str, list[str]]:
    """op_id -> sorted families of the extracted networks (any mode) that call it."""
    fam = occurrences.assign(family=occurrences["model"].map(family_of))
    return {k: sorted(set(v)) for k, v in fam.groupby("op_id")["family"]}


def op_models(occurrences: pd.DataFrame, mode: str) -> dict[str, list[str]]:
    """op_id -> sorted models of the extracted networks of `mode` that call it: which models' measurements
    an op row stands for (model/training/netval.py holds a model out by removing the rows no other model calls)."""
    occ = occurrences[occurrences["mode"] == mode]
    return {str(k): sorted(set(v)) for k, v in occ.groupby("op_id")["model"]}


def train_mode_only(rows: pd.DataFrame, mode: str) -> npt.NDArray[np.bool_]:
    """Rows of an inference target that timed work only train mode does (see module docstring)."""
    if mode != "inference" or rows.empty:
        return np.zeros(len(rows), bool)
    drop_kinds: npt.NDArray[np.bool_] = rows["kind"].isin(DROP_KINDS).to_numpy()
    p = np.array([float(json.loads(s).get("attrs", {}).get("p") or 0.0) if d else 0.0
                  for s, d in zip(rows["spec_json"], drop_kinds)])  # fmt: skip
    return drop_kinds & (p > 0)


MIN_POWER_PAIRS = 3
BIG_OVER_FLOOR = 4.0  # reference ops whose work, not their launch, sets the ratio
MIN_OWN_FLOOR_ROWS = 20  # own forward+backward rows needed to take the device's training floor from them


def _floor(t: pd.Series) -> float:
    return device_floor(t.dropna().to_numpy(float))


def estimated_training_rows(ops: pd.DataFrame, device: str) -> pd.DataFrame:
    """Forward+backward rows estimated for `device` (see module docstring); empty when not needed."""
    d = _default(ops)
    fb = d[(d["mode"] == "training") & (d["phase"] == "forward_backward")]
    infer = d[(d["mode"] == "inference") & (d["phase"] == "forward")]
    inf = infer[infer["device_config"] == device]
    own_fb = fb[fb["device_config"] == device]
    have = set(own_fb["op_id"])
    missing = inf[~inf["op_id"].isin(have)]
    if missing.empty or len(have) >= len(inf):
        return pd.DataFrame()
    both = fb.merge(infer, on=["device_config", "op_id", "kind"], suffixes=("_fb", "_inf"))
    both = both[both["device_config"] != device]
    if both.empty:
        return pd.DataFrame()
    ref = both["device_config"].value_counts().idxmax()
    ref_fb_floor = _floor(fb.loc[fb["device_config"] == ref, "t_s"])
    ref_inf_floor = _floor(infer.loc[infer["device_config"] == ref, "t_s"])
    r = both[both["device_config"] == ref]
    r = r[r["t_s_inf"] >= BIG_OVER_FLOOR * ref_inf_floor]
    r = r.assign(rt=(r["t_s_fb"] - ref_fb_floor).clip(lower=0.0) / (r["t_s_inf"] - ref_inf_floor))
    per_op = r.set_index("op_id")["rt"]
    per_kind = r.groupby("kind")["rt"].median()
    rows = missing.copy()
    rt = rows["op_id"].map(per_op).fillna(rows["kind"].map(per_kind))
    rows = rows[rt.notna()].copy()
    rt = rt[rt.notna()]
    floor_inf = _floor(inf["t_s"])
    floor_fb = _floor(own_fb["t_s"]) if len(own_fb) >= MIN_OWN_FLOOR_ROWS else floor_inf * ref_fb_floor / ref_inf_floor
    rp = power_ratio(own_fb, inf, rows["kind"])
    rows["mode"], rows["phase"] = "training", "forward_backward"
    rows["t_s"] = floor_fb + rt * np.clip(rows["t_s"] - floor_inf, 0.0, None)
    rows["p_w"] = rows["p_w"] * rp
    rows["e_j"] = rows["t_s"] * rows["p_w"]
    for col in (
        "sigma_t_s",
        "sigma_e_j",
        "sigma_p_w",
        *[c for c in rows.columns if c.startswith(("thesis_", "trials_"))],
    ):
        rows[col] = np.nan
    rows["method"] = (
        f"estimated from {device} inference: its training floor + {ref}'s forward_backward/inference work "
        f"ratio x (t - floor); power x {device}'s own training/inference ratio"
    )
    rows["n_trials"] = 0
    return rows


def power_ratio(train_fb: pd.DataFrame, inf: pd.DataFrame, kinds: pd.Series) -> npt.NDArray[np.float64]:
    """Training / inference power of the ops in `kinds`, from the device's own ops measured in both
    modes: the median per kind (at least MIN_POWER_PAIRS pairs), else over every pair; 1.0 (power
    unchanged) where the device measured no op in both modes with power."""
    pairs = train_fb.merge(inf, on=["op_id", "kind"], suffixes=("_fb", "_inf"))
    ratio = (pairs["p_w_fb"] / pairs["p_w_inf"]).replace([np.inf, -np.inf], np.nan)
    pairs = pairs.assign(rp=ratio).dropna(subset=["rp"])
    if pairs.empty:
        return np.ones(len(kinds))
    overall = float(pairs["rp"].median())
    g = pairs.groupby("kind")["rp"]
    per_kind = g.median()[g.size() >= MIN_POWER_PAIRS]
    by_op: npt.NDArray[np.float64] = kinds.map(per_kind).fillna(overall).to_numpy(float)
    return by_op


def target_tables(
    ops: pd.DataFrame, nets: pd.DataFrame, occurrences: pd.DataFrame, catalog: pd.DataFrame
) -> dict[str, dict[str, pd.DataFrame]]:
    """`<device config>-<mode>` -> {"operations", "networks", "network_ops"} tables, and "excluded":
    the rows left out (see module docstring)."""
    spec = catalog.set_index("op_id")[["kind", *TARGET_SPEC_COLUMNS]]
    fams = op_families(occurrences)
    layer = {i: layer_id(s) for i, s in zip(catalog["op_id"], catalog["spec_json"])}
    out: dict[str, dict[str, pd.DataFrame]] = {}
    for (device, mode), g in ops.groupby(["device_config", "mode"], sort=True):
        rows = g[g["phase"] == OP_PHASE[mode]].assign(estimated=False)
        if mode == "training":
            est = estimated_training_rows(ops, device)
            if len(est):
                rows = pd.concat([rows, est.assign(estimated=True)], ignore_index=True)
        if rows.empty:
            continue
        rows = rows.join(spec.drop(columns="kind"), on="op_id")
        excluded = train_mode_only(rows, mode)
        dropped, rows = rows[excluded], rows[~excluded].copy()
        rows["layer_id"] = rows["op_id"].map(layer)
        rows["families"] = [fams.get(i, []) for i in rows["op_id"]]
        callers = op_models(occurrences, mode)
        rows["models"] = [callers.get(i, []) for i in rows["op_id"]]
        rows = rows.sort_values(["op_id", "clock_mhz", "power_limit_w"], kind="stable").reset_index(drop=True)
        target = f"{device}-{mode}"
        out[target] = {
            "operations": TARGET_OPERATIONS.validate(rows[TARGET_OPERATIONS.names]),
            "excluded": dropped[["op_id", "kind", "t_s"]].reset_index(drop=True),
        }
        measured = _default(nets[(nets["device_config"] == device) & (nets["mode"] == mode)])
        occ = occurrences[(occurrences["mode"] == mode) & occurrences["set_id"].isin(measured["set_id"])]
        measured = measured[measured["set_id"].isin(occ["set_id"])].copy()  # networks extract traced
        measured["family"] = measured["model"].map(family_of)
        net_cols = TARGET_NETWORKS.names
        out[target]["networks"] = TARGET_NETWORKS.validate(
            measured.sort_values("set_id").reset_index(drop=True)[net_cols]
        )
        nops = occ[["set_id", "op_id", "calls"]].join(spec, on="op_id").sort_values(["set_id", "op_id"])
        out[target]["network_ops"] = TARGET_NETWORK_OPS.validate(nops.reset_index(drop=True)[TARGET_NETWORK_OPS.names])
    return out
