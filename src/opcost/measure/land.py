"""Landing a campaign measured elsewhere (a GPU visit's archive, or its folder) as data/raw/<campaign>/.

What arrives is untrusted: the archive is read as data (regular files of known names only, no links, no paths
out of its folder, sizes bounded), its tables are validated against their schemas, and its recorded
parameters must be those of the params.yaml campaign it lands as, with the same planned parts. Nothing is
written until all of that holds; the folder is then written whole (a temporary sibling renamed into place).

A campaign measured before rows carried an energy bound (energy_bound) gets one re-derived from its raw power
log: the counter's changes as the sampler saw them bracket each window's first and last update, which gives
each row its bound, its flag and the counter's update period (measure/counter.py). campaign.json then says
`landed` (where from, its digest, what was re-derived), which lets `dvc repro profile@<campaign>` take the
folder as complete on a machine without that GPU, whatever measuring code runs there now.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import shutil
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from opcost.errors import OpcostError
from opcost.io import write_json, write_parquet
from opcost.measure.campaign import Plan, energy_rows, parameters_fingerprint
from opcost.measure.counter import Change, CounterPeriod, bound_flag, counter_window, period_from_gaps
from opcost.measure.records import Landed, LandResult
from opcost.params.profile import CampaignParams
from opcost.schemas import NETWORKS, POWER_SAMPLES, TIMINGS, Table, conform

TABLES: dict[str, Table] = {
    "timings.parquet": TIMINGS,
    "networks.parquet": NETWORKS,
    "power_samples.parquet": POWER_SAMPLES,
}
EXTRAS = ("energy_counter_check.json", "visit.json")
MAX_FILE_BYTES = 64 * 2**20


def read_source(source: Path) -> tuple[dict[str, bytes], str]:
    """The files of a campaign archive (.tar.gz, one folder) or folder, by name, and their sha256."""
    allowed = {"campaign.json", *TABLES, *EXTRAS}
    files: dict[str, bytes] = {}
    if source.is_dir():
        for f in sorted(source.iterdir()):
            if f.name in allowed and f.is_file() and not f.is_symlink():
                if f.stat().st_size > MAX_FILE_BYTES:
                    raise OpcostError(f"{f}: larger than {MAX_FILE_BYTES >> 20} MB, not a campaign file")
                files[f.name] = f.read_bytes()
    elif source.is_file():
        try:
            with tarfile.open(source, "r:*") as tar:
                for m in tar.getmembers():
                    parts = Path(m.name).parts
                    if m.isdir() and len(parts) == 1:
                        continue
                    if not m.isfile() or len(parts) != 2 or parts[1] not in allowed or m.name.startswith("/"):
                        raise OpcostError(
                            f"{source}: member {m.name!r} is not a campaign file (FOLDER/NAME, NAME one of "
                            f"{', '.join(sorted(allowed))})"
                        )
                    if m.size > MAX_FILE_BYTES:
                        raise OpcostError(f"{source}: {m.name} is larger than {MAX_FILE_BYTES >> 20} MB")
                    data = tar.extractfile(m)
                    assert data is not None
                    files[parts[1]] = data.read()
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise OpcostError(f"{source} is not a readable .tar.gz campaign archive ({exc})") from None
    else:
        raise OpcostError(f"{source} not found: give a visit archive (.tar.gz) or a campaign folder")
    missing = [n for n in ("campaign.json", *TABLES) if n not in files]
    if missing:
        raise OpcostError(f"{source} lacks {', '.join(missing)}: not a finished campaign")
    digest = hashlib.sha256(b"".join(files[n] for n in sorted(files))).hexdigest()[:16]
    return files, digest


def _table(files: dict[str, bytes], name: str, source: Path) -> pd.DataFrame:
    try:
        df = pd.read_parquet(io.BytesIO(files[name]))
        return conform(df, TABLES[name])
    except OpcostError as exc:
        raise OpcostError(f"{source}: {name}: {exc}") from None
    except Exception as exc:  # not Parquet, truncated: whatever stops a reader
        raise OpcostError(f"{source}: {name} is not a readable Parquet table ({type(exc).__name__})") from None


def _window_changes(w: pd.DataFrame) -> tuple[list[Change], list[float]]:
    """A trial's counter changes as its power samples saw them, and the gaps between the samples."""
    w = w.sort_values("timestamp")
    t = w["timestamp"].to_numpy(float)
    e = w["energy_j"].to_numpy(float)
    changes = [Change(float(t[k - 1]), float(t[k]), float(e[k])) for k in range(1, len(e)) if e[k] != e[k - 1]]
    return changes, [float(g) for g in np.diff(t)]


def rederive_period(samples: pd.DataFrame) -> CounterPeriod | None:
    """The counter's update period from a power log: gaps between consecutive changes inside each trial."""
    gaps, reads = [], []
    for _, w in samples.dropna(subset=["energy_j"]).groupby(["item_type", "item_id", "mode", "setting", "trial"]):
        changes, read = _window_changes(w)
        gaps += [b.at_s - a.at_s for a, b in zip(changes, changes[1:])]
        reads += read
    return period_from_gaps(gaps, reads, sum(1 for _ in gaps)) if gaps else None


def rederive_rows(rows: pd.DataFrame, samples: pd.DataFrame, item_type: str, period: CounterPeriod | None,
                  target: float) -> pd.DataFrame:  # fmt: skip
    """Each ok row's energy bound and flag from its trial's samples (their first to last change), where the row
    has none: the window is the span of its samples, and each change is bracketed by the sampler's reads."""
    out = rows.copy()
    item_col = "op_id" if item_type == "op" else "set_id"
    by_trial = {k: w for k, w in samples[samples["item_type"] == item_type].groupby(
        ["item_id", "mode", "setting", "trial"])}  # fmt: skip
    for i, r in out.iterrows():
        if r["status"] != "ok" or pd.notna(r.get("energy_bound")) or pd.isna(r["window_energy_j"]):
            continue
        w = by_trial.get((r[item_col], r["mode"], r["setting"], r["trial"]))
        if w is None or w["energy_j"].isna().all():
            continue
        changes, _ = _window_changes(w.dropna(subset=["energy_j"]))
        t0, t1 = float(w["timestamp"].min()), float(w["timestamp"].max())
        got = counter_window(float(r["window_time_s"]), float(r["window_energy_j"]), changes, t0, t1, period, target)
        bound = got.bound if got.bound is not None and math.isfinite(got.bound) else None
        out.at[i, "energy_bound"] = bound
        out.at[i, "energy_span_s"] = got.span_s
        out.at[i, "counter_updates"] = got.updates
        if got.needed_window_s is not None and math.isfinite(got.needed_window_s):
            out.at[i, "energy_window_needed_s"] = got.needed_window_s
        if pd.isna(r["energy_flag"]) and (bound is None or bound > target):
            out.at[i, "energy_flag"] = bound_flag(
                bound if bound is not None else math.inf, target, got.needed_window_s or math.inf
            )
    return out


def remap_legacy_ids(plan: Plan, timings: pd.DataFrame, samples: pd.DataFrame) -> int:
    """Give ops measured under an older torch (whose specs lack arguments a newer one added, ops/kinds.ADDED_ARGS)
    the plan's op ids, in place; how many distinct ids moved."""
    legacy = {u.spec.legacy_op_id: u.item_id for u in plan.units if u.item_type == "op" and u.spec is not None}
    moved = {i: legacy[i] for i in set(timings["op_id"]) if i in legacy and legacy[i] != i}
    if moved:
        timings["op_id"] = timings["op_id"].map(lambda i: moved.get(i, i))
        is_op = samples["item_type"] == "op"
        samples.loc[is_op, "item_id"] = samples.loc[is_op, "item_id"].map(lambda i: moved.get(i, i))
    return len(moved)


def _measured_units(timings: pd.DataFrame, networks: pd.DataFrame) -> set[tuple[str, str, str, str]]:
    ops = {("op", str(i), str(m), str(s)) for i, m, s in timings[["op_id", "mode", "setting"]].itertuples(index=False)}
    nets = {
        ("network", str(i), str(m), str(s))
        for i, m, s in networks[["set_id", "mode", "setting"]].itertuples(index=False)
    }
    return ops | nets


def _only(
    planned: set[tuple[str, str, str, str]], timings: pd.DataFrame, networks: pd.DataFrame, samples: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The rows (and power samples) of the planned parts alone."""

    def keep(df: pd.DataFrame, kind: str, col: str) -> pd.DataFrame:
        keys = zip([kind] * len(df), df[col].astype(str), df["mode"].astype(str), df["setting"].astype(str))
        return df[[k in planned for k in keys]].reset_index(drop=True)

    s = samples
    in_plan = [
        (str(t), str(i), str(m), str(st)) in planned
        for t, i, m, st in zip(s["item_type"], s["item_id"], s["mode"], s["setting"])
    ]
    return keep(timings, "op", "op_id"), keep(networks, "network", "set_id"), s[in_plan].reset_index(drop=True)


def land(source: Path, raw_dir: Path, campaign: CampaignParams, plan: Plan | None) -> LandResult:
    """Land `source` as campaign `campaign` into `raw_dir` (data/raw/<name>/); what was landed, as a record.

    `plan`: the params.yaml campaign's plan, whose parts the recorded ones must be (ops measured under an older
    torch are matched by their legacy ids); None skips that check (no extract outputs here)."""
    files, digest = read_source(source)
    try:
        meta = json.loads(files["campaign.json"])
    except (ValueError, UnicodeDecodeError) as exc:
        raise OpcostError(f"{source}: campaign.json is not JSON ({exc})") from None
    recorded = meta.get("parameters") if isinstance(meta, dict) else None
    if not isinstance(recorded, dict):
        raise OpcostError(f"{source}: campaign.json has no parameters: not a campaign opcost wrote")
    want = campaign.fingerprint_fields()
    defaults = CampaignParams(name=campaign.name, sets=campaign.sets).fingerprint_fields()
    differ = sorted(k for k, v in want.items() if recorded.get(k, defaults[k]) != v)
    if differ:
        shown = ", ".join(f"{k}={recorded.get(k, defaults[k])!r} (params.yaml {want[k]!r})" for k in differ)
        raise OpcostError(f"{source} was measured with other parameters than campaign {campaign.name}: {shown}")
    timings = _table(files, "timings.parquet", source)
    networks = _table(files, "networks.parquet", source)
    samples = _table(files, "power_samples.parquet", source)
    rederived: list[str] = []
    if plan is not None and meta.get("planned_parts") != plan.parts_record():
        moved = remap_legacy_ids(plan, timings, samples)
        planned = {(u.item_type, u.item_id, u.mode, s.label) for s in plan.settings for u in plan.units}
        measured = _measured_units(timings, networks)
        if not planned <= measured:
            raise OpcostError(
                f"{source} holds other parts than campaign {campaign.name} plans ({meta.get('planned_parts')} "
                f"against {plan.parts_record()}): {len(planned - measured)} planned parts were not measured"
            )
        if moved:
            rederived.append(f"op_id of {moved} ops measured under torch {meta.get('environment', {}).get('torch')}")
        if measured != planned:  # one run measured several campaigns: this one takes its own parts
            timings, networks, samples = _only(planned, timings, networks, samples)
            rederived.append(f"the {len(planned)} of its {len(measured)} parts that campaign {campaign.name} plans")
        meta["planned_parts"] = plan.parts_record()
    if not meta.get("energy_counter"):
        period = rederive_period(samples)
        timings = rederive_rows(timings, samples, "op", period, campaign.energy_bound)
        networks = rederive_rows(networks, samples, "network", period, campaign.energy_bound)
        if period is not None:
            samples["counter_period_s"] = period.median_s
            samples["counter_jitter_s"] = period.jitter_s
        meta["energy_counter"] = {"default": None if period is None else period.record()}
        rederived += ["energy_bound", "energy_flag", "energy_counter (from the power log's samples)"]
    for df in (timings, networks, samples):
        df["campaign"] = campaign.name
    meta["energy_rows"] = energy = energy_rows(timings, networks, campaign.energy_bound)
    meta["rows"] = {"timings": len(timings), "networks": len(networks), "power_samples": len(samples)}
    meta["failed_rows"] = int((timings["status"] == "failed").sum() + (networks["status"] == "failed").sum())
    landed: Landed = {
        "from": source.name,
        "digest": digest,
        "at": time.time(),
        "measured_as": meta.get("campaign"),
        "parameters_fingerprint": parameters_fingerprint(campaign),
        "rederived": rederived,
    }
    meta["landed"] = landed
    meta["campaign"] = campaign.name
    raw_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{raw_dir.name}.", dir=raw_dir.parent))
    try:
        write_parquet(conform(timings, TIMINGS), tmp / "timings.parquet")
        write_parquet(conform(networks, NETWORKS), tmp / "networks.parquet")
        write_parquet(conform(samples, POWER_SAMPLES), tmp / "power_samples.parquet")
        for extra in EXTRAS:
            if extra in files:
                write_json(json.loads(files[extra]), tmp / extra)
        write_json(meta, tmp / "campaign.json")
        if raw_dir.exists():
            shutil.rmtree(raw_dir)
        tmp.rename(raw_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return {"campaign": campaign.name, "folder": str(raw_dir), **energy, "landed": landed}
