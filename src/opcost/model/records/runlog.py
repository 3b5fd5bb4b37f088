"""What a training run logs, as data: written beside the bundle, replayed into any MLflow store.

The train stage does not talk to MLflow directly. It builds a *run record* (a parent run per
device config and mode, nested runs per algorithm x quantity x feature set, with parameters, tags,
per-fold metrics as steps and the data behind each figure), saves it as `run.json` in the model's
DVC output, and replays it into the tracking store. A fresh clone's `dvc pull` brings the record
with the bundle, and `opcost sync-registry` replays it into an empty store, so the runs a user
compares in the MLflow UI are the same on every machine. Run ids never enter a DVC output.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from opcost.errors import OpcostError
from opcost.io import write_report
from opcost.model.records import tracking

RUN_FILE = "run.json"


def child(
    name: str,
    tags: dict[str, str],
    params: dict[str, Any],
    metrics: dict[str, float],
    steps: dict[str, list[float]],
    figures: list[dict[str, Any]],
) -> dict[str, Any]:
    return {"name": name, "tags": tags, "params": params, "metrics": metrics, "steps": steps, "figures": figures}


@dataclass(frozen=True)
class Figure:
    """The data behind one predicted-vs-measured figure of a run (drawn at replay)."""

    file: str
    title: str
    unit: str
    measured: list[float]
    predicted: list[float]

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Run:
    """One run of a record: its name, tags, parameters, metrics, per-step metrics and figures."""

    name: str
    tags: dict[str, str]
    params: dict[str, Any] = dataclasses.field(default_factory=dict)
    metrics: dict[str, Any] = dataclasses.field(default_factory=dict)  # None or NaN: left out when logged (`_finite`)
    steps: dict[str, list[Any]] = dataclasses.field(default_factory=dict)
    figures: tuple[Figure, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """The run as `run.json` holds it (`child`'s shape)."""
        return child(self.name, self.tags, self.params, self.metrics, self.steps, [f.as_dict() for f in self.figures])


@dataclass(frozen=True)
class RunRecord(Run):
    """A parent run and its nested runs: what `save` writes and `replayed` logs, once `as_dict`."""

    children: tuple[Run, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {**super().as_dict(), "children": [c.as_dict() for c in self.children]}


TRAINING_COMMIT = "training_commit"  # the commit the model was trained at (in the DVC-tracked record)
TRAINING_DIRTY = "training_dirty"  # whether that tree had uncommitted changes
REPLAYED_COMMIT = "replayed_from_commit"  # the commit of the clone that replayed the record into its store


def save(record: dict[str, Any], folder: Path) -> None:
    """Write the record, with the commit it was trained at: the record travels with the model (DVC),
    so the training commit does too, and a replay elsewhere cannot overwrite it."""
    src = tracking.source_tags(Path(folder))  # the model folder lies inside the checkout that trained it
    if "git_commit" in src:
        record["tags"] = {
            **record["tags"],
            TRAINING_COMMIT: src["git_commit"],
            TRAINING_DIRTY: src.get("git_dirty", "unknown"),
        }
    write_report(record, Path(folder) / RUN_FILE)


def replay_tags(root: Path, replayed_from: str) -> dict[str, str]:
    """Tags of a replay in another clone: its own commit under `replayed_from_commit`, never `git_commit`."""
    src = tracking.source_tags(root)
    out = {"replayed_from": replayed_from}
    if "git_commit" in src:
        out[REPLAYED_COMMIT] = src["git_commit"]
    if "dvc_experiment" in src:
        out["dvc_experiment"] = src["dvc_experiment"]
    return out


def load(folder: Path) -> dict[str, Any]:
    f = Path(folder) / RUN_FILE
    if not f.is_file():
        raise OpcostError(f"{f} is missing: run `dvc pull` or `dvc repro train@<target>`")
    try:
        rec = json.loads(f.read_text())
        assert isinstance(rec, dict) and isinstance(rec.get("children"), list) and "name" in rec
    except (ValueError, AssertionError):
        raise OpcostError(f"{f} is not a run record; refused") from None
    return rec


def _figure(fig_spec: dict[str, Any]) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    measured, predicted, unit = fig_spec["measured"], fig_spec["predicted"], fig_spec["unit"]
    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    ax.scatter(measured, predicted, s=8, alpha=0.6)
    lo = min(min(measured), min(predicted))
    hi = max(max(measured), max(predicted))
    ax.plot([lo, hi], [lo, hi], color="grey", lw=1)
    if lo > 0 and hi / lo > 100:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel(f"measured [{unit}]")
    ax.set_ylabel(f"predicted [{unit}]")
    ax.set_title(fig_spec["title"], fontsize=9)
    fig.tight_layout()
    return fig


def _finite(v: Any) -> bool:
    """Whether a score can be logged: a fold with too few rows has no R2 (None in the record, NaN in
    memory), and MLflow refuses a metric without a value (a tracking server refuses NaN too)."""
    try:
        return v is not None and math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def step_summaries(steps: dict[str, list[Any]]) -> dict[str, float]:
    """Mean and standard deviation over folds of each per-fold metric (`fold_r2` -> `cv_r2_mean`,
    `cv_r2_std`): the runs table shows a metric's last step only, which for `fold_r2` is the last fold."""
    out = {}
    for name, values in steps.items():
        v = [float(x) for x in values if _finite(x)]
        if not v:
            continue
        base = "cv_" + name.removeprefix("fold_")
        mean = sum(v) / len(v)
        out[f"{base}_mean"] = mean
        out[f"{base}_std"] = math.sqrt(sum((x - mean) ** 2 for x in v) / len(v))
    return out


def _log(mlflow: Any, r: dict[str, Any]) -> None:
    if r["params"]:
        mlflow.log_params(r["params"])
    for name, values in r["steps"].items():
        for step, v in enumerate(values):  # a fold without a score is left out; the others keep their step
            if _finite(v):
                mlflow.log_metric(name, float(v), step=step)
    metrics = {k: float(v) for k, v in {**step_summaries(r["steps"]), **r["metrics"]}.items() if _finite(v)}
    if metrics:
        mlflow.log_metrics(metrics)
    if r["figures"]:
        import matplotlib.pyplot as plt

        for spec in r["figures"]:
            if not spec["measured"]:
                continue  # a split with nothing measured to score (every held-out row estimated)
            fig = _figure(spec)
            mlflow.log_figure(fig, spec["file"])
            plt.close(fig)


@contextlib.contextmanager
def replayed(mlflow: Any, record: dict[str, Any], extra_tags: dict[str, str] | None = None) -> Iterator[Any]:
    """Log `record` as a parent run with its nested runs and keep the parent active inside the block
    (the bundle is registered from it). Every run ends FINISHED, FAILED or KILLED."""
    tags = {**record["tags"], **(extra_tags or {})}
    if TRAINING_COMMIT in record["tags"]:  # git_commit is the training commit, whoever replays the record
        tags["git_commit"] = record["tags"][TRAINING_COMMIT]
        tags["git_dirty"] = record["tags"].get(TRAINING_DIRTY, "unknown")
    with tracking.tracked_run(mlflow, record["name"], tags=tags) as run:
        _log(mlflow, record)
        for c in record["children"]:
            inherited = {k: v for k, v in tags.items() if k != tracking.NOTE_TAG}  # the parent's description is its own
            with tracking.tracked_run(mlflow, c["name"], nested=True, tags={**inherited, **c["tags"]}):
                _log(mlflow, c)
        yield run
