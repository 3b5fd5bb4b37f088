"""MLflow: the only module that knows tracking URIs, experiment, run and registered-model names.

Tracking URI: `MLFLOW_TRACKING_URI`, else an SQLite store under the store root (`DVC_ROOT` inside a
DVC stage, so `dvc exp run --temp` logs into the workspace, not the throwaway copy). A tracking
server that does not answer is one line within seconds (`REACH_TIMEOUT_S`, bounded MLflow retries),
not minutes of retries. SQLite writes happen under one file lock (`write_lock`); `tracked_run` never
leaves a run RUNNING, and a run whose process was killed is marked KILLED by the next `setup` on the
same host. Numbers that decide things live in DVC metrics files; MLflow mirrors them for browsing.
Design: docs/architecture.md#mlflow-tracking-and-the-registry.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
from pathlib import Path
from typing import Any, Iterator

from opcost.locks import file_lock

EXPERIMENT = "opcost-train"
VALIDATE_EXPERIMENT = "opcost-validate"
VALIDATE_RUN = "validate"
CHAMPION = "champion"
CLOCK_MODEL = "opcost-clock"  # the registered transferred clock model (stage train-clock)
CLOCK_RUN = "train-clock"
XDEVICE_MODEL = "opcost-xdevice"  # the registered cross-device op-time model (stage train-xdevice)
XDEVICE_RUN = "train-xdevice"
XPOWER_MODEL = "opcost-xpower"  # the registered cross-device power model (stage train-clock, model/clocks/xpower.py)
XPOWER_RUN = "train-xpower"
# What a user reads on the experiment and registered-model pages (MLflow's description fields).
EXPERIMENT_DESCRIPTIONS = {
    EXPERIMENT: (
        "One parent run per train target (device config x mode, stage train@<target>) with a nested run per "
        "algorithm x quantity x feature set x split. Nested runs: out-of-fold op errors in per cent (mape_pct, "
        "mdape_pct, twe_pct) and r2, fold_r2 per fold (steps) and cv_r2_mean/cv_r2_std over folds, and a "
        "predicted-vs-measured figure. Parents: the chosen models' cross-validated R2 (time_cv_r2_mean, "
        "time_cv_r2_std, and power_* likewise), out-of-sample network errors in per cent (net_network_* "
        "leave-one-network-out, net_family_* leave-one-family-out), the composition coefficients, a "
        "description, and the registered bundle. Tags: training_commit "
        "(the commit trained at) and, for runs replayed by `opcost sync-registry`, replayed_from_commit."
    ),
    VALIDATE_EXPERIMENT: (
        "The validate stage: summed and in-sample network errors per device config and mode, with the "
        "report's figures (reports/validate/figures) as artifacts; replayed from reports/validate/detail.json "
        "by `opcost sync-registry` on a fresh clone."
    ),
}
MODEL_DESCRIPTIONS = {
    CLOCK_MODEL: (
        "The cross-clock model (stage train-clock): moves each op's time and power from a device's reference "
        "(boost) clock to another core clock, scored leave-one-GPU-out on the measured clock sweeps. A pyfunc "
        "model: input device, clock_mhz, t_ref_s, p_ref_w, compute_share; output t_s, p_w."
    ),
    XDEVICE_MODEL: (
        "The cross-device op-time model (stage train-xdevice): each op's time per call on any GPU of the device "
        "table, fitted on every GPU with op measurements and scored leave-one-GPU-out on ops and networks; "
        "it answers GPUs without a model of their own (transferred). A pyfunc model: input operations-table rows "
        "and device_config; output t_s (forward, per call)."
    ),
    XPOWER_MODEL: (
        "The cross-device power model (stage train-clock): a network's average power on any GPU of the device "
        "table from its busy share, scored leave-one-GPU-out on the measured power of the clock sweeps and the "
        "train targets; it gives transferred answers their energy. A pyfunc model: input device_config, "
        "busy_share, mode; output p_w and its relative 90 % error rel_err90."
    ),
}
# Metric names of the train runs (stage train@<target>): errors in per cent, named so.
OP_ERROR_METRICS = {"mape": "mape_pct", "mdape": "mdape_pct", "twe": "twe_pct"}  # score key -> nested-run metric
NOTE_TAG = "mlflow.note.content"  # the description MLflow shows on a run's (and experiment's) page


def cv_r2_metrics(quantity: str) -> tuple[str, str]:
    """The parent run's cross-validated R2 of the chosen `quantity` model: (mean, std) over folds."""
    return f"{quantity}_cv_r2_mean", f"{quantity}_cv_r2_std"


def net_error_metric(split: str, quantity: str, key: str) -> str:
    """The parent run's out-of-sample network error `key` (e.g. mape_pct) under `split`."""
    return f"net_{split}_{quantity}_{key}"


def net_interval_metric(split: str, quantity: str, key: str) -> str:
    """The parent run's network interval score `key` (e.g. coverage_pct) under `split`."""
    return f"net_{split}_{quantity}_interval_{key}"


def interval_metric(score_set: str, quantity: str, key: str) -> str:
    """The parent run's figure `key` of the interval resting on `score_set` (known, new, pooled)."""
    return f"interval_{score_set}_{quantity}_{key}"


def composition_metric(quantity: str, term: str) -> str:
    """The parent run's coefficient `term` of the composition layer's `quantity` (time, energy) model."""
    return f"comp_{quantity}_{term}"


COMP_POWER_CAP_METRIC = "comp_power_cap_w"  # the composition's energy cap in W (0: none)
FLOOR_METRIC = "floor_s"  # the bundle's launch floor in s
STAGE_TAG = "dvc_stage"  # the DVC stage a run logs
BUNDLE_HASH_TAG = "bundle_hash"  # the content hash of the model a run trained (its registered version's too)
SPLIT_TAG = "split"  # what a run's scores were computed on: runs and versions compare within one split
DATA_VERSION_TAG = "data_version"  # md5 of the data a run learnt from (model/store/registry.stage_data_version)


def model_tags(stage: str, content_hash: str, split: str, data_version: str) -> dict[str, str]:
    """The tags a folder model's run carries (clock, xpower, xdevice): the stage that logged it, the saved
    model's content hash, the split it was scored on and the data it learnt from."""
    return {STAGE_TAG: stage, BUNDLE_HASH_TAG: content_hash, SPLIT_TAG: split, DATA_VERSION_TAG: data_version}


# Names of the leave-one-GPU-out runs (stages train-clock, train-xdevice): a parent run per model, a nested
# run per held-out GPU (per learner for the clock model), scores in per cent.
CLOCK_SCORE_METRIC = "clock_score"  # the score the clock model's versions are ranked by (registry)
XPOWER_SCORE_METRIC = "xpower_score"
XDEVICE_SCORE_METRIC = "xdevice_score"
HELD_OUT_TAG = "held_out"  # the GPU a nested run predicts with models that never saw it
LEARNER_TAG = "learner"  # the clock model's compared learner (physical, trees, stacked)
REL_ERR90_METRIC = "rel_err90"  # the power model's 90th-percentile relative error (its intervals)


def logo_run_name(held_out: str) -> str:
    """The nested run of held-out GPU `held_out`."""
    return f"logo-{held_out}"


def learner_run_name(learner: str) -> str:
    """The clock run's nested run of one compared learner, over every held-out GPU."""
    return f"{learner}-logo"


def logo_mape_metric(quantity: str) -> str:
    """A parent run's pooled leave-one-GPU-out MAPE of `quantity` (time, energy, power)."""
    return f"logo_{quantity}_mape"


def card_size_metric(size: str, kind: str) -> str:
    """The power run's leave-one-GPU-out power MAPE of rows `kind` on cards of `size` (over_300w, up_to_300w)."""
    return f"logo_{size}_{kind}_power_mape"


def score_metric(scope: str, score: str) -> str:
    """A nested run's `score` (a column of the stage's score table: time_mape, power_mape, mape ...) of one
    GPU, row kind or op group `scope`."""
    return f"{scope}_{score}"


def xdevice_op_metric(group: str) -> str:
    """The cross-device run's leave-one-GPU-out op MAPE of op group `group` (all GPUs pooled)."""
    return f"op_{group}_mape"


def xdevice_net_metric(net_set: str) -> str:
    """The cross-device run's leave-one-GPU-out network MAPE over network set `net_set` (or all)."""
    return f"net_{net_set}_mape"


def fewshot_ratio_metric(variant: str) -> str:
    """The cross-device run's few-shot error ratio (with one measured network / without) of `variant`."""
    return f"fewshot_{variant}_ratio"


def fewshot_mape_metric(gpu: str, variant: str) -> str:
    """The cross-device run's few-shot network MAPE on `gpu` under `variant` (`without`: no measured network)."""
    return f"fewshot_{gpu}_{variant}_mape"


def xdevice_interval_metric(key: str, gpu: str = "") -> str:
    """The cross-device run's interval figure `key` (coverage_90, median_width_pct ...), of held-out GPU
    `gpu` or over all."""
    return f"interval_{gpu}_{key}" if gpu else f"interval_{key}"


def model_description(name: str) -> str:
    """The description of a registered bundle model `opcost-<device>-<mode>`."""
    target = name.removeprefix("opcost-")
    return (
        f"Per-operation time and power models for {target} (device config - mode), trained by stage "
        f"train@{target} on the evaluated operation measurements; `opcost predict --registry` composes networks "
        "from the `champion` version. Each version's description gives its data version, split and error."
    )


HOST_TAG = "opcost.host"
PID_TAG = "opcost.pid"


def store_root(root: Path) -> Path:
    """Where the shared local MLflow store lives: the workspace DVC names in `DVC_ROOT` (a temp or
    queued experiment's copy is deleted afterwards), else the project root."""
    dvc_root = os.environ.get("DVC_ROOT")
    if dvc_root and (Path(dvc_root) / "dvc.yaml").is_file():
        return Path(dvc_root).resolve()
    return Path(root).resolve()


def tracking_uri(root: Path) -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{store_root(root) / 'mlflow.db'}"


def _sqlite_file(uri: str) -> Path | None:
    return Path(uri[len("sqlite:///") :]) if uri.startswith("sqlite:///") else None


def registered_name(target: str) -> str:
    """`A30-inference` -> `opcost-A30-inference`."""
    return f"opcost-{target}"


def stage_run_name(target: str) -> str:
    return f"train@{target}"


def kind_floor_metric(kind: str) -> str:
    """The train run's metric of the time model's floor for one op kind (data/floors.py), in seconds."""
    return f"kind_floor_s.{kind}"


def nested_run_name(algorithm: str, quantity: str, feature_set: str, split: str) -> str:
    return f"{algorithm}-{quantity}-{feature_set}-{split}"


@contextlib.contextmanager
def write_lock(root: Path) -> Iterator[None]:
    """Exclusive access for store creation and registry writes on a SQLite store; a no-op for a
    tracking server. Re-entrant within a process (sync-registry holds it around a whole replay)."""
    db = _sqlite_file(tracking_uri(root))
    if db is None:
        yield
        return
    lock = db.with_name(db.name + ".lock")
    if _held.get(lock):  # re-entrant: a second flock on a new descriptor would wait for ourselves
        _held[lock] += 1
        try:
            yield
        finally:
            _held[lock] -= 1
        return
    with file_lock(lock, f"the MLflow store {db}"):
        _held[lock] = 1
        try:
            yield
        finally:
            _held.pop(lock, None)


_held: dict[Path, int] = {}  # write locks this process holds (write_lock is re-entrant)


REACH_TIMEOUT_S = 10.0
HTTP_LIMITS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_TIMEOUT": "30"}


DATABASE_PORTS = {"postgresql": 5432, "postgres": 5432, "mysql": 3306, "mssql": 1433}  # default port per scheme


def database_address(uri: str) -> tuple[str, int, str] | None:
    """(host, port, scheme) of a database tracking URI (`postgresql+psycopg2://u@db/mlflow`: the
    scheme's default port where none is given), None for a tracking server or a local store."""
    import urllib.parse

    u = urllib.parse.urlsplit(uri)
    scheme = u.scheme.split("+")[0]
    if scheme not in DATABASE_PORTS or not u.hostname:
        return None
    return u.hostname, u.port or DATABASE_PORTS[scheme], scheme


def check_store_kind(uri: str) -> None:
    """One-line OpcostError for a file store (`file:...` or a bare path): MLflow refuses it (maintenance
    mode) with a traceback, and opcost's registry needs a database or a tracking server."""
    import urllib.parse

    from opcost.errors import OpcostError

    scheme = urllib.parse.urlsplit(uri).scheme
    if scheme == "file" or not scheme:
        raise OpcostError(
            f"MLFLOW_TRACKING_URI={uri} is a file store, which MLflow no longer serves and opcost's registry "
            "cannot use: name a database (sqlite:////path/to/mlflow.db) or a tracking server (http://host:5000), "
            "or unset it to use the project's mlflow.db"
        )


SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file
LOCK_WAIT_S = 10.0  # how long the store check waits for another process's lock on mlflow.db


def damaged_store_line(db: Path, why: str) -> str:
    """The one line for a local store that SQLite cannot read: what it is and how to get a working one."""
    return (
        f"the MLflow store {db} is damaged ({why}): move it aside (`mv {db} {db}.damaged`) and run "
        "`opcost sync-registry` to rebuild the registry from the models dvc.lock records, or restore it from a backup"
    )


def locked_store_line(db: Path, waited_s: float) -> str:
    return (
        f"the MLflow store {db} is locked by another process (still locked after {waited_s:g} s): wait for it "
        f"to finish (`fuser {db}` names it) and run this again"
    )


def check_sqlite_store(uri: str, timeout: float | None = None) -> None:
    """One-line OpcostError unless a local SQLite store that exists is a readable database: not SQLite
    at all (overwritten), damaged or cut short (`PRAGMA quick_check`), or locked by another process
    for `timeout` seconds (default LOCK_WAIT_S). MLflow would answer each with a traceback of over a
    hundred lines. A store that does not exist yet is fine (setup creates it); so is an empty file
    (SQLite's empty database)."""
    import sqlite3

    from opcost.errors import OpcostError

    timeout = LOCK_WAIT_S if timeout is None else timeout
    db = _sqlite_file(uri)
    if db is None:
        return
    db = Path(str(db).split("?")[0]).absolute()  # sqlite:///mlflow.db?timeout=20 is a relative path and options
    if not db.exists():
        return
    if not db.is_file():
        raise OpcostError(f"the MLflow store {db} is not a regular file: expected the SQLite database MLflow keeps")
    try:
        with open(db, "rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise OpcostError(f"the MLflow store {db} cannot be read ({exc.strerror or exc})") from None
    if head and head != SQLITE_HEADER:
        raise OpcostError(damaged_store_line(db, "not an SQLite database"))
    mode = "rw" if os.access(db, os.W_OK) else "ro"  # rw: a journal left by a crash is rolled back, as MLflow would
    con = None
    try:
        con = sqlite3.connect(f"{db.as_uri()}?mode={mode}", uri=True, timeout=timeout)
        found = con.execute("PRAGMA quick_check").fetchall()
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise OpcostError(locked_store_line(db, timeout)) from None
        raise OpcostError(damaged_store_line(db, str(exc))) from None
    except sqlite3.DatabaseError as exc:
        raise OpcostError(damaged_store_line(db, str(exc))) from None
    finally:
        if con is not None:
            con.close()
    if found != [("ok",)]:
        first = str(found[0][0]) if found else "no answer"
        raise OpcostError(damaged_store_line(db, f"SQLite's check says: {' '.join(first.split())[:120]}"))


def check_store(uri: str) -> None:
    """Everything that can be checked about the store before MLflow is asked: its kind, a remote
    service's answer, a local database's file (each a one-line OpcostError)."""
    check_store_kind(uri)
    check_reachable(uri)
    check_sqlite_store(uri)


def check_reachable(uri: str, timeout: float = REACH_TIMEOUT_S) -> None:
    """One-line OpcostError unless the service behind `uri` answers within `timeout` seconds: an
    HTTP tracking server must answer `GET /health` (any HTTP status counts as an answer), a database
    URI's host must accept a TCP connection. Local stores are not checked here (`check_sqlite_store`)."""
    import urllib.error
    import urllib.parse
    import urllib.request

    from opcost.errors import OpcostError

    u = urllib.parse.urlsplit(uri)
    scheme = u.scheme.split("+")[0]
    hint = "start it (`make stack-up`) or unset MLFLOW_TRACKING_URI to use the local store"
    if scheme in ("http", "https"):
        try:
            with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout):
                return
        except urllib.error.HTTPError:
            return  # it answered
        except (urllib.error.URLError, OSError) as exc:
            why = getattr(exc, "reason", exc)
            why = "no answer within %gs" % timeout if isinstance(why, (TimeoutError, socket.timeout)) else why
            raise OpcostError(f"the MLflow tracking server {uri} is down ({why}): {hint}") from None
    db = database_address(uri)
    if db is not None:
        host, port, scheme = db
        try:
            socket.create_connection((host, port), timeout=timeout).close()
        except OSError as exc:
            raise OpcostError(
                f"the MLflow database {host}:{port} ({scheme}) is down ({exc.strerror or exc}): {hint}"
            ) from None


def setup(root: Path, experiment: str = EXPERIMENT) -> Any:
    """Point MLflow at the project's store and experiment (creating both under the lock); mark runs
    of dead processes on this host KILLED. Returns the mlflow module. A remote store that does not
    answer is a one-line OpcostError (module docstring)."""
    import logging

    for key, value in HTTP_LIMITS.items():
        os.environ.setdefault(key, value)
    check_store(tracking_uri(root))

    import mlflow
    from mlflow import MlflowClient

    logging.getLogger("mlflow").setLevel(logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    uri = tracking_uri(root)
    mlflow.set_tracking_uri(uri)
    with write_lock(root):
        client = MlflowClient()
        exp = client.get_experiment_by_name(experiment)
        if exp is None:
            location = (store_root(root) / "mlruns").as_uri() if _sqlite_file(uri) else None
            client.create_experiment(experiment, artifact_location=location)
            exp = client.get_experiment_by_name(experiment)
            assert exp is not None, f"MLflow did not create experiment {experiment!r}"
        if experiment in EXPERIMENT_DESCRIPTIONS and exp.tags.get(NOTE_TAG) is None:
            client.set_experiment_tag(exp.experiment_id, NOTE_TAG, EXPERIMENT_DESCRIPTIONS[experiment])
        mlflow.set_experiment(experiment)
        for name in project_experiments(client, experiment):  # a killed validate is found by the next train too
            reap_dead_runs(client, name)
    return mlflow


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def project_experiments(client: Any, current: str) -> list[str]:
    """The experiments of this project in the store: `current` and every `opcost-*` one. A server that
    does not let this user list experiments leaves `current` only; any other failure (the server or
    database gone) is raised, for the CLI and stages to report in one line (stages/_run)."""
    from mlflow.exceptions import MlflowException

    try:
        names = [e.name for e in client.search_experiments()]
    except MlflowException as exc:
        if exc.error_code not in ("PERMISSION_DENIED", "UNAUTHENTICATED"):
            raise
        names = []
    return sorted({current, *(n for n in names if n.startswith("opcost-"))})


def reap_dead_runs(client: Any, experiment: str) -> list[str]:
    """Runs still RUNNING whose process (on this host) is gone: set to KILLED. Returns their ids."""
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return []
    host = socket.gethostname()
    runs = client.search_runs(
        [exp.experiment_id], filter_string=f"attributes.status = 'RUNNING' and tags.`{HOST_TAG}` = '{host}'"
    )
    dead = []
    for r in runs:
        pid = r.data.tags.get(PID_TAG, "")
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            client.set_terminated(r.info.run_id, status="KILLED")
            dead.append(r.info.run_id)
    return dead


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: unwind like Ctrl-C so every run and lock is closed."""


@contextlib.contextmanager
def _signals_interrupt() -> Iterator[None]:
    previous: dict[int, Any] = {}

    def on_signal(signum: int, frame: Any) -> None:
        raise Terminated(f"signal {signum}")

    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            previous[sig] = signal.signal(sig, on_signal)
        except ValueError:  # not the main thread
            pass
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


@contextlib.contextmanager
def tracked_run(mlflow: Any, run_name: str, nested: bool = False, tags: dict[str, str] | None = None) -> Iterator[Any]:
    """A run that always ends: FINISHED, FAILED (exception) or KILLED (interrupt or signal)."""
    all_tags = {HOST_TAG: socket.gethostname(), PID_TAG: str(os.getpid()), **(tags or {})}
    run = mlflow.start_run(run_name=run_name, nested=nested, tags=all_tags)
    guard = contextlib.nullcontext() if nested else _signals_interrupt()
    try:
        with guard:
            yield run
    except KeyboardInterrupt:
        mlflow.end_run(status="KILLED")
        raise
    except BaseException:
        mlflow.end_run(status="FAILED")
        raise
    else:
        mlflow.end_run()


def source_tags(root: Path) -> dict[str, str]:
    """Where a run's code came from: the git commit (and whether the tree had uncommitted changes)
    and the DVC experiment name when `dvc exp run` is running it."""
    import subprocess

    tags = {}
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True, timeout=10)
        if head.returncode == 0:
            tags["git_commit"] = head.stdout.strip()
            tags["git_dirty"] = str(bool(dirty.stdout.strip())).lower()
    except (OSError, subprocess.SubprocessError):
        pass
    if os.environ.get("DVC_EXP_NAME"):
        tags["dvc_experiment"] = os.environ["DVC_EXP_NAME"]
    return tags


CHAMPION_BRANCH = "main"
# Files whose uncommitted changes make a run "not committed work" (dvc.lock and outputs may differ
# while `dvc repro` runs; code, parameters and the pipeline may not).
COMMITTED_PATHS = ("src", "params.yaml", "dvc.yaml", "pyproject.toml")


def committed_main(root: Path) -> tuple[bool, str]:
    """Whether a run here is committed work on the main branch (not a DVC experiment), and why not."""
    import subprocess

    if os.environ.get("DVC_EXP_NAME"):
        return False, f"a DVC experiment ({os.environ['DVC_EXP_NAME']})"
    try:
        branch = subprocess.run(
            ["git", "rev-parse", "--abbrev-ref", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
        )
        diff = subprocess.run(
            ["git", "diff", "--quiet", "HEAD", "--", *COMMITTED_PATHS], cwd=root, capture_output=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return False, "not a git checkout"
    if branch.returncode != 0:
        return False, "not a git checkout"
    if branch.stdout.strip() != CHAMPION_BRANCH:
        return False, f"branch {branch.stdout.strip()!r}, not {CHAMPION_BRANCH!r}"
    if diff.returncode != 0:
        return False, f"uncommitted changes in {', '.join(COMMITTED_PATHS)}"
    return True, ""


def find_version(client: Any, name: str, bundle_hash: str) -> Any | None:
    """The registered version of `name` whose bundle has this content hash (the oldest, if several)."""
    found = versions_with_hash(client, name, bundle_hash)
    return found[0] if found else None


def versions_with_hash(client: Any, name: str, bundle_hash: str) -> list[Any]:
    try:
        versions = client.search_model_versions(f"name='{name}'")
    except Exception as exc:  # no such registered model yet
        not_found_only(exc)
        return []
    return sorted((v for v in versions if v.tags.get(BUNDLE_HASH_TAG) == bundle_hash), key=lambda v: int(v.version))


def champion_version(client: Any, name: str) -> Any | None:
    try:
        return client.get_model_version_by_alias(name, CHAMPION)
    except Exception as exc:
        not_found_only(exc)
        return None


def not_found_only(exc: Exception) -> None:
    """Re-raise `exc` unless it is MLflow saying that a model, version or alias does not exist: a
    server that went down mid-command must not read as "not registered" (and end in a wrong answer
    or a duplicate registration); the CLI turns it into one line (stages/_run.service_down_line)."""
    from mlflow.exceptions import MlflowException

    if isinstance(exc, MlflowException) and exc.error_code in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"):
        return
    raise exc
