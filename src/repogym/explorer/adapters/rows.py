"""Row datasets as environments: parquet, JSON Lines, JSON and CSV files (or a folder of them).

Each row becomes a task through a processor (see :mod:`.processors`), picked per dataset by
the best match over the first rows. A task's id is its row's id column (``instance_id``,
``task_id``, ``id`` …, made URL-safe) or ``row-<index>``; the environment's id is the file's
name without its extension, or the folder's name.

Files are streamed: JSON Lines line by line, parquet row group by row group (the id column
alone while listing), CSV through the csv reader, so listing task ids is cheap and a task is
found again by its position (a byte offset for JSON Lines) without re-reading the file.

Malformed rows (a line that is not JSON, a JSON value that is not an object) are skipped and
reported: each is logged once, kept in :attr:`RowsReader.skipped`, and the environment's
description counts them. A file with no readable row in its first lines is an
:class:`AdapterError` (one line).

Rows may carry files as archives: a zip or tar as bytes, as base64 text, or as a path to an
archive beside the rows. They are read in memory with limits (see :mod:`._archive`); an unsafe
archive is rejected whole and the task page shows why.

Inside a dataset folder nothing is read through a symlink (:mod:`._safefs`): row files, the
README and archives beside the rows are opened without following any link, a symlinked row
file or sub-folder is not a source of rows, and a symlinked archive is rejected with the reason.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import logging
import os
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repogym.explorer.adapters._archive import (
    DEFAULT_LIMITS,
    ArchiveLimits,
    ArchiveRejected,
    archive_bytes,
    read_archive,
)
from repogym.explorer.adapters._safefs import (
    LEAVING,
    UnsafeFile,
    open_inside,
    read_inside,
    read_text_inside,
    rel_to,
)
from repogym.explorer.adapters.base import AdapterError, stat_fingerprint
from repogym.explorer.adapters.processors import Processor, pick_processor
from repogym.explorer.model import EnvDoc, FileDoc, TaskDoc

__all__ = ["ROW_SUFFIXES", "RowsAdapter", "RowsReader"]

log = logging.getLogger("repogym.explorer.rows")

ROW_SUFFIXES = {".parquet": "parquet", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json",
                ".csv": "csv"}  # fmt: skip
ID_COLUMNS = ("instance_id", "task_id", "id", "uid", "problem_id", "question_id", "qid", "_id")
ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")
SAMPLE_ROWS = 20
MAX_JSON_BYTES = 256 * 1024 * 1024  # a .json file is read whole; bigger ones should be JSONL
MAX_FILE_BYTES = 2 * 1024 * 1024  # an archive member bigger than this is listed, not packed
# JSON files found beside rows that describe a dataset rather than hold its rows
_NOT_ROWS = frozenset(
    {"dataset_info.json", "dataset_dict.json", "state.json", "registry.json", "manifest.json",
     "config.json", "package.json", "tsconfig.json"}
)  # fmt: skip
_SAFE_ID = re.compile(r"[^A-Za-z0-9._-]+")


class _RowError(Exception):
    """One malformed row (skipped, reported)."""


@dataclass(slots=True)
class _Loc:
    file: int  # index into reader.files
    pos: int  # JSONL: byte offset; others: row number in the file


def _row_files(path: Path) -> list[Path]:
    """Row files of a location: the file itself, or a folder's regular files one or two levels
    down (symlinked files and folders are not followed)."""
    if path.is_file():
        return [path] if path.suffix.lower() in ROW_SUFFIXES else []
    top: list[Path] = []
    below: list[Path] = []
    try:
        with os.scandir(path) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        return []
    for e in entries:
        if e.name.startswith("."):
            continue
        if e.is_dir(follow_symlinks=False):
            try:
                with os.scandir(e.path) as sub:
                    below.extend(
                        Path(f.path) for f in sub if not f.name.startswith(".") and _is_row_entry(f)
                    )
            except OSError:
                continue
        elif _is_row_entry(e):
            top.append(Path(e.path))
    return top + sorted(below)


def _is_row_entry(e: os.DirEntry[str]) -> bool:
    return (
        e.is_file(follow_symlinks=False)
        and Path(e.name).suffix.lower() in ROW_SUFFIXES
        and e.name.lower() not in _NOT_ROWS
    )


def _is_row_file(p: Path) -> bool:
    return (
        p.suffix.lower() in ROW_SUFFIXES
        and p.name.lower() not in _NOT_ROWS
        and p.is_file()
        and not p.is_symlink()
    )


def _looks_like_rows(path: Path, max_dirs: int = 20) -> bool:
    """Cheap check for detect(): row files at the top or in one of the first sub-folders, and
    no ``task.toml`` beside them (a Harbor dataset is not a row dataset)."""
    try:
        entries = sorted(os.scandir(path), key=lambda e: e.name)
    except OSError:
        return False
    dirs = [e for e in entries if e.is_dir(follow_symlinks=False) and not e.name.startswith(".")]
    if any(not e.name.startswith(".") and _is_row_file(Path(e.path)) for e in entries):
        return True
    for d in dirs[:max_dirs]:
        sub = Path(d.path)
        if (sub / "task.toml").is_file():
            return False
        try:
            with os.scandir(sub) as it:
                if any(not e.name.startswith(".") and _is_row_file(Path(e.path)) for e in it):
                    return True
        except OSError:
            continue
    return False


def _csv_encoding(fh: io.BufferedIOBase) -> tuple[str, str]:
    """(encoding, note) for a CSV file: UTF-8 when its start decodes, else cp1252 / latin-1."""
    with fh:
        head = fh.read(1024 * 1024)
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
        return "utf-8-sig", ""
    except UnicodeDecodeError:
        pass
    try:
        head.decode("cp1252")
        return "cp1252", "decoded as cp1252 (not UTF-8)"
    except UnicodeDecodeError:
        return "latin-1", "decoded as latin-1 (not UTF-8)"


def _raise_csv_limit() -> None:
    # base64 archives in a CSV cell exceed the csv module's default 128 KiB field limit
    want = min(sys.maxsize, 2**31 - 1, DEFAULT_LIMITS.max_archive_bytes * 2)
    if csv.field_size_limit() < want:
        csv.field_size_limit(want)


class _File:
    """One file of rows, read as a stream."""

    def __init__(self, path: Path, root: Path | None = None) -> None:
        self.path = path
        # inside a dataset folder the file is opened without following symlinks; a file the
        # user named directly is opened as named
        self.root = root
        self._rel = rel_to(root, path) if root is not None else ""
        self.fmt = ROW_SUFFIXES[path.suffix.lower()]
        self.note = ""
        self._json_rows: list[Any] | None = None
        self._pq: Any = None
        self._pq_fh: Any = None
        self._group_cache: tuple[int, Any] | None = None
        self._csv_cursor: tuple[int, Iterator[dict[str | None, Any]], Any] | None = None
        self.encoding = "utf-8"
        if self.fmt == "csv":
            self.encoding, self.note = _csv_encoding(self.open_bin())
            _raise_csv_limit()

    def open_bin(self) -> io.BufferedReader:
        """The file, opened for reading (see :mod:`._safefs` for a file inside a folder)."""
        if self.root is not None and self._rel:
            try:
                fd = open_inside(self.root, self._rel)
            except UnsafeFile as exc:
                raise AdapterError(f"{self.path.name}: {exc}") from None
            return os.fdopen(fd, "rb")
        return self.path.open("rb")

    def open_text(self) -> io.TextIOWrapper:
        return io.TextIOWrapper(
            self.open_bin(), encoding=self.encoding, errors="replace", newline=""
        )

    # -- whole-file access -------------------------------------------------------------
    def _parquet(self) -> Any:
        if self._pq is None:
            try:
                import pyarrow.parquet as pq
            except ImportError:
                raise AdapterError(
                    f"{self.path.name}: reading parquet needs pyarrow "
                    "(pip install 'repogym[explorer]')"
                ) from None
            try:
                self._pq_fh = self.open_bin()
                self._pq = pq.ParquetFile(self._pq_fh)
            except AdapterError:
                raise
            except Exception as exc:
                raise AdapterError(
                    f"{self.path.name}: not a readable parquet file ({exc})"
                ) from None
        return self._pq

    def _json(self) -> list[Any]:
        if self._json_rows is None:
            with self.open_bin() as fh:
                size = os.fstat(fh.fileno()).st_size
                if size > MAX_JSON_BYTES:
                    raise AdapterError(
                        f"{self.path.name}: {size} bytes is too big for a .json file "
                        f"(limit {MAX_JSON_BYTES}); use JSON Lines"
                    )
                raw = fh.read(MAX_JSON_BYTES + 1)
            try:
                data = json.loads(raw)
            except (ValueError, UnicodeDecodeError) as exc:
                raise AdapterError(f"{self.path.name}: invalid JSON ({exc})") from None
            if isinstance(data, dict):
                for key in ("data", "rows", "examples", "instances", "tasks"):
                    if isinstance(data.get(key), list):
                        data = data[key]
                        break
            if not isinstance(data, list):
                raise AdapterError(
                    f'{self.path.name}: expected a list of objects or {{"data": [...]}}'
                )
            self._json_rows = data
        return self._json_rows

    def iter_rows(self) -> Iterator[tuple[int, dict[str, Any] | _RowError]]:
        """(position, row or error) for every row: position as :class:`_Loc` expects."""
        if self.fmt == "jsonl":
            with self.open_bin() as fh:
                lineno = 0
                while True:
                    offset = fh.tell()
                    line = fh.readline()
                    if not line:
                        return
                    lineno += 1
                    if not line.strip():
                        continue
                    yield offset, self._parse_line(line, lineno)
        elif self.fmt == "json":
            for i, item in enumerate(self._json()):
                if isinstance(item, dict):
                    yield i, item
                else:
                    yield i, _RowError(f"item {i}: not a JSON object")
        elif self.fmt == "csv":
            with self.open_text() as fh:
                reader = csv.DictReader(fh)
                i = 0
                try:
                    for row in reader:
                        yield i, self._csv_row(row)
                        i += 1
                except csv.Error as exc:
                    yield i, _RowError(f"row {i + 1}: malformed CSV ({exc})")
        else:
            n = 0
            for batch in self._parquet().iter_batches(batch_size=256):
                for row in batch.to_pylist():
                    yield n, row
                    n += 1

    def iter_ids(self, id_col: str | None) -> Iterator[tuple[int, Any]]:
        """(position, id value or error) for every row; parquet reads the id column alone."""
        if self.fmt == "parquet":
            pf = self._parquet()
            n = 0
            cols = [id_col] if id_col and id_col in pf.schema_arrow.names else []
            for g in range(pf.num_row_groups):
                if cols:
                    values = pf.read_row_group(g, columns=cols).column(0).to_pylist()
                else:
                    values = [None] * pf.metadata.row_group(g).num_rows
                for v in values:
                    yield n, v
                    n += 1
            return
        for pos, row in self.iter_rows():
            yield pos, (row if isinstance(row, _RowError) else row.get(id_col) if id_col else None)

    def row_at(self, pos: int) -> dict[str, Any]:
        """The row at ``pos`` (from :meth:`iter_rows`); :class:`_RowError` when malformed."""
        if self.fmt == "jsonl":
            with self.open_bin() as fh:
                fh.seek(pos)
                row = self._parse_line(fh.readline(), None)
        elif self.fmt == "json":
            item = self._json()[pos]
            row = item if isinstance(item, dict) else _RowError(f"item {pos}: not a JSON object")
        elif self.fmt == "csv":
            row = self._csv_at(pos)
        else:
            row = self._parquet_at(pos)
        if isinstance(row, _RowError):
            raise row
        return row

    # -- helpers ------------------------------------------------------------------------
    def _parse_line(self, line: bytes, lineno: int | None) -> dict[str, Any] | _RowError:
        where = f"line {lineno}" if lineno else "row"
        try:
            value = json.loads(line)
        except (ValueError, UnicodeDecodeError) as exc:
            return _RowError(f"{where}: invalid JSON ({exc})")
        if not isinstance(value, dict):
            return _RowError(f"{where}: not a JSON object")
        return value

    @staticmethod
    def _csv_row(row: dict[str | None, Any]) -> dict[str, Any]:
        out = {k: v for k, v in row.items() if k is not None}
        if None in row:
            out["_extra"] = row[None]
        return out

    def _csv_at(self, pos: int) -> dict[str, Any] | _RowError:
        # tasks are usually read in order: keep a cursor instead of rescanning from the top
        if self._csv_cursor is None or self._csv_cursor[0] > pos:
            if self._csv_cursor is not None:
                self._csv_cursor[2].close()
            fh = self.open_text()
            self._csv_cursor = (0, iter(csv.DictReader(fh)), fh)
        i, it, fh = self._csv_cursor
        try:
            while True:
                row = next(it)
                if i == pos:
                    self._csv_cursor = (i + 1, it, fh)
                    return self._csv_row(row)
                i += 1
        except StopIteration:
            self._csv_cursor = None
            fh.close()
            return _RowError(f"row {pos + 1}: not found")
        except csv.Error as exc:
            self._csv_cursor = None
            fh.close()
            return _RowError(f"row {pos + 1}: malformed CSV ({exc})")

    def _parquet_at(self, pos: int) -> dict[str, Any]:
        pf = self._parquet()
        start = 0
        for g in range(pf.num_row_groups):
            n = pf.metadata.row_group(g).num_rows
            if pos < start + n:
                if self._group_cache is None or self._group_cache[0] != g:
                    self._group_cache = (g, pf.read_row_group(g))
                return self._group_cache[1].slice(pos - start, 1).to_pylist()[0]
            start += n
        return _RowError(f"row {pos}: not found")  # type: ignore[return-value]


def _sanitize_id(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return _SAFE_ID.sub("_", str(value)).strip("._-")[:120]


FINGERPRINT_MAX_FILES = 10_000


class RowsReader:
    """One row dataset (a file, or a folder of row files) as an environment."""

    def __init__(self, location: Path, limits: ArchiveLimits = DEFAULT_LIMITS) -> None:
        self.location = location
        self.root = location if location.is_dir() else location.parent
        self.limits = limits
        paths = _row_files(location)
        if not paths:
            raise AdapterError(f"{location}: no .parquet, .jsonl, .json or .csv file")
        inside = location if location.is_dir() else None
        self.files = [_File(p, inside) for p in paths]
        self.skipped: list[str] = []
        self._locs: dict[str, _Loc] | None = None
        self._fingerprint: str | None = None
        sample, errors = self._sample()
        if not sample:
            why = errors[0] if errors else "no rows"
            raise AdapterError(f"{location.name}: no readable row in its first lines ({why})")
        self.processor: Processor = pick_processor(sample)
        self.id_column = next((c for c in ID_COLUMNS if _sanitize_id(sample[0].get(c)) != ""), None)

    def _sample(self) -> tuple[list[dict[str, Any]], list[str]]:
        rows: list[dict[str, Any]] = []
        errors: list[str] = []
        for f in self.files:
            try:
                for _pos, row in f.iter_rows():
                    if isinstance(row, _RowError):
                        errors.append(f"{f.path.name}: {row}")
                    else:
                        rows.append(row)
                    if len(rows) + len(errors) >= SAMPLE_ROWS:
                        return rows, errors
            except AdapterError as exc:
                if len(self.files) == 1:
                    raise
                errors.append(str(exc))  # one bad file of a folder: sample the others
        return rows, errors

    @property
    def name(self) -> str:
        if self.location.is_dir():
            return self.location.name
        name = self.location.name
        return name[: -len(self.location.suffix)] if self.location.suffix else name

    # -- listing ------------------------------------------------------------------------
    def _index(self) -> dict[str, _Loc]:
        if self._locs is not None:
            return self._locs
        locs: dict[str, _Loc] = {}
        skipped: list[str] = []

        def skip(reason: str) -> None:
            if len(skipped) < 20:
                log.warning("skipped a row of %s: %s", self.name, reason)
            skipped.append(reason)

        row_no = 0
        for fi, f in enumerate(self.files):
            try:
                for pos, value in f.iter_ids(self.id_column):
                    if isinstance(value, _RowError):
                        skip(f"{f.path.name}: {value}")
                        continue
                    tid = _sanitize_id(value) if self.id_column else ""
                    if not tid:
                        tid = f"row-{row_no}"
                    if tid in locs:
                        tid = f"{tid}-row-{row_no}"
                    locs[tid] = _Loc(fi, pos)
                    row_no += 1
            except AdapterError as exc:  # one unreadable file of a folder: the rest is read
                skip(f"{f.path.name}: file skipped ({exc})")
            except Exception as exc:  # e.g. a corrupt parquet row group: rows before it stay
                first = (str(exc).splitlines() or [type(exc).__name__])[0]
                skip(f"{f.path.name}: rest of the file skipped ({type(exc).__name__}: {first})")
        self._locs = locs
        self.skipped = skipped
        return locs

    def task_ids(self) -> Iterator[str]:
        """Every task id, in file order (one streaming pass, cached)."""
        yield from self._index()

    def env(self) -> EnvDoc:
        """The dataset; its rows are listed first (the same pass :meth:`task_ids` uses), so the
        count and the skipped rows are known."""
        count = len(self._index())
        fmts = sorted({f.fmt for f in self.files})
        files = ", ".join(f.path.name for f in self.files[:5]) + (
            f" and {len(self.files) - 5} more" if len(self.files) > 5 else ""
        )
        summary = (
            f"{count} rows from {files} ({'/'.join(fmts)}), shown as {self.processor.name} tasks"
        )
        parts = []
        readme = None
        if self.location.is_dir():
            readme = read_text_inside(self.root, "README.md", 800_000)
        if readme:
            from repogym.explorer.withhold import mask_yamlish

            parts.append(mask_yamlish(readme[:200_000], []))
        notes = [f.note for f in self.files if f.note]
        if self.id_column:
            parts.append(f"Task ids come from the `{self.id_column}` column.")
        else:
            parts.append("Rows have no id column: task ids are row numbers (`row-<n>`).")
        if notes:
            parts.append("Encoding: " + "; ".join(sorted(set(notes))) + ".")
        if self.skipped:
            shown = "\n".join(f"- {s}" for s in self.skipped[:20])
            more = f"\n- … and {len(self.skipped) - 20} more" if len(self.skipped) > 20 else ""
            parts.append(f"**{len(self.skipped)} malformed row(s) skipped**\n\n{shown}{more}")
        return EnvDoc(
            id=self.name,
            kind="rows",
            title=self.name,
            summary=summary,
            description="\n\n".join(parts),
            source=str(self.location),
            runs_in="text only (rows of a dataset)",
            run_options=[
                {"label": "Explore with repogym", "command": f"repogym explore {self.location}"}
            ],
            facets={"format": "/".join(fmts), "processor": self.processor.name},
            task_count=count,
        )

    # -- fingerprint --------------------------------------------------------------------
    def fingerprint(self, task_id: str) -> str | None:
        """A cheap identity of a task: every file of the dataset folder (row files and the
        archives beside them: path, size, inode, modification and change times), the
        processor and the id column. None when the folder holds more than
        ``FINGERPRINT_MAX_FILES`` files (its tasks are then read on every index run)."""
        if task_id not in self._index():
            raise KeyError(task_id)
        if self._fingerprint is None:
            try:
                found = stat_fingerprint(self.root, limit=FINGERPRINT_MAX_FILES)
            except OSError:
                found = None
            self._fingerprint = found or ""
        if not self._fingerprint:
            return None
        return f"{self._fingerprint}:{self.processor.name}:{self.id_column}"

    # -- one task -----------------------------------------------------------------------
    def task(self, task_id: str) -> TaskDoc:
        loc = self._index().get(task_id)
        if loc is None:
            raise KeyError(task_id)
        f = self.files[loc.file]
        try:
            row = f.row_at(loc.pos)
        except _RowError as exc:
            raise AdapterError(f"{self.name}/{task_id}: {exc}") from None
        return self._to_task(row, task_id)

    def _to_task(self, row: Mapping[str, Any], task_id: str) -> TaskDoc:
        hidden = self.processor.withheld_columns(row)
        shown: dict[str, Any] = {}
        archives: dict[str, bytes | ArchiveRejected] = {}
        for col, value in row.items():
            if col in hidden:
                shown[col] = value  # the processor leaves it out and says so
                continue
            found = self._archive_of(value)
            if found is None:
                shown[col] = value
            else:
                archives[col] = found
        doc = self.processor.to_task(shown, task_id)
        single = len(archives) == 1
        for col, found in archives.items():
            self._add_archive(doc, col, found, prefix="" if single else f"{col}/")
        doc.facets.setdefault("format", self.files[0].fmt)
        return doc

    def _archive_of(self, value: Any) -> bytes | ArchiveRejected | None:
        if (
            isinstance(value, str)
            and value.lower().endswith(ARCHIVE_SUFFIXES)
            and len(value) < 4096
        ):
            return self._archive_beside(value)
        try:
            return archive_bytes(value, self.limits.max_archive_bytes)
        except ArchiveRejected as exc:
            return exc

    def _archive_beside(self, rel: str) -> bytes | ArchiveRejected:
        """An archive named by a path relative to the rows: inside the dataset folder only."""
        if rel.startswith("/") or "\\" in rel or "\x00" in rel or ".." in Path(rel).parts:
            return ArchiveRejected(f"archive path {rel!r} is outside the dataset folder")
        clean = "/".join(p for p in rel.split("/") if p not in ("", "."))
        try:
            data = read_inside(self.root, clean, self.limits.max_archive_bytes + 1)
        except UnsafeFile as exc:
            if str(exc) == LEAVING:
                return ArchiveRejected(
                    f"archive path {rel!r} is a symlink leading outside the dataset folder, "
                    "not followed"
                )
            return ArchiveRejected(f"archive {rel!r}: {exc}")
        except OSError:
            return ArchiveRejected(f"archive {rel!r} not found beside the rows")
        if len(data) > self.limits.max_archive_bytes:
            return ArchiveRejected(
                f"archive is over {self.limits.max_archive_bytes} bytes (the limit)"
            )
        return data

    def _add_archive(
        self, doc: TaskDoc, col: str, found: bytes | ArchiveRejected, prefix: str
    ) -> None:
        if isinstance(found, bytes):
            try:
                members = read_archive(found, self.limits)
            except ArchiveRejected as exc:
                found = exc
            else:
                taken = {f.path for f in doc.files}
                for path, data in sorted(members.items()):
                    full = prefix + path
                    if full in taken:
                        continue
                    if len(data) > MAX_FILE_BYTES:
                        doc.files.append(
                            FileDoc(full, len(data), None, f"too big to show ({len(data)} bytes)")
                        )
                    else:
                        doc.files.append(FileDoc(full, len(data), data))
                return
        reason = f"archive rejected: {found}"
        safe_col = _SAFE_ID.sub("_", col).strip("._-") or "archive"
        doc.files.append(FileDoc(f"{safe_col}.archive", 0, None, reason))
        doc.withheld.append(f"column {col!r}: {reason}")


class RowsAdapter:
    """Row datasets: a ``.parquet`` / ``.jsonl`` / ``.json`` / ``.csv`` file or a folder of them."""

    name = "rows"

    def detect(self, location: str) -> float:
        try:
            path = Path(location)
            if path.is_file():
                return 0.5 if path.suffix.lower() in ROW_SUFFIXES else 0.0
            if path.is_dir():
                if (path / "task.toml").is_file():
                    return 0.0
                return 0.4 if _looks_like_rows(path) else 0.0
        except (OSError, ValueError):
            return 0.0
        return 0.0

    def open(self, location: str) -> RowsReader:
        path = Path(location)
        if not path.exists():
            raise AdapterError(f"{location}: no such file or folder")
        try:
            return RowsReader(path)
        except OSError as exc:
            raise AdapterError(f"{location}: cannot read ({exc.strerror or exc})") from None
