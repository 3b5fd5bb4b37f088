"""Issue 24.6: unbounded and unguarded inputs are refused in one line, before any work."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from opcost.cli import app


def _one_line_error(args: list[str]) -> str:
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 2, (r.exit_code, r.output, r.exception)
    lines = [ln for ln in r.stderr.splitlines() if "No CUDA runtime is found" not in ln]  # torch's, at import
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    return lines[0]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--trials", "99999999999999999999"], "trials must be 1..1000"),
        (["--window", "1e308"], "window_s = 1e+308 is more than the 3600 allowed"),
        (["--min-time", "1e308"], "min_time_s = 1e+308 is more than the 600 allowed"),
    ],
)
def test_campaign_knobs_are_bounded(extra, message):
    assert message in _one_line_error(["profile", "--models", "resnet18:1,3,32,32", "--dry-run", *extra])


def test_bad_out_paths_are_one_line(tmp_path):
    a_file = tmp_path / "f"
    a_file.write_text("x")
    msg = _one_line_error(["profile", "--models", "resnet18:1,3,32,32", "--out", str(a_file / "sub")])
    assert f"--out {a_file / 'sub'}: {a_file} is a file, not a folder" in msg
    msg = _one_line_error(["profile", "--models", "resnet18:1,3,32,32", "--out", str(a_file)])
    assert "is a file; give a folder" in msg


def test_bad_plot_paths_are_one_line(tmp_path):
    base = ["recommend", "--model", "resnet18", "--input-shape", "1,3,32,32"]
    missing = tmp_path / "no" / "such" / "u.png"
    msg = _one_line_error([*base, "--plot", str(missing)])
    assert f"--plot {missing}: folder {missing.parent} does not exist" in msg
    assert "is a folder; give a file name" in _one_line_error([*base, "--plot", str(tmp_path)])


def test_promote_target_is_checked(tmp_path, monkeypatch, repo_root):
    import shutil

    shutil.copy(repo_root / "params.yaml", tmp_path / "params.yaml")
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    monkeypatch.setenv("OPCOST_ROOT", str(tmp_path))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'm.db'}")
    assert "may use only letters" in _one_line_error(["promote", "--target", "../../x"])
    msg = _one_line_error(["promote", "--target", "B200-inference"])
    assert "--target 'B200-inference' is not a train target" in msg
    assert not (tmp_path / "m.db").exists()  # refused before the store was touched
