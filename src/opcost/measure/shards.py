"""Progress of a campaign measured as shards (one per SLURM array task), for `opcost status`.

Read from what the shards leave on disk: their parts (done or not, failed rows, errors) and their
run records (host, state, the error that stopped a shard). After the merge the parts are gone, so
a merged campaign is read from its consolidated tables instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from opcost.measure.campaign import Campaign, part_stats, unit_key
from opcost.measure.records import ShardProgress


@dataclass(frozen=True)
class ShardFailures:
    """A merged shard's failed rows and the last of their errors."""

    failed_rows: int
    last_error: str | None


def shard_progress(camp: Campaign, n_shards: int) -> list[ShardProgress]:
    """Per shard of campaign `camp` split `n_shards` ways: parts_total, parts_done, failed_rows, last_error
    (first line), plus state (the shard's record: running, done, interrupted, failed; None if it
    never started), host and merged (True once data/raw/<name> holds the whole campaign)."""
    merged = camp.completed() is not None
    records = {r.get("shard"): r for r in camp.records() if r.get("shards") == n_shards}
    from_tables = _merged_stats(camp, n_shards) if merged else {}
    out: list[ShardProgress] = []
    for i in range(n_shards):
        sub = camp.plan.shard(i, n_shards)
        if merged:
            failures = from_tables.get(i, ShardFailures(0, None))
            parts_done, failed_rows, last_error = sub.parts, failures.failed_rows, failures.last_error
        else:
            stats = part_stats(camp.parts_dir, sub.part_names())
            parts_done, failed_rows, last_error = stats["parts_done"], stats["failed_rows"], stats["last_error"]
        rec = records.get(i)
        if rec is not None and rec.get("status") in ("failed", "interrupted") and rec.get("error"):
            last_error = rec["error"]
        out.append(
            {
                "shard": i,
                "parts_total": sub.parts,
                "parts_done": parts_done,
                "failed_rows": failed_rows,
                "last_error": None if last_error is None else str(last_error).splitlines()[0],
                "state": "merged" if merged else (rec.get("status") if rec is not None else None),
                "host": rec.get("host") if rec is not None else None,
                "merged": merged,
            }
        )
    return out


def _merged_stats(camp: Campaign, n_shards: int) -> dict[int, ShardFailures]:
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
    out: dict[int, ShardFailures] = {}
    for shard, group in failed.groupby("shard"):
        out[int(shard)] = ShardFailures(len(group), group["error"].iloc[-1])
    return out
