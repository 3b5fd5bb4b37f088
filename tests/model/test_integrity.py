"""model/records/integrity.py's DVC call: the DVC of opcost's own environment, whatever PATH holds."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from opcost.model.records import integrity


def test_dvc_command_is_the_script_beside_python_else_python_m_dvc(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setattr(sys, "executable", str(bin_dir / "python"))
    assert integrity.dvc_command() == [str(bin_dir / "python"), "-m", "dvc"]  # no dvc script there
    (bin_dir / "dvc").write_text("#!/bin/sh\n")
    assert integrity.dvc_command() == [str(bin_dir / "python"), "-m", "dvc"]  # there, but not executable
    os.chmod(bin_dir / "dvc", 0o755)
    assert integrity.dvc_command() == [str(bin_dir / "dvc")]


def test_dvc_status_runs_with_path_emptied(tmp_path, monkeypatch):
    """A tiny DVC project whose one stage never ran: `dvc status` reports it changed, found with PATH=""."""
    subprocess.run([*integrity.dvc_command(), "init", "--no-scm", "-q"], cwd=tmp_path, check=True, capture_output=True)
    (tmp_path / "a.txt").write_text("a\n")
    stage = "stages:\n  copy:\n    cmd: cp a.txt b.txt\n    deps: [a.txt]\n    outs: [b.txt]\n"
    (tmp_path / "dvc.yaml").write_text(stage)
    monkeypatch.setenv("PATH", "")
    changed = integrity.dvc_changed(tmp_path, ["copy"])
    assert changed == {"copy": '[{"changed deps": {"a.txt": "modified"}}, {"changed outs": {"b.txt": "deleted"}}]'}


def test_dvc_status_outside_a_dvc_project_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "")
    with pytest.raises(integrity.OpcostError, match=r"^`dvc status copy` failed \(.*\); cannot vouch for the models$"):
        integrity.dvc_changed(tmp_path, ["copy"])
