"""A small deterministic run of bench/fuzz_ingest.py: corrupted copies of the real external files
never crash a parser, never stop a source for one line, never yield a row that breaks its schema,
and every line is taken, rejected or skipped (none lost)."""

from __future__ import annotations

from pathlib import Path

from bench_modules import load_bench

REPO = Path(__file__).resolve().parents[1]


def load_fuzzer():
    return load_bench("fuzz_ingest")


def test_fuzzed_real_files_are_rejected_line_by_line_never_crash(external_data):
    fz = load_fuzzer()
    r = fz.fuzz(inputs=250, seed=0, external=external_data, timeout=60)
    assert r["inputs_tried"] == 250
    assert r["outcomes"]["crash"] == 0 and r["outcomes"]["hang"] == 0, r["failures"]
    assert r["outcomes"]["aborted_on_a_line"] == 0, r["failures"]
    assert r["rows_violating_schema"] == 0 and r["lines_unaccounted"] == 0, r["failures"]
    # the run did damage: whole files were refused, bad lines rejected, good rows still taken
    assert r["outcomes"]["clean_file_error"] > 0 and r["lines_rejected"] > 100 and r["rows_accepted"] > 1000
    assert set(r["by_target"]) >= {"thesis-ops-inference", "thesis-ops-training", "perseus-stage-profiles"}
    assert all(sum(v.values()) > 0 for v in r["by_target"].values())
    assert set(fz.LINE_MUTATIONS) <= set(r["by_mutation"])


def test_same_seed_same_report(external_data):
    fz = load_fuzzer()
    a, b = (fz.fuzz(inputs=40, seed=3, external=external_data) for _ in range(2))
    a.pop("seconds"), b.pop("seconds")
    assert a == b
