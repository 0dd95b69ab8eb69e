#!/usr/bin/env python3
# ruff: noqa: UP006, UP007, UP035, UP045
"""``cargo test`` logs (libtest): test binaries, doctests, ids qualified where names repeat.

Part of the log parsers (see ``parsers/__init__.py``, shipped into tasks as ``parsers.py``):
standard library only, Python 3.6+ syntax, copied beside it into each generated task's ``tests/``.
"""

import re

# Some typing names appear only in type comments, which ruff does not read (hence F401).
from typing import List, Optional, Tuple  # noqa: F401

TYPE_CHECKING = False
if TYPE_CHECKING or __package__:  # in the repogym package
    from repogym.shipped.parsers._log_common import FAILED, PASSED, SKIPPED, TRUNCATED, Out, qualify
else:  # a task's copy: beside parsers.py, which put its folder on sys.path
    from _log_common import FAILED, PASSED, SKIPPED, TRUNCATED, Out, qualify


_CARGO_RUNNING = re.compile(
    r"^\s*Running (?:(?:unittests|tests|benches|examples) )?(?:(?P<src>[^(\s][^(]*?) )?"
    r"\((?P<bin>[^)]+)\)\s*$"
)
_CARGO_RUNNING_OLD = re.compile(r"^\s*Running (?P<bin>\S+)\s*$")
_CARGO_DOC = re.compile(r"^\s*Doc-tests (\S+)\s*$")
_CARGO_TEST = re.compile(r"^test (?P<name>.+?) \.\.\.(?: (?P<rest>.*))?$")
_CARGO_RESULT = re.compile(r"^test result: (?:ok|FAILED)\.")
_CARGO_COUNT = re.compile(r"^running (\d+) tests?$")
_CARGO_HASH = re.compile(r"-[0-9a-f]{16}$")
_CARGO_IGNORED = re.compile(r"ignored(?:, .*)?$")


def _cargo_binary(path: str) -> str:
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    if name.endswith(".exe"):
        name = name[:-4]
    return _CARGO_HASH.sub("", name)


def _cargo_status(s: str, exact: bool) -> Optional[str]:
    if exact:
        if s == "ok" or s.startswith("bench:"):
            return PASSED
        if s == "FAILED":
            return FAILED
        if s == "ignored" or s.startswith("ignored, "):
            return SKIPPED
        return None
    if s.endswith("ok"):
        return PASSED
    if s.endswith("FAILED"):
        return FAILED
    if "ignored" in s and _CARGO_IGNORED.search(s):
        return SKIPPED
    return None


def parse_cargo(text: str, lines: List[str]) -> Out:
    out = Out()
    entries = []  # type: List[Tuple[Optional[str], str, str]]
    qual = None  # type: Optional[str]
    pending = None  # type: Optional[str]
    candidate = None  # type: Optional[str]
    block_open = False

    def commit(crashed: bool = False) -> None:
        if pending is not None:
            if candidate is not None:
                entries.append((qual, pending, candidate))
            elif crashed:
                entries.append((qual, pending, FAILED))

    for line in lines:
        if not line:
            continue
        c = line[0]
        if c == "t":
            m = _CARGO_TEST.match(line)
            if m:
                commit()
                pending = candidate = None
                out.recognised = True
                name = m.group("name")
                if name.endswith(" - should panic"):
                    name = name[: -len(" - should panic")]
                rest = m.group("rest") or ""
                status = _cargo_status(rest, exact=True)
                if status is not None:
                    entries.append((qual, name, status))
                else:
                    pending, candidate = name, _cargo_status(rest, exact=False)
                continue
            if _CARGO_RESULT.match(line):
                commit()
                pending = candidate = None
                block_open = False
                out.recognised = True
                continue
        if c == "r":
            m = _CARGO_COUNT.match(line)
            if m:
                commit(crashed=True)
                pending = candidate = None
                out.recognised = True
                block_open = m.group(1) != "0"
                continue
        if c == " " or c == "e" or c == "f":
            stripped = line.strip()
            if stripped.startswith("Running "):
                m = _CARGO_RUNNING.match(line)
                m_old = None if m else _CARGO_RUNNING_OLD.match(line)
                if m or m_old:
                    commit(crashed=True)
                    pending = candidate = None
                    if m:
                        binary, src = _cargo_binary(m.group("bin")), m.group("src")
                        qual = binary + ":" + src if src else binary
                    elif m_old:
                        qual = _cargo_binary(m_old.group("bin"))
                    continue
            elif stripped.startswith("Doc-tests "):
                m = _CARGO_DOC.match(line)
                if m:
                    commit(crashed=True)
                    pending = candidate = None
                    qual = m.group(1) + ":doctests"
                    continue
            elif stripped == "failures:":
                commit()
                pending = candidate = None
                continue
            elif stripped.startswith("error: test failed") or "didn't exit successfully" in line:
                commit(crashed=True)
                pending = candidate = None
                block_open = False
                continue
            elif stripped.startswith("error") and "could not compile" in stripped:
                out.recognised = True
                out.warn("cargo: compilation failed")
                continue
        if pending is not None:
            status = _cargo_status(line, exact=False)
            if status is not None:
                candidate = status
    if block_open:
        out.warn(TRUNCATED)
    out.tests = qualify(entries, "::")
    return out
