"""Knob sweeps from public sources -> the sweeps table (schemas.SWEEPS).

Every reader goes through `textfile.read_csv`: a missing column, an empty or binary file, or a
directory where a file belongs is a one-line error naming the file; a bad row (wrong width, a
value that is not a finite number, a zero or negative time or power, undecodable bytes) is a
reject with its file, line and reason, and the other rows are kept.

zeus-power-limit: `summary_power_<gpu>.csv` (dataset, network, batch_size, optimizer, power_limit,
time_per_epoch, average_power): one workload per (dataset, network, batch size, optimizer), swept
over the power limit; energy per epoch = time x average power.
dvfs-conv: `dvfs-conv.csv` (appName, coreF, memF, argNo, time/us, power/W, GFLOPS, GFLOPS/W): a
core x memory clock grid. The long table gets each measurement twice: once in the core-clock sweep
at its memory clock, once in the memory-clock sweep at its core clock, so every workload is a
one-knob sweep.

The cross-clock sources (Perseus, NV-DVFS, GPU-FREQUENCY-DVFS) are in `crossclock.py`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, NotRequired, TypedDict

from opcost.data.textfile import CsvFile, Line, LineError, Parsed, csv_records, parse_number, read_csv
from opcost.devices import table_name
from opcost.errors import OpcostError
from opcost.schemas import SWEEPS

ZEUS_COLUMNS = ["dataset", "network", "batch_size", "optimizer", "power_limit", "time_per_epoch", "average_power"]
DVFS_COLUMNS = ["appName", "coreF", "memF", "argNo", "time/us", "power/W", "GFLOPS", "GFLOPS/W"]

# One measurement of a sweep: device, workload, knob and setting (the knob's value, "default" if unset).
SweepPoint = tuple[str, str, str, float | str | None]


class SweepFileCounts(TypedDict):
    """What one file of a sweep source gave, as summary.json lists it under `files`."""

    lines_taken: int
    sweep_rows: int
    rejected: int
    skipped: dict[str, int]  # lines skipped, by kind
    identical_stage_rows_dropped: NotRequired[int]  # Perseus stage profiles only (crossclock.perseus_stages)


class SweepInfo(TypedDict, total=False):
    """What a reader adds to its source's summary.json beyond the counts every sweep source has."""

    identical_stages: dict[str, dict[str, list[int]]]  # file -> kept "stage<k>" -> the stages dropped as copies
    identical_stage_rows_dropped: int
    default_setting_rows: int


@dataclass
class SweepRead(Parsed):
    """Rows, rejects and skipped lines of a sweep source, with per-file counts for summary.json."""

    files: dict[str, SweepFileCounts] = field(default_factory=dict)
    info: SweepInfo = field(default_factory=SweepInfo)
    seen: dict[SweepPoint, str] = field(default_factory=dict)  # sweep point -> "file line n" that gave it

    @property
    def rows_per_file(self) -> dict[str, int]:
        return {f: v["lines_taken"] for f, v in self.files.items()}


def sweep_row(
    source: str,
    device: str,
    workload: str,
    knob: str,
    value: float | None,
    time_s: float,
    detail: dict[str, Any],
    **columns: Any,
) -> dict[str, Any]:
    """One row of the sweeps table; columns not given are null (default_setting False)."""
    row: dict[str, Any] = {c: None for c in SWEEPS.names}
    row.update(
        source=source,
        device=device,
        workload=workload,
        knob=knob,
        value=value,
        default_setting=False,
        time_s=time_s,
        detail=json.dumps(detail, sort_keys=True, allow_nan=False),
    )
    unknown = set(columns) - set(SWEEPS.names)
    if unknown:
        raise ValueError(f"not sweeps columns: {sorted(unknown)}")
    row.update(columns)
    return row


def number(rec: dict[str, str], col: str) -> float:
    """A CSV field as a finite float (LineError naming the column otherwise)."""
    return parse_number(rec[col].strip(), col)


def positive(rec: dict[str, str], col: str) -> float:
    """A CSV field as a finite float > 0: a time something else is divided by, for one."""
    x = number(rec, col)
    if x <= 0:
        raise LineError("out_of_range", f"{col} = {x}, must be > 0")
    return x


def whole(rec: dict[str, str], col: str) -> int:
    """A CSV field as a whole number (`8`, `8.0`), LineError otherwise."""
    x = number(rec, col)
    if not x.is_integer():
        raise LineError("bad_number", f"{col} = {rec[col]!r} is not a whole number")
    return int(x)


def text(rec: dict[str, str], col: str) -> str:
    """A CSV field that names something: not empty, no slash (it becomes part of a workload name)."""
    v = rec[col].strip()
    if not v or "/" in v or "@" in v:
        raise LineError("bad_value", f"{col} = {rec[col]!r} must be a non-empty name without '/' or '@'")
    return v


def sweep_point(row: dict[str, Any]) -> SweepPoint:
    """What one measurement of a sweep is: device, workload, knob and setting ("default" if unset)."""
    return (row["device"], row["workload"], row["knob"], "default" if row["default_setting"] else row["value"])


RowsOf = Callable[[Line, dict[str, str]], list[dict[str, Any]]]


def read_sweep_file(path: Path, rel: str, columns: list[str], rows_of: RowsOf, out: SweepRead) -> CsvFile:
    """Parse one CSV file into `out`: `rows_of(line, record)` gives a line's sweep rows or raises
    LineError; rows breaking a SWEEPS rule reject their line, and so does a line repeating a sweep
    point (device, workload, knob, setting) that an earlier line gave: one setting of one sweep is
    one measurement and must not weigh twice. Per-file counts go to `out.files`."""
    f = read_csv(path, columns)
    part = Parsed()
    taken = 0
    for line, rec in csv_records(f, rel, part):
        try:
            rows = rows_of(line, rec)
        except LineError as exc:
            part.reject(rel, line, exc.reason, exc.message)
            continue
        problem = next((p for p in map(SWEEPS.row_problem, rows) if p), None)
        points = [sweep_point(r) for r in rows]
        again = next((p for p in points if p in out.seen), None)
        if problem:
            part.reject(rel, line, *problem)
        elif again is not None:
            part.reject(
                rel, line, "duplicate", f"{again[1]} at {again[2]} = {again[3]} already given by {out.seen[again]}"
            )
        else:
            part.rows += rows
            taken += 1
            out.seen.update({p: f"{rel} line {line.number}" for p in points})
    out.rows += part.rows
    out.rejects += sorted(part.rejects, key=lambda r: r["line"])
    out.skipped.update(part.skipped)
    out.files[rel] = {
        "lines_taken": taken,
        "sweep_rows": len(part.rows),
        "rejected": len(part.rejects),
        "skipped": dict(sorted(part.skipped.items())),
    }
    return f


def globbed(root: Path, pattern: str, what: str) -> list[Path]:
    if root.exists() and not root.is_dir():
        raise OpcostError(f"{root} is a file; expected the folder of {what}")
    files = sorted(root.glob(pattern))
    if not files:
        raise OpcostError(f"no {pattern} under {root} ({what}): run `dvc pull`")
    return files


def zeus(root: Path, source: str) -> SweepRead:
    out = SweepRead()
    for f in globbed(root, "summary_power_*.csv", "Zeus power-limit traces"):
        gpu = table_name(f.stem.removeprefix("summary_power_").upper())  # the device-table key

        def rows_of(line: Line, rec: dict[str, str], gpu: str = gpu) -> list[dict[str, Any]]:
            limit, t, p = number(rec, "power_limit"), number(rec, "time_per_epoch"), number(rec, "average_power")
            workload = "/".join(
                [text(rec, "dataset"), text(rec, "network"), f"bs{whole(rec, 'batch_size')}", text(rec, "optimizer")]
            )
            return [
                sweep_row(
                    source,
                    gpu,
                    workload,
                    "power_limit_w",
                    limit,
                    t,
                    {"unit": "epoch"},
                    power_w=p,
                    energy_j=t * p,
                    power_limit_w=limit,
                )
            ]

        read_sweep_file(f, f.name, ZEUS_COLUMNS, rows_of, out)
    return out


def dvfs(root: Path, source: str) -> SweepRead:
    out = SweepRead()
    path = root / "dvfs-conv.csv"

    def rows_of(line: Line, rec: dict[str, str]) -> list[dict[str, Any]]:
        core, mem = number(rec, "coreF"), number(rec, "memF")
        t, p = number(rec, "time/us") * 1e-6, number(rec, "power/W")
        app = f"{text(rec, 'appName')}/{text(rec, 'argNo')}"
        detail = {"gflops": number(rec, "GFLOPS"), "gflops_per_w": number(rec, "GFLOPS/W"), "unit": "call"}
        common = dict(power_w=p, energy_j=t * p, core_clock_mhz=core, mem_clock_mhz=mem)
        return [
            sweep_row(
                source, DVFS_DEVICE, f"{app}@mem{rec['memF'].strip()}", "core_clock_mhz", core, t, detail, **common
            ),
            sweep_row(
                source, DVFS_DEVICE, f"{app}@core{rec['coreF'].strip()}", "mem_clock_mhz", mem, t, detail, **common
            ),
        ]

    read_sweep_file(path, path.name, DVFS_COLUMNS, rows_of, out)
    # the long table: every core-clock row first, then every memory-clock row (as before)
    out.rows = [r for r in out.rows if r["knob"] == "core_clock_mhz"] + [
        r for r in out.rows if r["knob"] == "mem_clock_mhz"
    ]
    return out


DVFS_DEVICE = "unnamed Maxwell/Pascal GPU (dvfs-conv)"
