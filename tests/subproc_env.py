"""The src/ folder this test process imports opcost from, for the subprocesses a test starts.

Under bench/mutate.py that is the mutant's copy (PYTHONPATH points there): a subprocess given the
repository's src/ instead would run the unmutated code, and a mutation only a subprocess test can see
would survive unseen."""

from __future__ import annotations

from pathlib import Path

import opcost


def src_dir() -> str:
    return str(Path(opcost.__file__).resolve().parents[1])
