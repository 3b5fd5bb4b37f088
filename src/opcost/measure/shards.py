"""Progress of a campaign measured as shards (one per SLURM array task), for `opcost status`.

Read from what the shards leave on disk: their parts (done or not, failed rows, errors) and their
run records (host, state, the error that stopped a shard). After the merge the parts are gone, so
a merged campaign is read from its consolidated tables instead.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from opcost.measure.campaign import Campaign, part_stats, unit_key
from opcost.measure.profile import stage_campaign
from opcost.params.load import Params
from opcost.paths import Paths


def shard_progress(paths: Paths, params: Params, name: str, n_shards: int) -> list[dict[str, Any]]:
    """Per shard of `name` split `n_shards` ways: parts_total, parts_done, failed_rows, last_error
    (first line), plus state (the shard's record: running, done, interrupted, failed; None if it
    never started), host and merged (True once data/raw/<name> holds the whole campaign)."""
    camp = stage_campaign(paths, params, name)
    merged = camp.completed() is not None
    records = {r.get("shard"): r for r in camp.records() if r.get("shards") == n_shards}
    from_tables = _merged_stats(camp, n_shards) if merged else {}
    out = []
    for i in range(n_shards):
        sub = camp.plan.shard(i, n_shards)
        if merged:
            stats = {"parts_done": sub.parts, **from_tables.get(i, {"failed_rows": 0, "last_error": None})}
        else:
            stats = part_stats(camp.parts_dir, sub.part_names())
        rec = records.get(i, {})
        last_error = stats["last_error"]
        if rec.get("status") in ("failed", "interrupted") and rec.get("error"):
            last_error = rec["error"]
        out.append(
            {
                "shard": i,
                "parts_total": sub.parts,
                "parts_done": stats["parts_done"],
                "failed_rows": stats["failed_rows"],
                "last_error": None if last_error is None else str(last_error).splitlines()[0],
                "state": "merged" if merged else rec.get("status"),
                "host": rec.get("host"),
                "merged": merged,
            }
        )
    return out


def _merged_stats(camp: Campaign, n_shards: int) -> dict[int, dict[str, Any]]:
    """failed_rows and last_error per shard, from the consolidated tables of a merged campaign."""
    position = {unit_key(u): k for k, u in enumerate(camp.plan.units)}
    cols = ["mode", "status", "error", "ended_at"]
    frames = []
    for table, item_type, key in (("timings", "op", "op_id"), ("networks", "network", "set_id")):
        t = pd.read_parquet(camp.out_dir / f"{table}.parquet", columns=[key, *cols])
        t["shard"] = [position[(item_type, i, m)] % n_shards for i, m in zip(t[key], t["mode"])]
        frames.append(t[["shard", *cols]])
    rows = pd.concat(frames, ignore_index=True)
    failed = rows[rows["status"] == "failed"].sort_values("ended_at")
    out: dict[int, dict[str, Any]] = {}
    for shard, group in failed.groupby("shard"):
        out[int(shard)] = {"failed_rows": len(group), "last_error": group["error"].iloc[-1]}
    return out
