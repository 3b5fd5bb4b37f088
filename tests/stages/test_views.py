"""DVC views that fit a terminal and work offline (issue 23): the one metrics file holds six headline
figures (known-answer medians), `dvc metrics show` fits 120 columns, and `dvc plots show` renders
image plots that load nothing from the network, with y = x and a colour per family."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import yaml

from opcost.paths import Paths
from opcost.stages import views

REPO = Path(__file__).resolve().parents[2]


def synthetic_reports(root: Path) -> Paths:
    paths = Paths(root)
    train = {
        "A-inference": {"networks": {"time_mape_pct": 10.0, "energy_mape_pct": 4.0}, "time": {"twe_pct": 20.0}},
        "B-inference": {"networks": {"time_mape_pct": 30.0, "energy_mape_pct": 8.0}, "time": {"twe_pct": 10.0}},
        "C-training": {"networks": {"time_mape_pct": 14.0}, "time": {"twe_pct": 12.0}},  # no energy measured
    }
    paths.train_metrics().parent.mkdir(parents=True)
    paths.train_metrics().write_text(json.dumps(train))
    paths.clock_metrics.parent.mkdir(parents=True)
    paths.clock_metrics.write_text(json.dumps({"logo_pooled_pct": {"time": 35.5, "energy": 26.5}, "gamma": 2.0}))
    paths.xdevice_metrics.parent.mkdir(parents=True)
    paths.xdevice_metrics.write_text(json.dumps({
        "networks": {"all": {"mape": 22.896224, "n": 96}, "thesis": {"mape": 30.1}},
        "ops": {"linear": {"mape": 10.0, "n": 300}, "bmm": {"mape": 30.0, "n": 100}, "conv": {"mape": 20.0, "n": 100},
                "softmax": {"mape": 90.0, "n": 1000}},
    }))  # fmt: skip
    paths.validate_dir.mkdir(parents=True)
    pd.DataFrame({
        "model": ["resnet18", "resnet50", "vgg16", "alexnet"], "family": ["resnet", "resnet", "vgg", "alexnet"],
        "measured_t_s": [0.01, 0.03, 0.05, 0.002], "predicted_t_s": [0.011, 0.028, 0.06, 0.0021],
        "summed_t_s": [0.009, 0.025, 0.04, 0.0015],
    }).to_csv(paths.validate_out_of_sample, index=False)  # fmt: skip
    pd.DataFrame({"model": ["resnet18", "vgg16"], "measured_t_s": [0.01, 0.05], "summed_t_s": [0.008, 0.04]}).to_csv(
        paths.validate_summed, index=False
    )
    return paths


def test_headline_is_eight_out_of_sample_figures(tmp_path):
    paths = synthetic_reports(tmp_path)
    assert views.headline(paths) == {
        "net_t_mape": 14.0,  # median of 10, 30, 14
        "net_e_mape": 6.0,  # median of 4, 8 (C has no energy)
        "net_t_max": 30.0,
        "op_t_twe": 12.0,
        "clk_t": 35.5,
        "clk_e": 26.5,
        "xd_net": 22.9,  # every network, leave-one-GPU-out (rounded to 0.1)
        "xd_mm": 16.0,  # (10 * 300 + 30 * 100 + 20 * 100) / 500: GEMM-like kinds only, row-weighted
    }


def test_gemm_kinds_are_the_cross_device_models():
    from opcost.model.crossdevice.xdevice import GEMM_XKINDS

    assert set(views.GEMM_KINDS) == set(GEMM_XKINDS)


def test_scatter_draws_y_equals_x_and_one_colour_per_family(tmp_path, monkeypatch):
    import matplotlib.axes

    paths = synthetic_reports(tmp_path)
    seen: list[tuple[str, tuple]] = []
    real_scatter, real_plot = matplotlib.axes.Axes.scatter, matplotlib.axes.Axes.plot

    def spy_scatter(self, *a, **k):
        seen.append(("scatter", (k.get("label"), tuple(k.get("color")))))
        return real_scatter(self, *a, **k)

    def spy_plot(self, *a, **k):
        seen.append(("plot", (k.get("label"), tuple(a[0]), tuple(a[1]))))
        return real_plot(self, *a, **k)

    monkeypatch.setattr(matplotlib.axes.Axes, "scatter", spy_scatter)
    monkeypatch.setattr(matplotlib.axes.Axes, "plot", spy_plot)
    made = views.plots(paths)
    assert [p.name for p in made] == ["predicted_vs_measured.png", "summed_vs_measured.png"]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in made)
    first = seen[: [k for k, _ in seen].index("plot") + 1]
    families = [v[0] for k, v in first if k == "scatter"]
    colours = [v[1] for k, v in first if k == "scatter"]
    assert families == ["alexnet", "resnet", "vgg"] and len(set(colours)) == 3
    (line,) = [v for k, v in first if k == "plot"]
    assert line[0] == "y = x" and line[1] == line[2] == (0.002, 0.06)


def _dvc() -> str:
    return shutil.which("dvc") or str(Path(sys.executable).parent / "dvc")


def test_dvc_metrics_fit_120_columns_and_plots_load_nothing(tmp_path):
    """The pipeline's own declarations: only the views stage declares metrics and plots; in a scratch
    DVC project holding just that stage, `dvc metrics show` is at most 120 columns wide and the HTML of
    `dvc plots show` references no http(s) URL."""
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    declaring = sorted(n for n, s in stages.items() if s.get("metrics") or s.get("plots"))
    assert declaring == ["views"]
    for entry in stages["views"]["plots"]:
        name = entry if isinstance(entry, str) else next(iter(entry))
        assert isinstance(entry, str) or not {"template", "x", "y"} & set(entry[name] or {}), "a Vega plot"
    root = tmp_path / "proj"
    root.mkdir()
    paths = synthetic_reports(root)
    views.run(paths, None)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    subprocess.run([_dvc(), "init", "-q"], cwd=root, check=True, env=env)
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"views": stages["views"]}}))
    shown = subprocess.run([_dvc(), "metrics", "show"], cwd=root, capture_output=True, text=True, env={
        **env, "COLUMNS": "400"})  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "net_t_mape" in shown.stdout
    assert max(len(line) for line in shown.stdout.splitlines()) <= 120, shown.stdout
    out = tmp_path / "html"
    res = subprocess.run([_dvc(), "plots", "show", "-o", str(out)], cwd=root, capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr
    html = (out / "index.html").read_text()
    assert html.count("<img") == 2
    assert not re.findall(r"https?://", html), re.findall(r"https?://\S+", html)


def test_views_without_reports_writes_empty_headline(tmp_path):
    """A project that has not trained: the headline says None rather than failing."""
    head = views.headline(Paths(tmp_path))
    assert set(head) == set(views.HEADLINE_KEYS) and all(v is None for v in head.values())


def test_a_sweep_is_one_line_per_gpu_by_hand():
    """GPU A: curve w1 at 100 and 200 MHz (energy 2, 1), w2 at 100, 150, 200 (1.5, 1.2, 1): w1 read at 150 on
    its line (1.5), so the medians are 1.75, 1.35, 1; GPU B's one curve is itself. Curves swept over different
    grids share the GPU's line; a curve counts only inside its own range (w3 stops at 150)."""
    df = pd.DataFrame({
        "source": ["s"] * 8, "device": ["A"] * 5 + ["B"] * 3,
        "workload": ["w1", "w1", "w2", "w2", "w2", "w3", "w3", "w3"],
        "core_clock_mhz": [100, 200, 100, 150, 200, 100, 125, 150], "energy_rel": [2, 1, 1.5, 1.2, 1, 1.3, 1.1, 1],
    })  # fmt: skip
    s = views.sweep_series(df, "core_clock_mhz").set_index(["device", "x"])
    assert list(s.loc["A", "median"]) == [1.75, 1.35, 1.0] and list(s.loc["A", "workloads"]) == [2, 2, 2]
    assert list(s.loc["B", "median"]) == [1.3, 1.1, 1.0] and list(s.loc["B"].index) == [100.0, 125.0, 150.0]
    assert list(s.loc["A", "q25"]) == [1.625, 1.275, 1.0]


def test_the_sweep_plots_are_one_labelled_line_per_gpu_of_their_data():
    """For each sweep plot `views` draws (its data files are the stage's deps in dvc.yaml, its images under the
    stage's `plots:` folder): one line per GPU of the data file, a legend naming each GPU, and both axes in
    words with their units; never one line per curve (up to 477 a knob)."""
    import matplotlib.pyplot as plt

    stage = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]["views"]
    assert stage["plots"] == ["reports/plots"]
    data = [d for d in stage["deps"] if re.fullmatch(r"reports/validate/sweeps_(\w+)\.csv", d)]
    assert sorted(re.fullmatch(r"reports/validate/sweeps_(\w+)\.csv", d)[1] for d in data) == sorted(views.SWEEP_KNOBS)
    units = {"power_limit_w": "[W]", "core_clock_mhz": "[MHz]", "mem_clock_mhz": "[MHz]"}
    for dep in data:
        knob = re.fullmatch(r"reports/validate/sweeps_(\w+)\.csv", dep)[1]
        df = pd.read_csv(REPO / dep)
        fig = views.sweep_figure(df, knob, "t")
        (ax,) = fig.axes
        drawn = [ln for ln in ax.get_lines() if not ln.get_label().startswith("_")]
        gpus = sorted(df["device"].unique())
        assert len(drawn) == len(gpus) < df.groupby(["source", "device", "workload"]).ngroups
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        assert [t.split(": median of ")[0] for t in legend] == gpus
        assert ax.get_xlabel().endswith(units[knob]) and " " in ax.get_xlabel()
        assert ax.get_ylabel() == "energy / energy at the highest setting"
        plt.close(fig)
