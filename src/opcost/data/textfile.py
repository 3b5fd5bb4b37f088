"""External text files read line by line, so that one bad line is a reject and not a crash.

A file is split on `\\n` (a trailing `\\r` is dropped, for CRLF files), or on `\\r` when it holds no
`\\n` at all (classic Mac line endings: read as one line, such a file silently gave 0 rows), each line
decoded on its own: a line that is not UTF-8 or holds a NUL character is returned with its problem named, and the
parser counts it as a rejected line with its number. Physical line numbers stay exact, which
`str.splitlines` (it also splits on form feeds, U+2028 and friends) would not guarantee.

Whole-file problems are one-line `OpcostError`s naming the file: missing, a directory or other
non-file where a file is expected, a symbolic link (inside data/external/ a link could point
anywhere on the machine; it is refused, never followed), unreadable, empty (or only whitespace), or not text at all
(more than half of its lines undecodable or holding NUL bytes: a binary or UTF-16 file). A text
file with a few bad lines is read, and those lines become rejects.
"""

from __future__ import annotations

import csv
import gzip
import math
import re
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from opcost.errors import OpcostError
from opcost.schemas import Table

UNDECODABLE = "undecodable"
NUL_BYTE = "nul_byte"
PROBLEM_MESSAGES = {
    UNDECODABLE: "bytes that are not UTF-8",
    NUL_BYTE: "a NUL character inside the line",
}
MAX_TEXT = 300  # characters of a rejected line kept in the rejects table
# A decimal number as the measuring scripts print it: ASCII digits only (float() would also take
# "nan", "inf", "1_000" and other scripts' digits), an optional exponent.
NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


class LineError(ValueError):
    """Why one line cannot be taken: a reason code of schemas.REJECT_REASONS and a message."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def parse_number(text: str, what: str) -> float:
    """`text` as a finite float, or a LineError naming `what` (nan, inf, 1e999, words, empty)."""
    if not NUMBER.fullmatch(text):
        raise LineError("bad_number", f"{what} = {clip(text, 40)!r} is not a number")
    x = float(text)
    if not math.isfinite(x):
        raise LineError("bad_number", f"{what} = {clip(text, 40)!r} is not a finite number")
    return x


@dataclass(frozen=True)
class Line:
    """One physical line: its 1-based number, its text, what is wrong with it (None: nothing), and
    whether a line end follows it (False only for a file's last line without one: a file cut short
    ends that way, so a parser treats such a line as possibly cut in its last value)."""

    number: int
    text: str
    problem: str | None = None
    terminated: bool = True


def clip(text: str, n: int = MAX_TEXT) -> str:
    """The start of a line for a rejects table or a message."""
    return text if len(text) <= n else text[: n - 3] + "..."


def refuse_links(path: Path) -> None:
    """A one-line error if `path`, or a folder between it and the `data/external` folder it lies in,
    is a symbolic link (`data/external` itself may be one: a shared datasets folder)."""
    p = Path(path)
    for q in (p, *p.parents):
        if q.name == "external" and q.parent.name == "data":
            break
        if q.is_symlink():
            raise OpcostError(
                f"{q} is a symbolic link; files inside data/external/ must be plain files and folders "
                "(a link could point anywhere): copy the data in instead; refused"
            )


def read_lines(path: Path, what: str) -> list[Line]:
    """The lines of `path`, a `what` file (e.g. "thesis log", "CSV"), or a one-line error naming it."""
    refuse_links(path)
    if not path.exists():
        raise OpcostError(f"{path} not found: expected a {what} file (run `dvc pull`)")
    if path.is_dir():
        raise OpcostError(f"{path} is a directory; expected a {what} file")
    if not path.is_file():
        raise OpcostError(f"{path} is not a regular file; expected a {what} file")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise OpcostError(f"{path} cannot be read ({exc.strerror or exc}); expected a {what} file") from None
    if path.name.endswith(".gz"):  # a gzip-compressed text file (NeuSight's CSVs)
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise OpcostError(f"{path} is not a gzip file ({exc}); expected a gzip-compressed {what} file") from None
    if not data.strip():
        raise OpcostError(f"{path} is empty; expected a {what} file")
    raw = data.split(b"\n") if b"\n" in data else data.split(b"\r")
    terminated = raw[-1] == b""
    if terminated:
        raw.pop()  # the newline that ends the last line
    lines: list[Line] = []
    bad_lines = 0
    for number, chunk in enumerate(raw, start=1):
        if chunk.endswith(b"\r"):
            chunk = chunk[:-1]
        problem = None
        try:
            text = chunk.decode("utf-8")
        except UnicodeDecodeError:
            text = chunk.decode("utf-8", errors="backslashreplace")
            problem = UNDECODABLE
        if problem is None and "\x00" in text:
            problem = NUL_BYTE
        bad_lines += problem is not None
        lines.append(Line(number, text, problem, terminated or number < len(raw)))
    if 2 * bad_lines > len(lines):
        raise OpcostError(
            f"{path} is not a text file ({bad_lines} of {len(lines)} lines undecodable or holding NUL bytes); "
            f"expected a {what} file"
        )
    return lines


class Reject(TypedDict):
    """A rejected line: a schemas.REJECTS row without the source column."""

    source_file: str
    line: int
    reason: str
    message: str
    text: str


@dataclass
class Parsed:
    """What a parser made of one file: rows taken, lines rejected (schemas.REJECTS rows without the
    source column) and lines skipped by kind (not data: warnings, progress, blank lines)."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)

    def reject(self, rel: str, line: Line, reason: str, message: str) -> None:
        self.rejects.append(
            {"source_file": rel, "line": line.number, "reason": reason, "message": message, "text": clip(line.text)}
        )

    def take(self, rel: str, line: Line, rows: list[dict[str, Any]], table: Table) -> bool:
        """Keep the rows of one line if every one meets the table's rules (Table.row_problem);
        otherwise reject the whole line, naming the first broken rule."""
        for r in rows:
            problem = table.row_problem(r)
            if problem:
                self.reject(rel, line, *problem)
                return False
        self.rows += rows
        return True


@dataclass(frozen=True)
class CsvFile:
    """A CSV file's header and its data lines, each with its physical line number."""

    path: Path
    header: list[str]
    lines: list[Line]


def read_csv(path: Path, required: list[str]) -> CsvFile:
    """Header and lines of a CSV file, or a one-line error naming it: not a file, empty, binary, a
    header that is not text, a column named twice, a required column missing, no data line."""
    lines = read_lines(path, "CSV")
    head = lines[0]
    if head.problem:
        raise OpcostError(f"{path}: the header line holds {PROBLEM_MESSAGES[head.problem]}; expected CSV column names")
    header = [h.strip() for h in next(csv.reader([head.text]), [])]
    twice = sorted({h for h in header if header.count(h) > 1})
    if twice:
        raise OpcostError(f"{path}: column(s) {', '.join(twice)} named more than once in the header")
    missing = [c for c in required if c not in header]
    if missing:
        raise OpcostError(f"{path}: missing column(s) {', '.join(missing)}; expected {', '.join(required)}")
    if not any(ln.text.strip() or ln.problem for ln in lines[1:]):
        raise OpcostError(f"{path} has a header but no data lines")
    return CsvFile(path, header, lines[1:])


def csv_records(f: CsvFile, rel: str, out: Parsed) -> list[tuple[Line, dict[str, str]]]:
    """(line, {column: field}) for every data line of `f` that is a CSV row of the header's width;
    undecodable lines, NUL bytes and rows of another width are rejected into `out`, blank lines
    counted as skipped."""
    records = []
    for line in f.lines:
        if line.problem:
            out.reject(rel, line, line.problem, PROBLEM_MESSAGES[line.problem])
            continue
        if not line.text.strip():
            out.skipped["blank"] += 1
            continue
        try:
            fields = next(csv.reader([line.text], strict=True))
        except csv.Error as exc:
            out.reject(rel, line, "value_count", f"not a CSV row: {exc}")
            continue
        if len(fields) != len(f.header):
            out.reject(rel, line, "value_count", f"{len(fields)} fields; the header has {len(f.header)}")
            continue
        records.append((line, dict(zip(f.header, fields))))
    return records
