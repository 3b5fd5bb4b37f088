"""A small deterministic run of the ingest fuzzer, as the command that writes reports/bench/fuzz_ingest.json
(docs/pipeline.md, "ingest@<source> and evaluate"): corrupted copies of the real external files never crash a
parser, never stop a source for one line, never yield a row that breaks its schema, and every line is taken,
rejected or skipped (none lost).

The fuzzer runs as a subprocess (`python bench/fuzz_ingest.py --out ...`), never imported: a bench script's
functions are no API a test may pin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from subproc_env import src_dir

REPO = Path(__file__).resolve().parents[1]


def run_fuzzer(out: Path, inputs: int, seed: int) -> tuple[subprocess.CompletedProcess, dict]:
    env = {**os.environ, "PYTHONPATH": src_dir()}
    env.pop("OPCOST_ROOT", None)  # the repository's data/external/, as the external_data fixture pulled it
    cmd = [sys.executable, "bench/fuzz_ingest.py", "--inputs", str(inputs), "--seed", str(seed), "--timeout", "60",
           "--out", str(out), "--no-progress"]  # fmt: skip
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert out.is_file(), proc.stderr[-2000:]
    return proc, json.loads(out.read_text())


def test_fuzzed_real_files_are_rejected_line_by_line_never_crash(external_data, tmp_path):
    proc, r = run_fuzzer(tmp_path / "fuzz.json", 250, 0)
    assert proc.returncode == 0, r["failures"]
    assert r["inputs_tried"] == 250
    assert r["outcomes"]["crash"] == 0 and r["outcomes"]["hang"] == 0, r["failures"]
    assert r["outcomes"]["aborted_on_a_line"] == 0, r["failures"]
    assert r["rows_violating_schema"] == 0 and r["lines_unaccounted"] == 0, r["failures"]
    # the run did damage: whole files were refused, bad lines rejected, good rows still taken
    assert r["outcomes"]["clean_file_error"] > 0 and r["lines_rejected"] > 100 and r["rows_accepted"] > 1000
    assert set(r["by_target"]) >= {"thesis-ops-inference", "thesis-ops-training", "perseus-stage-profiles"}
    assert all(sum(v.values()) > 0 for v in r["by_target"].values())
    # the line mutations the fuzzer knows, each applied at least once in 250 inputs
    line_mutations = {"byte_flip", "truncate_line", "delete_token", "duplicate_token", "huge_number", "nan_inf",
                      "zero_negative", "random_unicode", "nul_bytes", "stray_cr", "swap_tokens"}  # fmt: skip
    assert line_mutations <= set(r["by_mutation"])


def test_same_seed_same_report(external_data, tmp_path):
    a, b = (run_fuzzer(tmp_path / f"{n}.json", 40, 3)[1] for n in "ab")
    a.pop("seconds"), b.pop("seconds")
    assert a == b
