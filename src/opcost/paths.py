"""Where things live: the repository root and every path a stage reads or writes (`Paths`).

Every file path a stage reads or writes is a property of `Paths`, so `dvc.yaml` and the code cannot
drift apart silently (tests compare them). Apart from the parameters because most modules need a path
and no parameter parsing.

The repository root is found without relying on where the package is installed, because under
`dvc exp run --temp` and `--queue` the stage runs in a copy of the repository: inside a DVC stage
(`DVC_ROOT` set) the nearest parent of the stage's working directory that holds `dvc.yaml`; else
`OPCOST_ROOT`, then that same nearest parent, else the working directory. `DVC_ROOT` itself names
the user's workspace in temp and queued executors, never the copy, so it only locates the shared
MLflow store (model/records/tracking.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


def find_root(start: Path | None = None) -> Path:
    """The repository root (see module docstring for the order of precedence). Inside a DVC stage
    the working directory decides: `DVC_ROOT` (and an inherited `OPCOST_ROOT`) may name the user's
    workspace while the stage runs in an experiment's copy."""
    if os.environ.get("OPCOST_ROOT") and not os.environ.get("DVC_ROOT"):
        return Path(os.environ["OPCOST_ROOT"]).resolve()
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if (candidate / "dvc.yaml").is_file():
            return candidate
    return here


@dataclass(frozen=True)
class Paths:
    """Every path a stage reads or writes, relative to one root."""

    root: Path

    @property
    def params(self) -> Path:
        return self.root / "params.yaml"

    @property
    def extract_sets(self) -> Path:
        """The model-input sets extract traces (a dependency of extract, not a params file: exp show stays narrow)."""
        return self.root / "sets.yaml"

    @property
    def operations_dir(self) -> Path:
        return self.root / "data" / "operations"

    @property
    def operations(self) -> Path:
        return self.operations_dir / "operations.parquet"

    @property
    def occurrences(self) -> Path:
        return self.operations_dir / "occurrences.parquet"

    @property
    def extract_report_dir(self) -> Path:
        return self.root / "reports" / "extract"

    @property
    def extract_coverage(self) -> Path:
        """Per-set coverage detail (not a DVC metrics file: too many columns)."""
        return self.extract_report_dir / "coverage.json"

    @property
    def extract_summary(self) -> Path:
        """Headline figures of extract (a plain output; the DVC metrics file is reports/metrics.json)."""
        return self.extract_report_dir / "summary.json"

    def host_file(self, name: str) -> Path:
        """A host profile `opcost calibrate-host --name NAME` wrote (model/crossdevice/hosts.py): hosts/NAME.json, a
        user file (commit it to share it), not a DVC output."""
        return self.root / "hosts" / f"{name}.json"

    def raw_dir(self, campaign: str) -> Path:
        """DVC output of `profile@<campaign>`: timings, power samples, networks, campaign.json."""
        return self.root / "data" / "raw" / campaign

    def ingested_dir(self, source: str) -> Path:
        """DVC output of `ingest@<source>`."""
        return self.root / "data" / "ingested" / source

    @property
    def raw_root(self) -> Path:
        return self.root / "data" / "raw"

    @property
    def ingested_root(self) -> Path:
        return self.root / "data" / "ingested"

    @property
    def evaluated_dir(self) -> Path:
        return self.root / "data" / "evaluated"

    @property
    def evaluated_operations(self) -> Path:
        return self.evaluated_dir / "operations.parquet"

    @property
    def evaluated_networks(self) -> Path:
        return self.evaluated_dir / "networks.parquet"

    @property
    def evaluated_sweeps(self) -> Path:
        return self.evaluated_dir / "sweeps.parquet"

    @property
    def evaluated_targets_dir(self) -> Path:
        return self.evaluated_dir / "targets"

    def target_operations(self, target: str) -> Path:
        """What `train@<target>` reads: that device config and mode's rows, specs joined in."""
        return self.evaluated_targets_dir / target / "operations.parquet"

    def target_networks(self, target: str) -> Path:
        """The networks measured on that device config and mode (composition layer)."""
        return self.evaluated_targets_dir / target / "networks.parquet"

    def target_network_ops(self, target: str) -> Path:
        """Every op those networks call, with calls and spec."""
        return self.evaluated_targets_dir / target / "network_ops.parquet"

    @property
    def evaluate_summary(self) -> Path:
        """Headline figures of evaluate (a plain output; the DVC metrics file is reports/metrics.json)."""
        return self.root / "reports" / "evaluate" / "summary.json"

    @property
    def ingest_report_dir(self) -> Path:
        return self.root / "reports" / "ingest"

    @property
    def ingest_summary(self) -> Path:
        return self.ingest_report_dir / "summary.json"

    @property
    def ingest_coverage(self) -> Path:
        return self.ingest_report_dir / "coverage.json"

    def model_dir(self, target: str) -> Path:
        """DVC output of `train@<target>`: the bundle and its summary."""
        return self.root / "models" / target

    def train_metrics(self, target: str | None = None) -> Path:
        """Per-target metrics of one train stage, or (None) all targets' headline figures (a plain output)."""
        base = self.root / "reports" / "train"
        return base / "metrics.json" if target is None else base / "targets" / f"{target}.json"

    @property
    def headline_metrics(self) -> Path:
        """The one DVC metrics file (stage views): a few headline figures, fits a terminal."""
        return self.root / "reports" / "metrics.json"

    @property
    def goals_json(self) -> Path:
        """The accuracy goals table (stage views): each goal's figure at filing, now, and whether it is met."""
        return self.root / "reports" / "goals.json"

    @property
    def goals_md(self) -> Path:
        """The same table as Markdown, for a reader of reports/."""
        return self.root / "reports" / "goals.md"

    @property
    def train_targets_dir(self) -> Path:
        """Every train target's report (reports/train/targets/<target>.json)."""
        return self.train_metrics("x").parent

    @property
    def plots_dir(self) -> Path:
        """Image plots (stage views) that `dvc plots show` embeds without loading anything."""
        return self.root / "reports" / "plots"

    @property
    def clock_model_dir(self) -> Path:
        """DVC output of `train-clock`: the transferred clock model (JSON) and its run record."""
        return self.root / "models" / "clock"

    @property
    def xdevice_model_dir(self) -> Path:
        """DVC output of `train-xdevice`: the cross-device op model (JSON + npz) and its run record."""
        return self.root / "models" / "xdevice"

    @property
    def measured_ops_dir(self) -> Path:
        """DVC output of `measured-ops`: op times measured on GPUs answered by transfer
        (model/crossdevice/measured.py)."""
        return self.root / "models" / "measured"

    @property
    def xdevice_report_dir(self) -> Path:
        """logo_ops.csv, logo_networks.csv and metrics.json of `train-xdevice`."""
        return self.root / "reports" / "xdevice"

    @property
    def xdevice_metrics(self) -> Path:
        """Headline leave-one-GPU-out figures of the cross-device model, declared as DVC metrics."""
        return self.xdevice_report_dir / "metrics.json"

    def xdevice_table(self, name: str) -> Path:
        """logo_ops (per held-out GPU x op group) and logo_networks (every held-out network), CSV."""
        return self.xdevice_report_dir / f"{name}.csv"

    @property
    def clock_report_dir(self) -> Path:
        return self.root / "reports" / "clock"

    @property
    def clock_metrics(self) -> Path:
        """Headline leave-one-GPU-out figures of the clock model (a plain output, condensed by stage views)."""
        return self.clock_report_dir / "metrics.json"

    def clock_table(self, name: str) -> Path:
        """Detail beside the clock metrics, CSV: logo, loko (per GPU x source), curves (per curve) and
        logo_points (every measured clock point with its leave-one-GPU-out prediction)."""
        return self.clock_report_dir / f"{name}.csv"

    @property
    def clock_detail(self) -> Path:
        return self.clock_report_dir / "detail.json"

    @property
    def clock_figures(self) -> Path:
        return self.clock_report_dir / "figures"

    @property
    def xpower_model_dir(self) -> Path:
        """DVC output of `train-clock`: the cross-device power model (JSON, model/clocks/xpower.py) and its run
        record."""
        return self.root / "models" / "xpower"

    @property
    def xpower_report_dir(self) -> Path:
        """Leave-one-GPU-out power and energy of the power model: metrics.json (DVC metrics), logo.csv."""
        return self.root / "reports" / "xpower"

    def train_networks(self, target: str) -> Path:
        """The target's measured networks predicted leave-one-network-out and -family-out (CSV)."""
        return self.root / "reports" / "train" / "networks" / f"{target}.csv"

    @property
    def train_report_dir(self) -> Path:
        return self.root / "reports" / "train"

    @property
    def validate_dir(self) -> Path:
        return self.root / "reports" / "validate"

    @property
    def validate_figures(self) -> Path:
        return self.validate_dir / "figures"

    @property
    def validate_metrics(self) -> Path:
        """Headline figures of validate (a plain output; the DVC metrics file is reports/metrics.json)."""
        return self.validate_dir / "metrics.json"

    @property
    def validate_detail(self) -> Path:
        """Every summary validate computes (not DVC metrics: too many columns)."""
        return self.validate_dir / "detail.json"

    # The tables of stage validate, CSV (several are DVC plots, drawn as images by stage views).
    @property
    def validate_summed(self) -> Path:
        """Every measured network against the sum of its measured ops."""
        return self.validate_dir / "summed_vs_measured.csv"

    @property
    def validate_out_of_sample(self) -> Path:
        """The train stages' leave-one-network-out and -family-out network predictions, all targets."""
        return self.validate_dir / "predicted_vs_measured.csv"

    @property
    def validate_kind_errors(self) -> Path:
        """The chosen op models' grouped-split errors per op kind and target."""
        return self.validate_dir / "op_errors_by_kind.csv"

    @property
    def validate_in_sample(self) -> Path:
        """The shipped bundles against the networks they saw (reference only)."""
        return self.validate_dir / "predicted_in_sample.csv"

    @property
    def validate_tensor_cores(self) -> Path:
        return self.validate_dir / "tensor_cores.csv"

    def validate_sweeps(self, knob: str) -> Path:
        """Normalised time, energy and EDP per setting of one knob (core_clock_mhz, power_limit_w, ...)."""
        return self.validate_dir / f"sweeps_{knob}.csv"

    @property
    def validate_sweep_optima(self) -> Path:
        return self.validate_dir / "sweep_optima.csv"

    @property
    def validate_grid_optima(self) -> Path:
        """Core x memory clock grids: the joint optimum per workload."""
        return self.validate_dir / "grid_optima.csv"

    @property
    def validate_clock_sweeps(self) -> Path:
        """The extract sets predicted across each device's clock range (predictions, not measurements)."""
        return self.validate_dir / "clock_sweeps.csv"

    @property
    def validate_clock_optima(self) -> Path:
        return self.validate_dir / "clock_optima.csv"

    @property
    def validate_xdevice_energy(self) -> Path:
        """Thesis network energy predicted entirely transferred, the GPU left out."""
        return self.validate_dir / "xdevice_energy.csv"

    @property
    def validate_xdevice_energy_fewshot(self) -> Path:
        """The same networks' energy with one other network's measured power level (model/crossdevice/fewshot.py)."""
        return self.validate_dir / "xdevice_energy_fewshot.csv"

    @property
    def validate_latency(self) -> Path:
        """Measurement time per network against predictor time."""
        return self.validate_dir / "latency.csv"

    @property
    def xpower_logo(self) -> Path:
        """Leave-one-GPU-out power and energy per held-out GPU and source (train-clock; read by validate)."""
        return self.xpower_report_dir / "logo.csv"

    def bench_report(self, name: str) -> Path:
        """reports/bench/`name`: what a bench script (bench/*.py) writes; `name` may have a folder."""
        return self.root / "reports" / "bench" / name

    @property
    def predictor_latency(self) -> Path:
        """Written by bench/predictor_latency.py; an input of validate."""
        return self.bench_report("predictor_latency.json")

    @property
    def report_index(self) -> Path:
        return self.root / "reports" / "index.md"

    def parts_dir(self, campaign: str) -> Path:
        """Per-unit results of a running campaign (git- and DVC-ignored), what a restart resumes from."""
        return self.root / ".opcost" / "parts" / campaign

    def slurm_record(self, campaign: str) -> Path:
        """What `opcost submit` sent to SLURM for a campaign (job ids, shards, times); read by `opcost status`."""
        return self.root / ".opcost" / "slurm" / f"{campaign}.json"

    def slurm_dir(self, campaign: str) -> Path:
        """A campaign's job scripts, task logs and task job ids (on the file system the nodes share)."""
        return self.root / ".opcost" / "slurm" / campaign
