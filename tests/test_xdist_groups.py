"""`make test` runs under pytest-xdist with `--dist loadgroup`: the tests of the small end-to-end project
(conftest.PIPELINE_FIXTURES) must share one worker, which builds the project once. When they did not
(pytest 9.2 with xdist 3.8 drops the group, and a collection hook that marks after xdist's is too late),
CI's two workers each built it and `make test` ran 18 min. A fresh pytest run on a toy project whose
conftest uses ours: every test that uses `pipeline_root` runs on the same worker."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CONFTEST = textwrap.dedent(
    """
    import importlib.util, os
    import pytest

    spec = importlib.util.spec_from_file_location("opcost_tests_conftest", {conftest!r})
    ours = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ours)
    pytest_collection_modifyitems = ours.pytest_collection_modifyitems  # the hook under test

    @pytest.fixture(scope="session")
    def pipeline_root():
        return os.environ.get("PYTEST_XDIST_WORKER")
    """
)
TESTS = textwrap.dedent(
    """
    import os, time
    from pathlib import Path

    def _log(kind):
        time.sleep(0.3)
        with open(Path(__file__).parent / "workers.txt", "a") as f:
            f.write(f"{kind} {os.environ['PYTEST_XDIST_WORKER']}\\n")
    """
) + "".join(
    f"\ndef test_pipeline_{i}(pipeline_root):\n    _log('pipeline')\n\ndef test_other_{i}():\n    _log('other')\n"
    for i in range(6)
)


def test_the_small_project_s_tests_share_one_worker(tmp_path):
    (tmp_path / "conftest.py").write_text(CONFTEST.format(conftest=str(REPO / "tests" / "conftest.py")))
    (tmp_path / "test_toy.py").write_text(TESTS)
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider", "-q"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    lines = [line.split() for line in (tmp_path / "workers.txt").read_text().splitlines()]
    pipeline = {w for kind, w in lines if kind == "pipeline"}
    assert len([1 for kind, _ in lines if kind == "pipeline"]) == 6
    assert len(pipeline) == 1, f"the pipeline tests ran on {sorted(pipeline)}"
    assert {w for _, w in lines} == {"gw0", "gw1"}  # the others are spread: two workers did run
