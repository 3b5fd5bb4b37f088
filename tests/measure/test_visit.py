"""A GPU visit and its landing: the profile path without DVC, MLflow, XGBoost or scikit-learn (in a fresh
process), the H200 probe landed with its energy re-derived and flagged, a campaign measured on a replayed real
counter packed and landed unflagged, and archives that must be refused."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pandas as pd
import pytest
from torch import nn

from fake_nvml import H200_PROBE, ReplayNvml
from opcost.errors import OpcostError
from opcost.measure.campaign import Campaign, Unit, make_plan
from opcost.measure.land import land
from opcost.measure.profile import adhoc_plan
from opcost.measure.replay import CounterTrace, read_power_log
from opcost.measure.visit import pack
from opcost.ops.spec import CATEGORY_MODULE, OpSpec, TensorInput, module_attrs, target_of_class
from opcost.params.extract import ModelInputSet
from opcost.params.profile import CampaignParams

ROOT = Path(__file__).resolve().parents[2]
PROBE = CampaignParams(
    name="h200-probe",
    device="cuda:0",
    modes=("inference", "training"),
    sets=("resnet50:32x3x224x224",),
    trials=2,
    min_time_s=0.05,
    window_s=0.2,
    energy_source="auto",
)

BLOCKED = ("dvc", "mlflow", "xgboost", "sklearn", "scipy")


def hide_packages(folder: Path) -> Path:
    """A folder that, first on sys.path, makes each BLOCKED package fail to import as on a machine without it
    (find_spec still answers, as it does for any folder on the path: torch asks it about optional packages)."""
    for name in BLOCKED:
        (folder / name).mkdir(parents=True)
        (folder / name / "__init__.py").write_text(f"raise ModuleNotFoundError('{name} is not on a visit machine')\n")
    return folder


@pytest.mark.slow
def test_the_profile_path_runs_without_dvc_mlflow_xgboost_or_sklearn(tmp_path):
    # a fresh process, so that nothing another test imported can hide an import of a blocked package
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(hide_packages(tmp_path / "hidden"))!r})
        BLOCKED = {BLOCKED!r}
        from typer.testing import CliRunner
        from opcost.cli import app
        r = CliRunner().invoke(app, ["profile", "--device", "cpu", "--models", "resnet18:2,3,32,32", "--trials", "1",
            "--min-time", "0.005", "--window", "0.01", "--energy-source", "none", "--out", {str(tmp_path / "run")!r},
            "--no-progress"])
        assert r.exit_code == 0, r.output
        d = CliRunner().invoke(app, ["visit", "--campaign", "visit-h200", "--out", "v.tar.gz", "--dry-run"])
        assert d.exit_code == 0 and '"estimated_seconds"' in d.output, d.output
        v = CliRunner().invoke(app, ["visit", "--campaign", "visit-h200", "--out", {str(tmp_path / "v.tar.gz")!r}])
        assert v.exit_code == 2 and "CUDA" in v.output, v.output  # no GPU here: one line, not a traceback
        import opcost.measure.visit, opcost.measure.land, opcost.measure.gputime  # noqa: E401
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
        assert not loaded, loaded
        print("OK")
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "OPCOST_ROOT"}  # this repository's params.yaml, not a test's
    r = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]


def test_the_probe_lands_with_every_energy_row_flagged(tmp_path):
    out = tmp_path / "raw" / "h200-probe"
    plan = adhoc_plan(PROBE, [ModelInputSet("resnet50", (32, 3, 224, 224), modes=PROBE.modes)])
    r = land(H200_PROBE, out, PROBE, plan)
    assert r["rows"] == 224 and r["flagged"] == 224  # 220 op rows and 4 network rows, all 0.2 s unaligned windows
    # measured under torch 2.11, whose BatchNorm2d has no `bias` argument: its 12 BatchNorm ops had other ids
    assert r["landed"]["rederived"][0] == "op_id of 12 ops measured under torch 2.11.0+cu130"
    planned = {u.item_id for u in plan.units if u.item_type == "op"}
    assert set(pd.read_parquet(out / "timings.parquet")["op_id"]) == planned
    meta = json.loads((out / "campaign.json").read_text())
    period = meta["energy_counter"]["default"]
    assert 0.09 <= period["median_s"] <= 0.11  # the card's counter: about every 100 ms
    assert meta["landed"]["measured_as"] == "opc" and meta["campaign"] == "h200-probe"
    t = pd.read_parquet(out / "timings.parquet")
    assert set(t["campaign"]) == {"h200-probe"} and t["energy_bound"].min() > 0.02
    assert t["energy_flag"].str.startswith("energy bound").all()
    # what the probe measured stays: its times are untouched
    orig = pd.read_parquet(H200_PROBE / "timings.parquet")
    assert (t["mean_s"].to_numpy() == orig["mean_s"].to_numpy()).all()
    s = pd.read_parquet(out / "power_samples.parquet")
    assert s["counter_period_s"].notna().all()
    assert (out / "energy_counter_check.json").is_file()


def test_landing_refuses_other_parameters_and_bad_archives(tmp_path):
    other = CampaignParams(**{**PROBE.__dict__, "window_s": 0.5})
    with pytest.raises(OpcostError, match="window_s=0.2"):
        land(H200_PROBE, tmp_path / "x", other, None)
    with pytest.raises(OpcostError, match="other parts than campaign h200-probe plans"):
        land(
            H200_PROBE,
            tmp_path / "x",
            PROBE,
            make_plan(PROBE, [Unit("op", "0" * 16, "inference", "Conv2d", spec=CONV)]),
        )

    def archive(members: dict[str, bytes], link: str | None = None) -> Path:
        path = tmp_path / f"a{len(list(tmp_path.iterdir()))}.tar.gz"
        with tarfile.open(path, "w:gz") as tar:
            for name, data in members.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            if link:
                info = tarfile.TarInfo("c/timings.parquet")
                info.type = tarfile.SYMTYPE
                info.linkname = link
                tar.addfile(info)
        return path

    good = {f"c/{f.name}": f.read_bytes() for f in H200_PROBE.iterdir()}
    for bad, why in (
        ({**good, "../evil": b"x"}, "not a campaign file"),
        ({**good, "c/run.sh": b"x"}, "not a campaign file"),
        ({k: v for k, v in good.items() if "networks" not in k}, "lacks networks.parquet"),
        ({**good, "c/timings.parquet": b"not parquet"}, "not a readable Parquet"),
    ):
        with pytest.raises(OpcostError, match=why):
            land(archive(bad), tmp_path / "x", PROBE, None)
    linked = {k: v for k, v in good.items() if "timings" not in k}
    with pytest.raises(OpcostError, match="not a campaign file"):
        land(archive(linked, link="/etc/passwd"), tmp_path / "x", PROBE, None)
    assert not (tmp_path / "x").exists()  # nothing half-written


_conv = nn.Conv2d(3, 4, 3, padding=1)
CONV = OpSpec(
    kind="Conv2d",
    category=CATEGORY_MODULE,
    target=target_of_class(nn.Conv2d),
    attrs=module_attrs(_conv),
    args=[{"tensor": 0}],
    inputs=(TensorInput((2, 3, 16, 16), "float32"),),
)


@pytest.mark.slow
def test_a_campaign_on_a_replayed_h200_counter_packs_and_lands_unflagged(tmp_path):
    samples = read_power_log(H200_PROBE / "power_samples.parquet")
    item = samples.groupby(["item_id", "mode"]).size().index[0]
    trace = CounterTrace.for_item(samples, *item)
    c = CampaignParams(
        name="replayed", device="cpu", sets=("x",), trials=2, min_time_s=0.01, window_s=0.05, chunks=3,
        energy_source="nvml",
    )  # fmt: skip
    plan = make_plan(c, [Unit("op", "c0nv", "inference", "Conv2d", spec=CONV)])
    out = tmp_path / "replayed"
    meta = Campaign(plan, out, tmp_path / "parts", nvml_lib=ReplayNvml(trace), state_dir=tmp_path / "state").run(
        show_progress=False
    )
    assert meta["energy_rows"] == {"target_bound": 0.02, "rows": 2, "flagged": 0, "needed_window_s": None}
    period = meta["energy_counter"]["default"]
    assert 0.07 <= period["median_s"] <= 0.13  # the replayed card's period, measured by the campaign
    t = pd.read_parquet(out / "timings.parquet")
    assert (t["energy_bound"] <= 0.02).all() and (t["counter_updates"] >= 2).all()
    # power: the replayed op's own, within the bound
    true_power = trace.cycle_j / trace.cycle_s
    assert ((t["power_w"] / true_power - 1).abs() <= t["energy_bound"] + 1e-9).all()
    archive = tmp_path / "replayed.tar.gz"
    size = pack(out, archive, "replayed")
    assert 0 < size < 16 * 2**20
    landed = land(archive, tmp_path / "raw" / "replayed", c, plan)
    assert landed["flagged"] == 0 and landed["landed"]["rederived"] == []
    # a landed folder is complete for its campaign whatever measuring code runs later
    again = Campaign(plan, tmp_path / "raw" / "replayed", tmp_path / "parts2", state_dir=tmp_path / "state")
    assert again.completed() is not None


def test_a_landed_campaign_with_every_energy_row_flagged_is_complete_not_failed():
    # the stage reruns over a landed campaign (the probe: every energy row flagged) and measures nothing: it must
    # not fail `dvc repro` for what a measuring run is refused for
    from opcost.stages.profile import failure, summary

    result = {
        "campaign": "h200-probe",
        "complete": True,
        "planned_parts": {"count": 112},
        "landed": {"from": "h200-probe"},
        "rows": {"timings": 220, "networks": 4, "power_samples": 2409},
        "failed_rows": 0,
        "energy_rows": {"target_bound": 0.02, "rows": 224, "flagged": 224, "needed_window_s": 2.0},
    }
    assert failure(result) is None
    assert "landed from h200-probe" in summary(result) and "224 of 224 rows flagged" in summary(result)
    assert failure({**result, "complete": False, "parts_resumed": 0, "environment": {}}) is not None


def test_a_campaign_lands_its_own_parts_from_a_larger_archive_and_is_complete(tmp_path):
    # one run measured both modes; a campaign of its inference parts alone takes those and counts as complete
    inference = CampaignParams(**{**PROBE.__dict__, "modes": ("inference",)})
    plan = adhoc_plan(inference, [ModelInputSet("resnet50", (32, 3, 224, 224), modes=("inference",))])
    out = tmp_path / "raw" / "inference"
    r = land(H200_PROBE, out, inference, plan)
    assert r["rows"] == 112 and "the 56 of its 112 parts that campaign h200-probe plans" in r["landed"]["rederived"]
    assert set(pd.read_parquet(out / "power_samples.parquet")["mode"]) == {"inference"}
    assert Campaign(plan, out, tmp_path / "parts", state_dir=tmp_path / "state").completed() is not None
