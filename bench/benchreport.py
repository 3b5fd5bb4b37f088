"""How the bench scripts that write a report end: its JSON under reports/bench/ (Paths.bench_report, the
path of every bench report), rounded like every report (opcost.io.write_report), and one line saying where.
One place, so these scripts cannot drift apart in where or how they write (nine had carried the same three
lines)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

from opcost.io import write_report  # noqa: E402
from opcost.paths import Paths  # noqa: E402


def save(report: Any, name: str) -> int:
    """Write `report` to reports/bench/`name`, print its path; 0, the script's exit status."""
    out = Paths(ROOT).bench_report(name)
    write_report(report, out)
    print(f"wrote {out.relative_to(ROOT)}")
    return 0
