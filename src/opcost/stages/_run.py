"""The shared `main()` of the stage modules: find the project, load params, run, print one line.

Also the one place that tells an MLflow service dying under a running command (`service_down_line`),
for the stage modules and the CLI alike, without importing MLflow where nothing used it."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

from opcost.errors import OpcostError
from opcost.params.load import Params, load_params
from opcost.paths import Paths, find_root


def execute(
    argv: list[str] | None,
    describe: str,
    add_args: Callable[[argparse.ArgumentParser], object],
    run: Callable[[Paths, Params, argparse.Namespace], Any],
    summary: Callable[[Any], str],
) -> int:
    """Parse `argv`, run the stage for the project around the working directory; user errors are one
    line on stderr and exit status 2, as in the CLI."""
    parser = argparse.ArgumentParser(description=describe)
    add_args(parser)
    args = parser.parse_args(argv)
    try:
        paths = Paths(find_root())
        result = run(paths, load_params(paths.params), args)
    except OpcostError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # MLflow's server or database died mid-stage: one line, as in the CLI
        line = service_down_line(exc)
        if line is None:
            raise
        print(f"error: {line}", file=sys.stderr)
        return 2
    print(summary(result))
    return 0


def execute_logged(
    argv: list[str] | None,
    describe: str,
    run: Callable[[Paths, Params, bool], Any],
    summary: Callable[[Any], str],
) -> int:
    """`execute` for a stage whose one flag is `--no-mlflow`: `run(paths, params, log_to_mlflow)`."""

    def add_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--no-mlflow", action="store_true", help="do not log to MLflow or register")

    return execute(argv, describe, add_args, lambda paths, params, a: run(paths, params, not a.no_mlflow), summary)


KEPT = (
    "what it wrote under models/ and reports/ before logging is kept (run.json holds the run); once the service is "
    "back, run it again, or `dvc commit` its stage and run `opcost sync-registry` to replay it"
)


def service_down_line(exc: BaseException) -> str | None:
    """One line naming the MLflow service that failed under a running command (the tracking server
    or its database died after `setup`'s reachability check), or None when `exc` is not such a
    failure. The CLI and the stage modules print it instead of MLflow's chained tracebacks, so this
    one function decides it for every MLflow call path (train, validate, sync-registry, promote)."""
    import sys

    if "mlflow" not in sys.modules:
        return None  # nothing talked to MLflow
    import mlflow
    from mlflow.exceptions import MlflowException

    uri = mlflow.get_tracking_uri()
    chain: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and e not in chain and len(chain) < 20:
        chain.append(e)
        e = e.__cause__ or e.__context__
    names = {f"{type(x).__module__}.{type(x).__name__}" for c in chain for x in type(c).__mro__ if x is not object}
    text = " ".join(" ".join(str(c).split()) for c in chain)
    first = next((str(c).splitlines()[0] for c in chain if str(c).strip()), type(exc).__name__)[:200]
    db = _database_host(uri)
    from_mlflow = any(isinstance(c, MlflowException) for c in chain)
    connection = any(
        n.startswith(("requests.exceptions.ConnectionError", "requests.exceptions.Timeout", "urllib3.exceptions."))
        or n == "http.client.RemoteDisconnected"
        for n in names
    ) or (from_mlflow and any(s in text for s in ("Max retries exceeded", "Connection refused", "Connection aborted")))
    if uri.startswith(("http://", "https://")):
        if connection:
            return f"the MLflow tracking server {uri} went down during the run ({first}): {KEPT}"
        if from_mlflow:
            return f"the MLflow tracking server {uri} failed during the run ({first}): {KEPT}"
    if db and (from_mlflow or any(n.startswith("sqlalchemy.exc.OperationalError") for n in names)):
        return f"the MLflow database {db} failed during the run ({first}): {KEPT}"
    local = _sqlite_failure(uri, chain)
    if local is not None:
        return local
    return None  # any other error on a local store is a bug to see whole, not a service down


def _sqlite_failure(uri: str, chain: list[BaseException]) -> str | None:
    """One line for a local SQLite store whose file failed under a running command (locked by another
    process past SQLite's wait, damaged, disk full): SQLite's own error, found in the exception chain.
    Errors of the statements themselves (IntegrityError, ProgrammingError) stay tracebacks."""
    if not uri.startswith("sqlite:///"):
        return None
    sqlite = [c for c in chain if type(c).__module__ == "sqlite3" and type(c).__name__ in _SQLITE_FILE_ERRORS]
    found = sqlite[0] if sqlite else None
    if found is None:
        return None
    db = uri[len("sqlite:///") :].split("?")[0]
    kept = KEPT.replace("the service is back", "the store works again")
    why = " ".join(str(found).split())[:200] or type(found).__name__
    if "locked" in why or "busy" in why:
        return f"the MLflow store {db} stayed locked by another process ({why}): {kept}"
    return f"the MLflow store {db} failed during the run ({why}): {kept}"


_SQLITE_FILE_ERRORS = ("OperationalError", "DatabaseError")  # not its IntegrityError, ProgrammingError, ...


def _database_host(uri: str) -> str | None:
    """host:port (scheme) of a database tracking URI, None for a server or a local store. The port
    table is model.tracking's, looked up among the loaded modules rather than imported: every MLflow
    call path loads it first, and a stage that never talks to MLflow keeps it out of its DVC deps."""
    tracking = sys.modules.get("opcost.model.records.tracking")
    db = None if tracking is None else tracking.database_address(uri)
    return None if db is None else f"{db[0]}:{db[1]} ({db[2]})"
