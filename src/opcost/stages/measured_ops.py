"""Stage `measured-ops`: op times our campaigns measured on a table GPU, for its transferred answers.

Reads data/evaluated/operations.parquet and writes models/measured/ops.json (model/crossdevice/measured.py): per
device config and mode, each measured op's time per call, its GPU time where its campaign timed it, and its
cross-device row where extract's catalog (data/operations/operations.parquet) knows it (the few-shot
correction's input, model/crossdevice/fewshot.py). `opcost predict` on such a GPU takes these
ops' times from it (source `measured`) and transfers the rest from the cross-device model. Torch-free
and GPU-free: `dvc repro` makes it anywhere from the landed campaigns.
"""

from __future__ import annotations

import sys
from typing import Any

from opcost.io import write_json
from opcost.model.crossdevice.measured import FILE, measured_table, with_gpu_times, with_rows
from opcost.params.load import Params
from opcost.paths import Paths
from opcost.schemas import EVALUATED_OPERATIONS, OPERATIONS, TIMINGS
from opcost.stages._run import execute
from opcost.tables import read_table


def run(paths: Paths, params: Params | None = None) -> dict[str, Any]:
    """Write the table, with each op's GPU time where its campaign's raw timings have it (`with_gpu_times`);
    `params` is unused (the stage reads no parameters)."""
    import pandas as pd

    table = measured_table(read_table(paths.evaluated_operations, EVALUATED_OPERATIONS, "evaluate"))
    frames = []
    for c in sorted({c for e in table["devices"].values() for c in e["campaigns"]}):
        f = paths.raw_dir(c) / "timings.parquet"
        if f.is_file():
            frames.append(read_table(f, TIMINGS, f"profile@{c}"))
    if frames:
        table = with_gpu_times(table, pd.concat(frames, ignore_index=True))
    catalog = read_table(paths.operations, OPERATIONS, "extract").drop_duplicates("op_id").set_index("op_id")
    table = with_rows(table, catalog)
    write_json(table, paths.measured_ops_dir / FILE)
    return table


def summary(table: dict[str, Any]) -> str:
    parts = [
        f"{cfg} "
        + ", ".join(
            f"{len(ops)} {mode} ({sum('gpu_t_s' in v for v in ops.values())} with GPU time, "
            f"{sum('row' in v for v in ops.values())} with a cross-device row)"
            for mode, ops in entry["modes"].items()
        )
        + f" (campaigns {', '.join(entry['campaigns'])})"
        for cfg, entry in table["devices"].items()
    ]
    return "measured-ops: " + ("; ".join(parts) if parts else "no GPU campaign measured ops") + " (op times only)"


def main(argv: list[str] | None = None) -> int:
    return execute(argv, __doc__.splitlines()[0], lambda p: None, lambda paths, params, a: run(paths, params), summary)


if __name__ == "__main__":
    sys.exit(main())
