"""Parameters and paths: the one place that knows where things live and what params.yaml holds.

`params.yaml` is read into frozen dataclasses so stages get typed, validated values; every file
path a stage reads or writes is a property of `Paths`, so `dvc.yaml` and the code cannot drift
apart silently (tests compare them).

The repository root is found without relying on where the package is installed, because under
`dvc exp run --temp` the stage runs in a copy of the repository: `OPCOST_ROOT`, then `DVC_ROOT`,
then the nearest parent of the working directory that holds `dvc.yaml`, else the working directory.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import yaml

from opcost.errors import OpcostError

MODES: tuple[str, ...] = ("inference", "training")
# The measured phase an op model of each mode predicts: a training step runs forward and backward.
OP_PHASE: dict[str, str] = {"inference": "forward", "training": "forward_backward"}
DTYPES: tuple[str, ...] = ("float32", "float16", "bfloat16", "float64")
INPUT_SHAPE_HELP = "B,C,H,W: four positive integers, e.g. 32,3,224,224"


def find_root(start: Path | None = None) -> Path:
    """The repository root (see module docstring for the order of precedence)."""
    for var in ("OPCOST_ROOT", "DVC_ROOT"):
        if os.environ.get(var):
            return Path(os.environ[var]).resolve()
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
        """Headline figures of extract, declared as DVC metrics."""
        return self.extract_report_dir / "summary.json"

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

    @property
    def evaluate_summary(self) -> Path:
        """Headline figures of evaluate, declared as DVC metrics."""
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
        """Per-target metrics of one train stage, or (None) the merged DVC metrics file."""
        base = self.root / "reports" / "train"
        return base / "metrics.json" if target is None else base / "targets" / f"{target}.json"

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
        """Headline figures of validate, declared as DVC metrics."""
        return self.validate_dir / "metrics.json"

    @property
    def validate_detail(self) -> Path:
        """Every summary validate computes (not DVC metrics: too many columns)."""
        return self.validate_dir / "detail.json"

    @property
    def predictor_latency(self) -> Path:
        """Written by bench/predictor_latency.py; an input of validate."""
        return self.root / "reports" / "bench" / "predictor_latency.json"

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


def parse_input_shape(value: str | Sequence[Any], what: str = "input shape") -> tuple[int, ...]:
    """Parse `32,3,224,224` (or a list of ints) into a 4-tuple of positive ints, or fail clearly."""
    raw = value
    if isinstance(value, str):
        parts = [p.strip() for p in value.replace("x", ",").split(",")]
        if any(p == "" for p in parts):
            raise OpcostError(f"malformed {what} {raw!r}: expected {INPUT_SHAPE_HELP}")
        try:
            items: list[Any] = [int(p) for p in parts]
        except ValueError:
            raise OpcostError(f"malformed {what} {raw!r}: expected {INPUT_SHAPE_HELP}") from None
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise OpcostError(f"malformed {what} {raw!r}: expected {INPUT_SHAPE_HELP}")
    if len(items) != 4 or not all(isinstance(i, int) and not isinstance(i, bool) and i > 0 for i in items):
        raise OpcostError(f"malformed {what} {raw!r}: expected {INPUT_SHAPE_HELP}")
    return tuple(items)


def shape_text(shape: Iterable[int]) -> str:
    """`(32, 3, 224, 224)` -> `32x3x224x224`, the spelling used in set ids and file names."""
    return "x".join(str(int(s)) for s in shape)


@dataclass(frozen=True)
class ModelInputSet:
    """A torchvision model at one input shape and dtype, extracted for one or more modes."""

    model: str
    input_shape: tuple[int, ...]
    dtype: str = "float32"
    modes: tuple[str, ...] = ("inference",)

    @property
    def set_id(self) -> str:
        """Stable, readable id: `resnet18:32x3x224x224` (dtype appended unless float32)."""
        base = f"{self.model}:{shape_text(self.input_shape)}"
        return base if self.dtype == "float32" else f"{base}:{self.dtype}"

    @classmethod
    def from_dict(cls, raw: Any, where: str) -> "ModelInputSet":
        if not isinstance(raw, dict) or "model" not in raw or "input_shape" not in raw:
            raise OpcostError(f"{where}: expected a mapping with 'model' and 'input_shape', got {raw!r}")
        unknown = set(raw) - {"model", "input_shape", "dtype", "modes"}
        if unknown:
            raise OpcostError(
                f"{where}: unknown key(s) {sorted(unknown)}; valid keys: model, input_shape, dtype, modes"
            )
        model = raw["model"]
        if not isinstance(model, str) or not model:
            raise OpcostError(f"{where}: 'model' must be a torchvision model name, got {model!r}")
        shape = parse_input_shape(raw["input_shape"], what=f"{where} input_shape")
        dtype = raw.get("dtype", "float32")
        if dtype not in DTYPES:
            raise OpcostError(f"{where}: dtype {dtype!r} is not one of {', '.join(DTYPES)}")
        modes = raw.get("modes", ["inference"])
        if isinstance(modes, str):
            modes = [modes]
        if not modes or any(m not in MODES for m in modes):
            raise OpcostError(f"{where}: modes {modes!r} must be a non-empty list of {', '.join(MODES)}")
        return cls(model=model, input_shape=shape, dtype=dtype, modes=tuple(dict.fromkeys(modes)))


@dataclass(frozen=True)
class ExtractParams:
    sets: tuple[ModelInputSet, ...] = field(default_factory=tuple)


ENERGY_SOURCES: tuple[str, ...] = ("auto", "nvml", "nvidia-smi", "rapl", "none")


@dataclass(frozen=True)
class CampaignParams:
    """One profiling campaign: where, what, which settings, how long and how often."""

    name: str
    device: str = "cpu"
    modes: tuple[str, ...] = ("inference",)
    sets: tuple[str, ...] = ()  # model-input set ids from extract (their ops)
    op_ids: tuple[str, ...] = ()  # single ops from operations.parquet
    networks: bool = True  # also measure the sets' whole networks
    clocks_mhz: tuple[int, ...] = ()
    power_limits_w: tuple[float, ...] = ()
    trials: int = 3
    min_time_s: float = 0.2  # benchmark.Timer.blocked_autorange(min_run_time)
    window_s: float = 2.0  # energy window per trial
    chunks: int = 5  # checkpoints in the window for the proportionality fit
    energy_source: str = "auto"
    sample_interval_s: float = 0.02
    seed: int = 0
    max_instances: int = 16
    instance_budget_mb: float = 256.0

    @classmethod
    def from_dict(cls, name: str, raw: Any, where: str) -> "CampaignParams":
        if not isinstance(raw, dict):
            raise OpcostError(f"{where}: a campaign must be a mapping of its settings, got {raw!r}")
        known = {f for f in cls.__dataclass_fields__ if f != "name"}
        unknown = set(raw) - known
        if unknown:
            raise OpcostError(f"{where}: unknown key(s) {sorted(unknown)}; valid keys: {', '.join(sorted(known))}")
        kw: dict[str, Any] = dict(raw)
        for key in ("modes", "sets", "op_ids", "clocks_mhz", "power_limits_w"):
            if key in kw:
                v = kw[key]
                kw[key] = tuple(v) if isinstance(v, (list, tuple)) else (v,)
        c = cls(name=name, **kw)
        c.check(where)
        return c

    def check(self, where: str) -> None:
        if not (
            self.device == "cpu"
            or (self.device.startswith("cuda") and self.device[4:] in ("", *(f":{i}" for i in range(64))))
        ):
            raise OpcostError(f"{where}: device {self.device!r} must be cpu or cuda:N")
        if not self.modes or any(m not in MODES for m in self.modes):
            raise OpcostError(f"{where}: modes {list(self.modes)!r} must be a non-empty list of {', '.join(MODES)}")
        if self.energy_source not in ENERGY_SOURCES:
            raise OpcostError(
                f"{where}: energy_source {self.energy_source!r} is not one of {', '.join(ENERGY_SOURCES)}"
            )
        if self.trials < 1 or self.chunks < 3:
            raise OpcostError(f"{where}: trials must be >= 1 and chunks >= 3 (got {self.trials}, {self.chunks})")
        if self.min_time_s <= 0 or self.window_s <= 0 or self.sample_interval_s <= 0:
            raise OpcostError(f"{where}: min_time_s, window_s and sample_interval_s must be positive")
        if not self.sets and not self.op_ids:
            raise OpcostError(f"{where}: name the operations to measure: sets (model-input set ids) and/or op_ids")
        if any(c <= 0 for c in self.clocks_mhz) or any(p <= 0 for p in self.power_limits_w):
            raise OpcostError(f"{where}: clocks_mhz and power_limits_w must be positive numbers")

    def fingerprint_fields(self) -> dict[str, Any]:
        """What makes two measurements of one unit comparable; resumed parts must agree on it."""
        return {
            k: getattr(self, k)
            for k in (
                "device",
                "trials",
                "min_time_s",
                "window_s",
                "chunks",
                "energy_source",
                "sample_interval_s",
                "seed",
                "max_instances",
                "instance_budget_mb",
            )
        }


_SLURM_TIME = re.compile(r"^(\d+-\d{1,2}(:\d{2}(:\d{2})?)?|\d+(:\d{2}(:\d{2})?)?)$")
_SLURM_MEM = re.compile(r"^\d+[KMGT]?$")
_SLURM_GRES = re.compile(r"^[A-Za-z][\w.-]*(:[\w.-]+)?(:\d+)?$")


@dataclass(frozen=True)
class SlurmParams:
    """How `opcost submit` runs a campaign on a SLURM cluster: a job array of `shards` tasks, at most
    `throttle` at once, then a merge job. Not a measuring parameter: DVC's profile stages do not depend
    on it, so moving a campaign to another partition re-measures nothing."""

    shards: int = 4
    throttle: int | None = None  # the array's %N; None: as many at once as the cluster allows
    partition: str | None = None  # None: the cluster's default partition
    account: str | None = None
    time: str = "02:00:00"  # per task, any sbatch --time format (MM, HH:MM:SS, D-HH:MM, ...)
    gres: str | None = "gpu:1"  # per task of a CUDA campaign; CPU campaigns request no GRES
    cpus_per_task: int = 4
    mem: str | None = None  # per task, e.g. 16G; None: the cluster's default
    setup: tuple[str, ...] = ()  # shell lines each job runs first (module load ..., source .venv/bin/activate)

    @classmethod
    def from_dict(cls, raw: Any, where: str, base: "SlurmParams | None" = None) -> "SlurmParams":
        """`raw` over `base` (the profile-level defaults), checked."""
        if not isinstance(raw, dict):
            raise OpcostError(f"{where}: expected a mapping of SLURM settings, got {raw!r}")
        known = set(cls.__dataclass_fields__)
        unknown = set(raw) - known
        if unknown:
            raise OpcostError(f"{where}: unknown key(s) {sorted(unknown)}; valid keys: {', '.join(sorted(known))}")
        kw = {**(base or cls()).__dict__, **raw}
        if isinstance(kw["setup"], str):
            kw["setup"] = (kw["setup"],)
        kw["setup"] = tuple(kw["setup"] or ())
        s = cls(**kw)
        s.check(where)
        return s

    def check(self, where: str) -> None:
        def positive(v: Any) -> bool:
            return isinstance(v, int) and not isinstance(v, bool) and v >= 1

        if not positive(self.shards) or not positive(self.cpus_per_task):
            raise OpcostError(f"{where}: shards and cpus_per_task must be integers >= 1")
        if self.throttle is not None and not positive(self.throttle):
            raise OpcostError(f"{where}: throttle must be an integer >= 1 (tasks at once) or null for no limit")
        if not isinstance(self.time, str) or not _SLURM_TIME.match(self.time):
            raise OpcostError(
                f'{where}: time {self.time!r} must be a quoted SLURM time such as "30", "02:00:00" or '
                f'"1-12:00" (YAML reads an unquoted 02:00:00 as a number)'
            )
        if self.mem is not None and not _SLURM_MEM.match(str(self.mem)):
            raise OpcostError(f"{where}: mem {self.mem!r} must be a size such as 16G or 4000M, or null")
        if self.gres is not None and not _SLURM_GRES.match(str(self.gres)):
            raise OpcostError(f"{where}: gres {self.gres!r} must look like gpu:1 or gpu:a100:1, or be null")
        for key in ("partition", "account"):
            v = getattr(self, key)
            if v is not None and (not isinstance(v, str) or not re.match(r"^[\w.,-]+$", v)):
                raise OpcostError(f"{where}: {key} {v!r} must be a SLURM name (letters, digits, _ . , -) or null")
        if not all(isinstance(line, str) and "\n" not in line for line in self.setup):
            raise OpcostError(f"{where}: setup must be a list of single-line shell commands")


@dataclass(frozen=True)
class ProfileParams:
    campaigns: dict[str, CampaignParams] = field(default_factory=dict)
    slurm: SlurmParams = field(default_factory=SlurmParams)  # defaults for every campaign
    slurm_campaigns: dict[str, SlurmParams] = field(default_factory=dict)  # per campaign, defaults filled in

    def slurm_for(self, campaign: str) -> SlurmParams:
        return self.slurm_campaigns.get(campaign, self.slurm)


def _slurm_params(raw: Any, campaigns: dict[str, CampaignParams], where: str) -> tuple[SlurmParams, dict]:
    """`profile.slurm`: defaults, plus `campaigns: {NAME: overrides}` for campaigns of profile.campaigns."""
    if raw is None:
        return SlurmParams(), {}
    if not isinstance(raw, dict):
        raise OpcostError(f"{where}: expected a mapping of SLURM settings, got {raw!r}")
    raw = dict(raw)
    per = raw.pop("campaigns", None) or {}
    defaults = SlurmParams.from_dict(raw, where)
    if not isinstance(per, dict):
        raise OpcostError(f"{where}.campaigns: must map campaign names to SLURM settings")
    unknown = sorted(set(map(str, per)) - set(campaigns))
    if unknown:
        valid = ", ".join(sorted(campaigns)) or "none defined"
        raise OpcostError(f"{where}.campaigns: {', '.join(unknown)} not in profile.campaigns ({valid})")
    return defaults, {str(n): SlurmParams.from_dict(v, f"{where}.campaigns.{n}", defaults) for n, v in per.items()}


INGEST_KINDS: tuple[str, ...] = ("thesis-logs", "zeus-power-limit", "dvfs-conv")


@dataclass(frozen=True)
class IngestSource:
    """External measurements in data/external/: where they are and which parser reads them."""

    name: str
    path: str
    kind: str


@dataclass(frozen=True)
class IngestParams:
    sources: dict[str, IngestSource] = field(default_factory=dict)


@dataclass(frozen=True)
class TrainParams:
    """Per device config and mode (`targets`, e.g. A30-inference): algorithms' settings and seeds."""

    targets: tuple[str, ...] = ()
    folds: int = 15
    test_size: float = 0.2
    seed: int = 0
    random_forest: dict[str, Any] = field(default_factory=dict)
    xgboost: dict[str, Any] = field(default_factory=dict)

    @staticmethod
    def split_target(target: str) -> tuple[str, str]:
        """`A30_no_tf32-inference` -> ("A30_no_tf32", "inference")."""
        device, _, mode = target.rpartition("-")
        if not device or mode not in MODES:
            raise OpcostError(f"train target {target!r} must be <device config>-<mode>, mode one of {', '.join(MODES)}")
        return device, mode


@dataclass(frozen=True)
class Params:
    extract: ExtractParams
    profile: ProfileParams = field(default_factory=ProfileParams)
    ingest: IngestParams = field(default_factory=IngestParams)
    train: TrainParams = field(default_factory=TrainParams)


def load_params(path: Path) -> Params:
    """Read and validate params.yaml; every problem names the entry and what would be valid."""
    if not path.is_file():
        raise OpcostError(f"parameter file {path} not found: run from the repository root or set OPCOST_ROOT")
    raw = yaml.safe_load(path.read_text()) or {}
    ex = raw.get("extract") or {}
    raw_sets = ex.get("sets") or []
    if not isinstance(raw_sets, list):
        raise OpcostError(f"{path}: extract.sets must be a list of model-input sets")
    sets = tuple(ModelInputSet.from_dict(s, f"{path.name}: extract.sets[{i}]") for i, s in enumerate(raw_sets))
    ids = [s.set_id for s in sets]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise OpcostError(f"{path.name}: extract.sets lists {', '.join(dupes)} more than once; merge their modes")
    prof = raw.get("profile") or {}
    raw_campaigns = prof.get("campaigns") or {}
    if not isinstance(raw_campaigns, dict):
        raise OpcostError(f"{path.name}: profile.campaigns must map campaign names to their settings")
    campaigns = {
        str(name): CampaignParams.from_dict(str(name), c, f"{path.name}: profile.campaigns.{name}")
        for name, c in raw_campaigns.items()
    }
    slurm, slurm_campaigns = _slurm_params(prof.get("slurm"), campaigns, f"{path.name}: profile.slurm")
    raw_sources = (raw.get("ingest") or {}).get("sources") or {}
    sources = {}
    for name, src in raw_sources.items():
        where = f"{path.name}: ingest.sources.{name}"
        if not isinstance(src, dict) or set(src) != {"path", "kind"}:
            raise OpcostError(f"{where}: expected a mapping with exactly 'path' and 'kind', got {src!r}")
        if src["kind"] not in INGEST_KINDS:
            raise OpcostError(f"{where}: kind {src['kind']!r} is not one of {', '.join(INGEST_KINDS)}")
        sources[str(name)] = IngestSource(str(name), str(src["path"]), src["kind"])
    tr = raw.get("train") or {}
    unknown = set(tr) - {"targets", "folds", "test_size", "seed", "random_forest", "xgboost"}
    if unknown:
        raise OpcostError(f"{path.name}: train: unknown key(s) {sorted(unknown)}")
    train = TrainParams(
        targets=tuple(tr.get("targets") or ()),
        folds=int(tr.get("folds", 15)),
        test_size=float(tr.get("test_size", 0.2)),
        seed=int(tr.get("seed", 0)),
        random_forest=dict(tr.get("random_forest") or {}),
        xgboost=dict(tr.get("xgboost") or {}),
    )
    for t in train.targets:
        TrainParams.split_target(t)
    if train.folds < 2 or not 0 < train.test_size < 1:
        raise OpcostError(f"{path.name}: train.folds must be >= 2 and train.test_size in (0, 1)")
    return Params(
        extract=ExtractParams(sets=sets),
        profile=ProfileParams(campaigns=campaigns, slurm=slurm, slurm_campaigns=slurm_campaigns),
        ingest=IngestParams(sources=sources),
        train=train,
    )
