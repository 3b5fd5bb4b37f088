"""FLOPs and compulsory DRAM bytes of the GPU-FREQUENCY-DVFS kernels (clock_kernels.csv beside this module).

Why: that sweep (RTX 3080 Ti) records no FLOPs, bytes or counters, so every one of its curves took the clock
model's fallback share (from P_ref / TDP), which cannot tell its kernels apart. Where a
kernel's problem size can be traced to a source, its FLOPs and bytes follow from its loop nest: properties of
the code, not measurements of the GPU, so a held-out GPU may use them.

The file: one row per kernel as the sweeps table names it (`<workload>/<kernel>`), `flops` (arithmetic
operations of the loop body as written, one per add, mul, div or sqrt), `bytes` (compulsory DRAM traffic:
every array the kernel touches read once, every array it writes written once, 4-byte floats; its `formula`
says where caches would change that), `size_source` (where the problem size comes from: the header or file
the measured binary was built from) and `formula` (the sizes and both expressions). A kernel without a row
has no traceable size and keeps the fallback share. Loaded as data (CSV), never executed.
"""

from __future__ import annotations

import csv
import hashlib
import math
from functools import lru_cache
from pathlib import Path

from opcost.errors import OpcostError

CLOCK_KERNELS_FILE = Path(__file__).with_name("clock_kernels.csv")
# The shipped table's SHA-256: DVC stages depend on this module (tests/test_stage_deps.py allows only modules
# in src/ deps), so an edit of the table must come with an edit here, and `dvc repro` reruns what it feeds.
CLOCK_KERNELS_SHA256 = "9b4ba830f2960a484ef4c882e56a20f8fe41f6601678adade3422010b1472f17"
COLUMNS = ("kernel", "flops", "bytes", "size_source", "formula")


def read_clock_kernels(path: Path = CLOCK_KERNELS_FILE) -> dict[str, tuple[float, float]]:
    """{kernel: (flops, bytes)} from `path`; one clear OpcostError naming the file and line on bad input."""
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            if tuple(reader.fieldnames or ()) != COLUMNS:
                raise OpcostError(f"{path}: expected the columns {', '.join(COLUMNS)}, found {reader.fieldnames}")
            out: dict[str, tuple[float, float]] = {}
            for n, rec in enumerate(reader, start=2):
                name = (rec["kernel"] or "").strip()
                if "/" not in name:
                    raise OpcostError(f"{path} line {n}: kernel {name!r} is not of the form <workload>/<kernel>")
                if name in out:
                    raise OpcostError(f"{path} line {n}: kernel {name} listed twice")
                vals = []
                for col in ("flops", "bytes"):
                    try:
                        v = float(rec[col])
                    except (TypeError, ValueError):
                        raise OpcostError(f"{path} line {n}: {col} = {rec[col]!r}, expected a number") from None
                    if not math.isfinite(v) or v < 0:
                        raise OpcostError(f"{path} line {n}: {col} = {rec[col]!r}, expected a finite number >= 0")
                    vals.append(v)
                if vals[1] <= 0:
                    raise OpcostError(f"{path} line {n}: bytes = {rec['bytes']!r}, expected > 0 (a kernel reads)")
                if not (rec["size_source"] or "").strip():
                    raise OpcostError(f"{path} line {n}: size_source is empty; every size says where it came from")
                out[name] = (vals[0], vals[1])
    except OSError as exc:
        raise OpcostError(f"{path}: cannot read the kernel FLOPs/bytes table ({exc.strerror})") from None
    return out


@lru_cache(maxsize=1)
def clock_kernels() -> dict[str, tuple[float, float]]:
    """The shipped table (cached; read-only use), refused if it is not the table CLOCK_KERNELS_SHA256 names."""
    try:
        digest = hashlib.sha256(CLOCK_KERNELS_FILE.read_bytes()).hexdigest()
    except OSError as exc:
        raise OpcostError(f"{CLOCK_KERNELS_FILE}: cannot read the kernel FLOPs/bytes table ({exc.strerror})") from None
    if digest != CLOCK_KERNELS_SHA256:
        raise OpcostError(
            f"{CLOCK_KERNELS_FILE}: SHA-256 {digest} is not the {CLOCK_KERNELS_SHA256} its loader names; after editing "
            "the table set CLOCK_KERNELS_SHA256 in opcost/data/clock_kernels.py (so DVC reruns the stages it feeds)"
        )
    return read_clock_kernels()
