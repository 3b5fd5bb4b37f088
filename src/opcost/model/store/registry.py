"""The MLflow model registry: register a bundle once, keep exactly one version per content hash,
and move the `champion` alias.

The champion never moves by accident: candidates are compared only when scored on the same split,
and the alias moves automatically only from committed work on the main branch; anything else
registers a version and leaves the alias until an explicit `opcost promote`. Registration is
idempotent with several processes at once (a lock on SQLite; on a tracking server the newer of two
versions with one hash deletes itself). `sync-registry` registers only folders whose md5 `dvc.lock`
records, and never makes champion one whose stage `dvc status` reports changed.
Design: docs/architecture.md#mlflow-tracking-and-the-registry.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Callable, Sequence

from opcost.errors import OpcostError
from opcost.io import MODEL_DIGITS, round_floats
from opcost.model.composition.bundle import BUNDLE_FILE, Bundle
from opcost.model.pyfunc import LOADER_MODULE
from opcost.model.records import tracking
from opcost.params.load import Params
from opcost.paths import Paths

SCORE_TAG = "score"
SPLIT_TAG = tracking.SPLIT_TAG  # a version's tag and its run's are the same name
RECORD_TAG = "opcost.run_record"  # md5 of the run.json a replayed run was logged from


def bundle_score(bundle: Bundle) -> float:
    """What champions are compared on (higher is better): minus the grouped-split time-weighted
    error of the time model and the MAPE of the power model."""
    # from the scores as bundle.json stores them (rounded): the bundle train just fitted and the same
    # bundle loaded by sync-registry must score the same, or a tie looks like an improvement
    s = round_floats(bundle.scores, MODEL_DIGITS)
    return -float(s["time"]["twe"] + (s["power"]["mape"] if "power" in s else 0.0))


def version_tags(bundle: Bundle, split: str, source: dict[str, str]) -> dict[str, str]:
    tags = {
        tracking.BUNDLE_HASH_TAG: bundle.bundle_hash,
        tracking.DATA_VERSION_TAG: bundle.data_version,
        SCORE_TAG: repr(bundle_score(bundle)),
        SPLIT_TAG: split,
        **source,
    }
    for q, s in bundle.scores.items():
        for k, v in s.items():
            tags[f"{q}_{k}"] = repr(v)
    for q, m in bundle.models.items():
        tags[f"{q}_model"] = m.name
    return tags


def consider_champion(
    root: Path, client: Any, name: str, version: str, score: float, split: str, veto: str = ""
) -> str:
    """Move `champion` to `version` if the rules allow (module docstring); returns what happened.
    `veto` (why the content cannot be vouched for) keeps the alias where it is."""
    if veto:
        return f"champion left in place: {veto}"
    ok, why = tracking.committed_main(root)
    if not ok:
        return f"champion left in place: {why}; `opcost promote` moves it explicitly"
    champ = tracking.champion_version(client, name)
    if champ is not None and str(champ.version) == str(version):
        return "champion"
    if champ is None or champ.tags.get(SPLIT_TAG) != split or score >= float(champ.tags.get(SCORE_TAG, "-inf")):
        client.set_registered_model_alias(name, tracking.CHAMPION, version)
        return "champion"
    return f"champion {champ.version} scores better on the same split"


def promote(paths: Paths, target: str, version: str | None = None, targets: Sequence[str] | None = None) -> str:
    """`opcost promote`: point `champion` at `version`, or at the version of the bundle in models/.
    `target` must be one of `targets` (params.yaml train.targets) when given, and a safe name always
    (it becomes a path under models/)."""
    from mlflow import MlflowClient

    from opcost.validation import check_name

    check_name(target, "--target", "target")
    if targets is not None and target not in targets:
        raise OpcostError(f"--target {target!r} is not a train target; params.yaml train.targets: {', '.join(targets)}")

    check_store_exists(paths)  # a mistyped store: one line, not a new empty store
    tracking.setup(paths.root)
    client = MlflowClient()
    name = tracking.registered_name(target)
    with tracking.write_lock(paths.root):
        if version is None:
            bundle = Bundle.load(paths.model_dir(target))
            found = tracking.find_version(client, name, bundle.bundle_hash)
            if found is None:
                raise OpcostError(f"models/{target} is not registered: run `opcost sync-registry` first")
            version = str(found.version)
        try:
            client.get_model_version(name, version)
        except Exception as exc:
            tracking.not_found_only(exc)  # a server that went down is not a missing version
            raise OpcostError(f"{name} has no version {version!r}") from None
        client.set_registered_model_alias(name, tracking.CHAMPION, version)
    return version


def repair(client: Any, name: str) -> list[str]:
    """Delete versions of `name` that carry no bundle hash (half-registered). Returns their numbers.
    Only MLflow saying that `name` does not exist means nothing to repair: any other failure (a server
    or database gone) is raised, and the CLI and stages report it in one line (stages/_run)."""
    from mlflow.exceptions import MlflowException

    try:
        versions = client.search_model_versions(f"name='{name}'")
    except MlflowException as exc:
        tracking.not_found_only(exc)
        return []
    removed = []
    for v in versions:
        if not v.tags.get(tracking.BUNDLE_HASH_TAG):
            client.delete_model_version(name, v.version)
            removed.append(str(v.version))
    return removed


def _version_source(root: Path, mlflow: Any) -> dict[str, str]:
    """A version's code provenance: the training commit its run carries (a replay keeps it), and the
    registering clone's commit apart as `replayed_from_commit` when it differs."""
    from opcost.model.records.runlog import REPLAYED_COMMIT, TRAINING_COMMIT, TRAINING_DIRTY

    here = tracking.source_tags(root)
    run = mlflow.active_run()
    run_tags = {} if run is None else dict(mlflow.get_run(run.info.run_id).data.tags)
    if TRAINING_COMMIT not in run_tags:
        if "replayed_from" not in run_tags:
            return here  # registered by the training run itself: this checkout is the training commit
        # a replayed record from before training commits were recorded: the training commit is unknown,
        # and this clone's commit is only the replay's
        out = {k: v for k, v in here.items() if k not in ("git_commit", "git_dirty")}
        if "git_commit" in here:
            out[REPLAYED_COMMIT] = here["git_commit"]
        return out
    out = {"git_commit": run_tags[TRAINING_COMMIT], "git_dirty": run_tags.get(TRAINING_DIRTY, "unknown")}
    if here.get("git_commit") and here["git_commit"] != out["git_commit"]:
        out[REPLAYED_COMMIT] = here["git_commit"]
    if "dvc_experiment" in here:
        out["dvc_experiment"] = here["dvc_experiment"]
    return out


def logged_md5(bundle: Bundle) -> str:
    """The md5 of the files a registered version of `bundle` holds (what `bundle.save` writes, which is
    deterministic): the value of its `bundle_md5` tag, computed from the bundle, never from the store."""
    from opcost.model.records.integrity import dir_md5

    with tempfile.TemporaryDirectory() as tmp:
        bundle.save(Path(tmp) / "b")
        return dir_md5(Path(tmp) / "b")


def restore_md5_tag(client: Any, name: str, version: Any, bundle: Bundle) -> bool:
    """Tag `version` with the md5 of `bundle` (checked against dvc.lock by the caller) when it carries
    none: a version registered before the tag existed, or one whose tag was lost. A version whose
    artifact differs from the bundle is then refused at load, as a tampered one is. True if tagged."""
    from opcost.model.records.integrity import BUNDLE_MD5_TAG

    if version.tags.get(BUNDLE_MD5_TAG):
        return False
    client.set_model_version_tag(name, str(version.version), BUNDLE_MD5_TAG, logged_md5(bundle))
    return True


def register_bundle(root: Path, mlflow: Any, bundle: Bundle, split: str, veto: str = "") -> str | None:
    """Register `bundle` from the active run unless a version with its hash exists, then consider it
    for `champion` (module docstring; `veto` keeps the alias where it is). Returns the new version, or None."""
    from opcost.model import pyfunc
    from opcost.model.records.integrity import BUNDLE_MD5_TAG
    from opcost.paths import Paths as _Paths

    example = pyfunc.input_example(_Paths(root).operations, bundle.kinds)

    def log() -> tuple[str, str | None]:
        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp) / "bundle"
            bundle.save(data)
            info = mlflow.pyfunc.log_model(
                name="bundle",
                loader_module=LOADER_MODULE,
                data_path=str(data),
                pip_requirements=[],
                signature=pyfunc.signature(),
                input_example=example,
            )
        return info.model_uri, info.model_id

    name = tracking.registered_name(bundle.target)
    tags = version_tags(bundle, split, _version_source(root, mlflow))
    description = pyfunc.describe(bundle, split)
    tags[BUNDLE_MD5_TAG] = logged_md5(bundle)
    version = _register_once(
        root, mlflow, name, bundle.bundle_hash, bundle_score(bundle), split, tags, log, description, veto
    )
    if version is not None:
        mlflow.log_metric("bundle_score", bundle_score(bundle))
    return version


def register_folder(
    root: Path,
    mlflow: Any,
    name: str,
    folder: Path,
    content_hash: str,
    score: float,
    split: str,
    tags: dict[str, str],
    data_version: str = "",
) -> str | None:
    """Register a model stored as plain files (models/clock, models/xdevice, models/xpower) from the
    active run as a pyfunc model (model/pyfunc.py: its folder is the data, with a signature and an
    example), once per content hash, tagged with the md5 of the files it holds (`bundle_md5`, checked
    when `predict --registry` loads it) and `data_version`, and considered for `champion` by the same
    rules as the bundles. Returns the new version, or None when one with this hash exists."""
    from opcost.model import pyfunc
    from opcost.model.records.integrity import BUNDLE_MD5_TAG, dir_md5

    file = pyfunc.folder_model_file(folder)

    def log() -> tuple[str, str | None]:
        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp) / Path(folder).name
            data.mkdir()
            for f in sorted(Path(folder).iterdir()):  # the model's own files, not what a test or user left
                if f.is_file():
                    data.joinpath(f.name).write_bytes(f.read_bytes())
            info = mlflow.pyfunc.log_model(
                name="model",
                loader_module=pyfunc.FOLDER_LOADER_MODULE,
                data_path=str(data),
                pip_requirements=[],
                signature=pyfunc.folder_signature(file),
                input_example=pyfunc.folder_example(file, Paths(root).operations),
            )
        return info.model_uri, info.model_id

    all_tags = {**tags, tracking.BUNDLE_HASH_TAG: content_hash, SCORE_TAG: repr(score), SPLIT_TAG: split}
    all_tags[BUNDLE_MD5_TAG] = dir_md5(folder)
    all_tags[DATA_VERSION_TAG] = data_version or "unknown"
    all_tags.update(_version_source(root, mlflow))
    doc = f"{tracking.MODEL_DESCRIPTIONS.get(name, name)} Split {split}; score (minus the errors) {score:.4g}."
    if data_version:
        doc += f" Trained on data version {data_version}."
    from mlflow import MlflowClient

    client = MlflowClient()
    with tracking.write_lock(root):
        was_champion = _drop_plain_versions(client, name, content_hash)
        version = _register_once(root, mlflow, name, content_hash, score, split, all_tags, log, doc)
        if was_champion and version is not None:  # the same model, now loadable: it keeps the alias
            client.set_registered_model_alias(name, tracking.CHAMPION, version)
    return version


def _drop_plain_versions(client: Any, name: str, content_hash: str) -> bool:
    """Delete the versions of `name` with this content hash that were registered as plain files (no
    `bundle_md5` tag, no MLmodel: not loadable), so the model is registered again as a pyfunc model.
    Returns whether one of them was `champion`."""
    from opcost.model.records.integrity import BUNDLE_MD5_TAG

    champ = tracking.champion_version(client, name)
    was = False
    for v in tracking.versions_with_hash(client, name, content_hash):
        if not v.tags.get(BUNDLE_MD5_TAG):
            was = was or (champ is not None and str(champ.version) == str(v.version))
            client.delete_model_version(name, v.version)
    return was


DATA_VERSION_TAG = tracking.DATA_VERSION_TAG


def stage_data_version(root: Path, stage: str, locked: bool = False) -> str:
    """The data a folder model's stage learnt from, as one md5: over the content md5 of each of the
    stage's data dependencies in dvc.yaml (every dep outside src/), each computed as DVC does (a file's
    md5, a folder's `dir_md5`). `locked`: read those md5s from dvc.lock instead (a fresh clone's
    sync-registry, where data/ may not be pulled). "" where dvc.yaml (or dvc.lock) does not say."""
    import hashlib
    import json

    import yaml

    from opcost.model.records.integrity import dir_md5, file_md5

    try:
        spec = yaml.safe_load((Path(root) / "dvc.yaml").read_text())["stages"][stage]
        deps = [str(d) for d in spec.get("deps", []) if not str(d).startswith("src/")]
    except (OSError, KeyError, TypeError, yaml.YAMLError):
        return ""
    md5s: dict[str, str] = {}
    if locked:
        try:
            lock = yaml.safe_load((Path(root) / "dvc.lock").read_text())["stages"][stage]
            recorded = {str(d["path"]): str(d.get("md5", "")).removesuffix(".dir") for d in lock.get("deps", [])}
        except (OSError, KeyError, TypeError, yaml.YAMLError):
            return ""
        for d in deps:
            if not recorded.get(d):
                return ""
            md5s[d] = recorded[d]
    else:
        for d in deps:
            p = Path(root) / d
            if not p.exists():
                return ""
            md5s[d] = dir_md5(p) if p.is_dir() else file_md5(p)
    return hashlib.md5(json.dumps(md5s, sort_keys=True).encode()).hexdigest()


def _register_once(
    root: Path,
    mlflow: Any,
    name: str,
    content_hash: str,
    score: float,
    split: str,
    tags: dict[str, str],
    log: Callable[[], tuple[str, str | None]],
    description: str | None = None,
    veto: str = "",
) -> str | None:
    """The registration rules every registered model follows (module docstring): under the write lock,
    repair leftovers; nothing if a version with `content_hash` exists; else `log()` the artifact
    (returns its source URI and logged-model id), create the version with its tags in the same call,
    step back if a racing process registered the same hash first, and consider it for `champion`."""
    from mlflow import MlflowClient

    client = MlflowClient()
    run = mlflow.active_run()
    if run is None:
        raise RuntimeError(f"registering {name} needs an active MLflow run")
    with tracking.write_lock(root):
        repair(client, name)
        found = tracking.find_version(client, name, content_hash)
        if found is not None:
            # registered already, perhaps by a process killed before its champion decision: decide now
            consider_champion(root, client, name, str(found.version), score, split, veto)
            return None
        source, model_id = log()
        ensure_registered_model(client, name)
        # model_id links the version to its logged model: without it a tracking server cannot resolve
        # models:/<name>/<version> to the artifacts (a local store happens to find them by path)
        mv = client.create_model_version(
            name, source=source, run_id=run.info.run_id, tags=tags, description=description, model_id=model_id or None
        )
        model_doc = tracking.MODEL_DESCRIPTIONS.get(name) or tracking.model_description(name)
        client.update_registered_model(name, description=model_doc)
        version = str(mv.version)
        winner = tracking.find_version(client, name, content_hash)
        if winner is not None and str(winner.version) != version:
            client.delete_model_version(name, version)  # another process registered the same model first
            return None
        consider_champion(root, client, name, version, score, split, veto)
    return version


def ensure_registered_model(client: Any, name: str) -> None:
    """Create registered model `name` unless it exists; any other MLflow failure (a server or database
    gone, no permission) is raised, not read as "exists already"."""
    from mlflow.exceptions import MlflowException

    try:
        client.create_registered_model(name)
    except MlflowException as exc:
        if exc.error_code != "RESOURCE_ALREADY_EXISTS":
            raise


def sync_registry(paths: Paths, params: Params) -> dict[str, str | None]:
    """Register the bundles under models/ that this tracking store lacks. A fresh clone's `dvc pull`
    brings models without their MLflow runs: each bundle's run record (run.json) is replayed, so the
    store gets the same parent and nested runs, fold scores and figures the training machine logged.

    Every folder is checked before anything is written: its content md5 against `dvc.lock` (refused
    if it differs), and its stage against `dvc status` (a changed stage is registered, never champion).
    A registered version of a folder's bundle that lacks its `bundle_md5` tag gets it back (`restore_md5_tag`)."""
    from mlflow import MlflowClient

    from opcost.model.records import integrity, runlog

    tracking.check_store(tracking.tracking_uri(paths.root))  # a broken store is one line before any folder is read
    checked = []
    for target in params.train.targets:
        folder = paths.model_dir(target)
        if not (folder / BUNDLE_FILE).is_file():
            raise OpcostError(f"{folder} has no {BUNDLE_FILE}: run `dvc pull` or `dvc repro train@{target}`")
        bundle = Bundle.load(folder)
        stage = integrity.check_locked(paths.root, folder, bundle.content_md5)
        checked.append((target, folder, bundle, stage))
    changed = integrity.dvc_changed(paths.root, [stage for *_, stage in checked])
    mlflow = tracking.setup(paths.root)
    client = MlflowClient()
    done: dict[str, str | None] = {}
    for target, folder, bundle, stage in checked:
        veto = f"`dvc status` reports {stage} changed ({changed[stage]})" if stage in changed else ""
        record = runlog.load(folder)
        record_id = integrity.file_md5(folder / runlog.RUN_FILE)
        split = record["tags"].get(SPLIT_TAG, "")
        name = tracking.registered_name(target)
        with tracking.write_lock(paths.root):  # one replay at a time: a second sync finds it done
            found = tracking.find_version(client, name, bundle.bundle_hash)
            if found is not None:
                done[target] = None
                restore_md5_tag(client, name, found, bundle)  # the folder matched dvc.lock above
                # committed main: the bundle in models/ may now be champion (re-checked on every sync, so
                # a kill between a version's creation and this decision is repaired by the next one)
                consider_champion(paths.root, client, name, str(found.version), bundle_score(bundle), split, veto)
                continue
            if _being_replayed(client, record_id):
                done[target] = None  # another sync is replaying it now (a tracking server: no lock)
                continue
            extra = {**runlog.replay_tags(paths.root, f"models/{target}/{runlog.RUN_FILE}"), RECORD_TAG: record_id}
            with runlog.replayed(mlflow, record, extra):
                done[target] = register_bundle(paths.root, mlflow, bundle, split, veto)
    clock_file = paths.clock_model_dir / CLOCK_MODEL_FILE
    if clock_file.is_file():
        done[tracking.CLOCK_MODEL] = sync_clock_model(paths, mlflow, client)
    if (paths.xdevice_model_dir / XDEVICE_MODEL_FILE).is_file():
        done[tracking.XDEVICE_MODEL] = sync_xdevice_model(paths, mlflow, client)
    if (paths.xpower_model_dir / XPOWER_MODEL_FILE).is_file():
        done[tracking.XPOWER_MODEL] = sync_clock_model(
            paths, mlflow, client, tracking.XPOWER_MODEL, paths.xpower_model_dir, XPOWER_MODEL_FILE, "power"
        )
    return done


# model/crossdevice/xdevice.py's files (not imported)
XDEVICE_MODEL_FILE, XDEVICE_TREES_FILE = "xdevice.json", "trees.npz"


def xdevice_hash(folder: Path) -> str:
    """Content hash of models/xdevice/: its JSON in canonical form (without the stored hash) and the trees."""
    import hashlib
    import json

    try:
        data = json.loads((folder / XDEVICE_MODEL_FILE).read_text())
    except ValueError:
        raise OpcostError(f"{folder / XDEVICE_MODEL_FILE} is not JSON; refused") from None
    h = hashlib.md5(json.dumps({**data, "content_hash": ""}, sort_keys=True).encode())
    h.update((folder / XDEVICE_TREES_FILE).read_bytes())
    return h.hexdigest()


def sync_xdevice_model(paths: Paths, mlflow: Any, client: Any) -> str | None:
    """Register models/xdevice/ from its run record when this store lacks it (as for the clock model)."""
    from opcost.model.records import runlog

    folder = paths.xdevice_model_dir
    chash = xdevice_hash(folder)
    record = runlog.load(folder)
    split = record["tags"].get(SPLIT_TAG, "")
    score = -float(record["metrics"].get(tracking.xdevice_net_metric("all"), 0.0))
    found = loadable_version(client, tracking.XDEVICE_MODEL, chash)
    if found is not None:
        with tracking.write_lock(paths.root):
            consider_champion(paths.root, client, tracking.XDEVICE_MODEL, str(found.version), score, split)
        return None
    version = record_data_version(paths.root, record, tracking.XDEVICE_RUN)
    extra = runlog.replay_tags(paths.root, f"models/xdevice/{runlog.RUN_FILE}")
    with runlog.replayed(mlflow, record, extra):
        return register_folder(paths.root, mlflow, tracking.XDEVICE_MODEL, folder, chash, score, split, {}, version)


def loadable_version(client: Any, name: str, content_hash: str) -> Any | None:
    """The registered version of a folder model with this content hash, unless it was registered as
    plain files (no `bundle_md5` tag): such a one is registered again, as a pyfunc model."""
    from opcost.model.records.integrity import BUNDLE_MD5_TAG

    found = tracking.find_version(client, name, content_hash)
    return found if found is not None and found.tags.get(BUNDLE_MD5_TAG) else None


def record_data_version(root: Path, record: dict[str, Any], stage: str) -> str:
    """A folder model's data version: the one its run record carries, else (a record written before
    records carried it) the one dvc.lock's dependencies of `stage` give (`stage_data_version`)."""
    return str(record["tags"].get(DATA_VERSION_TAG) or stage_data_version(root, stage, locked=True))


def _being_replayed(client: Any, record_id: str) -> bool:
    """Whether a run replayed from the run record `record_id` is running now (on SQLite the write
    lock already serialises syncs; a finished replay whose registration died is replayed again)."""
    exp = client.get_experiment_by_name(tracking.EXPERIMENT)
    if exp is None:
        return False
    runs = client.search_runs(
        [exp.experiment_id],
        filter_string=f"tags.`{RECORD_TAG}` = '{record_id}' and attributes.status = 'RUNNING'",
        max_results=1,
    )
    return bool(runs)


CLOCK_MODEL_FILE = "clock_model.json"  # model/clocks/clock.py's file (not imported: the train stages do not load it)
XPOWER_MODEL_FILE = "xpower_model.json"  # model/clocks/xpower.py's file (likewise)


def canonical_hash(data: object) -> str:
    """md5 of a JSON value in canonical form (sorted keys): a JSON model's content hash, the same whether
    taken from the model in memory (the training stage) or from its saved file (`json_hash`)."""
    import hashlib
    import json

    return hashlib.md5(json.dumps(data, sort_keys=True).encode()).hexdigest()


def json_hash(path: Path) -> str:
    """`canonical_hash` of a JSON file's content: the clock model's content hash, as a fresh clone finds it."""
    import json

    try:
        data = json.loads(path.read_text())
    except ValueError:
        raise OpcostError(f"{path} is not JSON; refused") from None
    return canonical_hash(data)


def sync_clock_model(
    paths: Paths,
    mlflow: Any,
    client: Any,
    name: str = tracking.CLOCK_MODEL,
    folder: Path | None = None,
    file: str = CLOCK_MODEL_FILE,
    first: str = "time",
) -> str | None:
    """Register a JSON model folder (models/clock/, models/xpower/) from its run record when this store
    lacks it (as for the bundles); score = -(leave-one-GPU-out `first` + energy MAPE), as the stage logs."""
    from opcost.model.records import runlog

    folder = paths.clock_model_dir if folder is None else folder
    chash = json_hash(folder / file)
    record = runlog.load(folder)
    split = record["tags"].get(SPLIT_TAG, "")
    metrics = record["metrics"]
    score = -float(
        metrics.get(tracking.logo_mape_metric(first), 0.0) + metrics.get(tracking.logo_mape_metric("energy"), 0.0)
    )
    found = loadable_version(client, name, chash)
    if found is not None:
        with tracking.write_lock(paths.root):
            consider_champion(paths.root, client, name, str(found.version), score, split)
        return None
    version = record_data_version(paths.root, record, tracking.CLOCK_RUN)  # train-clock writes both folders
    extra = runlog.replay_tags(paths.root, f"models/{folder.name}/{runlog.RUN_FILE}")
    with runlog.replayed(mlflow, record, extra):
        return register_folder(paths.root, mlflow, name, folder, chash, score, split, {}, version)


def root_origin(paths: Paths) -> str:
    """Where the project root came from, for error messages: the variable that set it, or the search."""
    import os

    for var in ("OPCOST_ROOT", "DVC_ROOT"):
        if os.environ.get(var):
            return f"{var}={os.environ[var]}"
    return "the working directory"


def no_models_error(paths: Paths) -> OpcostError:
    """No models/ here: say whether this is the repository at all before suggesting `dvc pull`."""
    if not (paths.root / "dvc.yaml").is_file():
        return OpcostError(
            f"{paths.root} is not an opcost checkout (no dvc.yaml; root from {root_origin(paths)}): run inside "
            "one, set OPCOST_ROOT, or use --registry (MLFLOW_TRACKING_URI)"
        )
    return OpcostError(
        f"no trained model found under {paths.root / 'models'}: run `dvc pull` (or `dvc repro train@<device>-<mode>`) "
        "first, or use --registry"
    )


def champion_bundle(paths: Paths, target: str, trust_unrecorded: bool = False) -> Bundle:
    """The `champion` of `opcost-<target>` from the registry, loaded as data from its artifact (the
    bundle's JSON and npz files; nothing unpickled). Needs no local models/, only a store: the
    MLFLOW_TRACKING_URI, or the repository's mlflow.db. Its content must match the version's
    `bundle_md5` tag; a version without one is refused unless `trust_unrecorded` (then the bundle is
    marked unvouched, and its answers say so)."""
    check_store_exists(paths)
    mlflow = tracking.setup(paths.root)
    uri_store = tracking.tracking_uri(paths.root)
    uri = f"models:/{tracking.registered_name(target)}@{tracking.CHAMPION}"
    try:
        local = Path(mlflow.artifacts.download_artifacts(artifact_uri=uri))
    except Exception as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if "not found" in why and target.rpartition("-")[0] and not _trained_target(paths, target):
            raise no_own_model_error(paths, target, uri_store) from None
        raise OpcostError(
            f"cannot load {uri} from {uri_store}: run `dvc repro train@{target}` or `opcost sync-registry` ({why})"
        ) from None
    from mlflow import MlflowClient

    from opcost.model.records.integrity import BUNDLE_MD5_TAG

    name = tracking.registered_name(target)
    champ = tracking.champion_version(MlflowClient(), name)
    expect = champ.tags.get(BUNDLE_MD5_TAG) if champ is not None else None
    if not expect:
        which = f"version {champ.version} of {name}" if champ is not None else f"the champion of {name}"
        why = f"{which} carries no {BUNDLE_MD5_TAG} tag, so nothing vouches for its content"
        if not trust_unrecorded:
            raise OpcostError(
                f"{why}: run `opcost sync-registry` in a checkout whose models/{target} matches dvc.lock to restore "
                "the tag, or pass --trust-unrecorded to use it as it is; refused"
            )
        bundle = Bundle.load(local / "data" / "bundle")
        bundle.unvouched = why
        return bundle
    where = f"the registry's tag {BUNDLE_MD5_TAG} of version {champ.version}" if champ is not None else ""
    return Bundle.load(local / "data" / "bundle", expect_md5=expect, expected_from=where)


def check_store_exists(paths: Paths) -> None:
    """Refuse, in one line, a local store that does not exist or is an empty file before MLflow is asked:
    reading from it (`predict --registry`, `promote`) would create a new, empty store and then report the
    models missing. A mistyped path (`sqlite:///mlfow.db`) is named with the stores that do exist."""
    import os

    uri = tracking.tracking_uri(paths.root)
    db = tracking._sqlite_file(uri)
    if db is None:
        return
    db = Path(str(db).split("?")[0]).absolute()
    if db.is_file() and db.stat().st_size > 0:
        return
    what = "is an empty file" if db.is_file() else "does not exist"
    if not os.environ.get("MLFLOW_TRACKING_URI"):
        raise OpcostError(
            f"no MLflow store at {db} (it {what}; root from {root_origin(paths)}): set MLFLOW_TRACKING_URI to the "
            "registry, or run inside the repository after `opcost sync-registry`"
        )
    near = sorted(str(f) for f in db.parent.glob("*.db") if f != db and f.is_file()) if db.parent.is_dir() else []
    own = tracking.store_root(paths.root) / "mlflow.db"
    if own.is_file() and str(own) not in near and own != db:
        near.append(str(own))
    found = f"; stores that exist: {', '.join(f'sqlite:///{f}' for f in near[:3])}" if near else ""
    raise OpcostError(
        f"MLFLOW_TRACKING_URI={uri} names no MLflow store ({db} {what}){found}: point it at the existing store, "
        "or fill a new one with `opcost sync-registry` in the repository; refused (nothing was created)"
    )


def champion_folder(paths: Paths, name: str, folder: str, trust_unrecorded: bool = False) -> Path:
    """The `champion` of folder model `name` (opcost-clock, opcost-xdevice, opcost-xpower) downloaded from
    the registry: the folder its pyfunc model holds, whose content must match the version's `bundle_md5`
    tag (`trust_unrecorded`: a version without the tag is served as it is). `folder`: the models/ folder the
    model comes from, for the advice. One line for a store or model that cannot answer."""
    from mlflow import MlflowClient

    from opcost.model.records.integrity import BUNDLE_MD5_TAG, dir_md5

    check_store_exists(paths)
    mlflow = tracking.setup(paths.root)
    uri_store = tracking.tracking_uri(paths.root)
    uri = f"models:/{name}@{tracking.CHAMPION}"
    how = f"run `opcost sync-registry` in a checkout that holds models/{folder} (`dvc pull models/{folder}`)"
    champ = tracking.champion_version(MlflowClient(), name)
    if champ is None:
        raise OpcostError(f"the registry {uri_store} has no champion of {name}: {how}, or leave out --registry")
    expect = champ.tags.get(BUNDLE_MD5_TAG)
    if not expect and not trust_unrecorded:
        raise OpcostError(
            f"version {champ.version} of {name} carries no {BUNDLE_MD5_TAG} tag (registered as plain files by an "
            f"older opcost, or its tag was lost), so nothing vouches for its content: {how} to register it again "
            "as a loadable model; refused"
        )
    try:
        local = Path(mlflow.artifacts.download_artifacts(artifact_uri=uri))
    except Exception as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise OpcostError(f"cannot load {uri} from {uri_store}: {how} ({why})") from None
    data = sorted(p for p in (local / "data").glob("*") if p.is_dir()) if (local / "data").is_dir() else []
    if len(data) != 1:
        raise OpcostError(f"{uri} from {uri_store} is not a pyfunc model of models/{folder} (no data folder): {how}")
    if expect:
        got = dir_md5(data[0])
        if got != expect:
            raise OpcostError(
                f"{uri} from {uri_store} was modified after it was registered (content md5 {got}, the tag "
                f"{BUNDLE_MD5_TAG} of version {champ.version} records {expect}): {how}; refused"
            )
    return data[0]


def _trained_target(paths: Paths, target: str) -> bool:
    """Whether `target` is a train target of this project (params.yaml), as far as a checkout says."""
    try:
        from opcost.params.load import load_params

        return target in load_params(paths.params).train.targets
    except Exception:  # no checkout (predict --registry from anywhere): nothing says it is one
        return False


def no_own_model_error(paths: Paths, target: str, uri_store: str) -> OpcostError:
    """`predict --registry` on a GPU without a registered model of its own (e.g. H100): the registry's
    answers are its champions' own models; a transferred answer needs the checkout's cross-device
    model with the ops measured on that GPU (models/measured), which the registry does not carry."""
    from mlflow import MlflowClient

    device, _, mode = target.rpartition("-")
    try:
        names = sorted(m.name for m in MlflowClient().search_registered_models())
    except Exception:
        names = []
    own = [n.removeprefix("opcost-").rpartition("-")[0] for n in names if n.endswith(f"-{mode}")]
    trained = f"GPUs with a model of their own there in {mode} mode: {', '.join(own)}" if own else "none in this mode"
    return OpcostError(
        f"the registry {uri_store} holds no model of {device} in {mode} mode ({trained}); --registry answers only "
        f"those: for {device}'s transferred answer (the cross-device model), leave out --registry in the repository "
        "after `dvc pull models/xdevice models/xpower models/measured`"
    )
