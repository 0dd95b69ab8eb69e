"""The recipe: a Dockerfile plus the commands that run and list a repository's tests.

A :class:`Recipe` is plain data (JSON round-trips) with a content hash over everything that
decides what gets built and run, so the same repository state yields the same hash anywhere.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from dataclasses import asdict, dataclass, field
from typing import Any

WORKDIR = "/workspace"
RUNNERS = (
    *("pytest", "unittest", "jest", "vitest", "mocha", "node"),
    *("go", "cargo", "ctest", "maven"),
)
BOOTSTRAP_VERSION = "5"
"""Bumped whenever recipe generation changes in a way cached recipes should not survive."""

_HASHED = (
    "language",
    "runner",
    "base_image",
    "dockerfile",
    "test_command",
    "collect_command",
    "select_command",
    "workdir",
    "env",
    "commit_date",
)
COLLECT_MARK = "REPOGYM-COLLECT"
"""Prefix of the summary line a collect command may print: ``REPOGYM-COLLECT {"collected": N,
"errors": [{"nodeid": …, "message": …}], …}``; sample ids follow ``REPOGYM-COLLECT-ID ``."""


@dataclass(frozen=True)
class Recipe:
    """How to build a repository's environment and run its tests (see :func:`make_recipe`)."""

    language: str
    runner: str
    base_image: str
    dockerfile: str
    test_command: str
    """Runs the whole suite (a shell command, run from ``workdir``)."""
    collect_command: str
    """Lists the tests without running them; :meth:`count_collected` reads its output."""
    select_command: str
    """The command prefix that :meth:`test_command_for` appends selected test ids to."""
    workdir: str = WORKDIR
    env: dict[str, str] = field(default_factory=dict)
    commit_date: str = ""
    """The commit's date (UTC RFC 3339): dependency installs are capped at it, or at the date
    the chosen interpreter became usable when that is later (the Dockerfile's header says which);
    empty: unknown, installs not capped."""
    notes: list[str] = field(default_factory=list)
    hash: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.runner not in RUNNERS:
            raise ValueError(f"unknown runner {self.runner!r}")
        object.__setattr__(self, "hash", self.compute_hash())

    def compute_hash(self) -> str:
        """sha256 over the recipe's content (not its notes): stable across machines."""
        content = {k: getattr(self, k) for k in _HASHED}
        content["env"] = dict(sorted(self.env.items()))
        blob = json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()

    def test_command_for(self, ids: list[str]) -> str:
        """The command running exactly ``ids`` (the whole suite when ``ids`` is empty).

        Ids are in the form repogym's log parsers report them (see ``shipped/parsers/``).
        """
        if not ids:
            return self.test_command
        return select_tests(self.runner, self.select_command, ids)

    def count_collected(self, output: str) -> int:
        """How many tests the output of :attr:`collect_command` lists."""
        return count_collected(self.runner, output)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Recipe:
        """Rebuild a recipe; raises ValueError when the stored hash does not match the content."""
        fields = {k: v for k, v in data.items() if k != "hash"}
        recipe = cls(**fields)
        if data.get("hash") and data["hash"] != recipe.hash:
            raise ValueError("recipe hash does not match its content")
        return recipe


# ------------------------------------------------------------------------------ test selection


def _alternation(names: list[str], *, js: bool = False, start: str = "^") -> str:
    """A regex matching exactly one of ``names`` (JavaScript-safe escaping with ``js``)."""
    escape = (lambda n: re.sub(r"[\\^$.*+?()[\]{}|/]", r"\\\g<0>", n)) if js else re.escape
    return start + "(" + "|".join(escape(n) for n in dict.fromkeys(names)) + ")$"


def _split_js_id(test_id: str) -> tuple[str, str | None]:
    """``"file > describe > test"`` → ``("file", "describe test")``; a bare file → no name."""
    parts = test_id.split(" > ")
    return parts[0], (" ".join(parts[1:]) or None)


def select_tests(runner: str, prefix: str, ids: list[str]) -> str:
    """``prefix`` plus the arguments that make ``runner`` run only ``ids``."""
    q = shlex.quote
    if runner in ("pytest", "unittest"):
        return f"{prefix} {' '.join(q(i) for i in ids)}"
    if runner in ("jest", "vitest"):
        files, names, whole_files = [], [], False
        for test_id in ids:
            file, name = _split_js_id(test_id)
            files.append(file)
            if name is None:
                whole_files = True
            else:
                names.append(name)
        args = " ".join(q(f) for f in dict.fromkeys(files))
        if names and not whole_files:
            # vitest's full names may start with a space (an unnamed file-level suite).
            start = "(^|\\s)" if runner == "vitest" else "^"
            args += f" -t {q(_alternation(names, js=True, start=start))}"
        return f"{prefix} {args}"
    if runner in ("mocha", "node"):
        # mocha ids carry no file (spec reporter): "describe > test" is mocha's fullTitle.
        names = [" ".join(i.split(" > ")) for i in ids]
        flag = "--grep" if runner == "mocha" else "--test-name-pattern"
        return f"{prefix} {flag} {q(_alternation(names, js=True))}"
    if runner == "go":
        # "<import path>::TestX/sub" → TestX; subtests run with their parent.
        tops = [i.rsplit("::", 1)[-1].split("/", 1)[0] for i in ids]
        return f"{prefix} -run {q(_alternation(tops))} ./..."
    if runner == "cargo":
        # "<binary>:<source>.rs::mod::test" (qualified when ambiguous) → "mod::test".
        names = [re.sub(r"^[^\s:]+:[^\s:]*\.rs::", "", i) for i in ids]
        return f"{prefix} -- --exact {' '.join(q(n) for n in dict.fromkeys(names))}"
    if runner == "ctest":
        # CTest test names; CMake's regular expressions take a backslash before any character.
        names = [re.sub(r"[\\^$.*+?()[\]{}|]", r"\\\g<0>", n) for n in dict.fromkeys(ids)]
        return f"{prefix} -R {q('^(' + '|'.join(names) + ')$')}"
    if runner == "maven":
        return f"{prefix} {_maven_selection(ids)}".rstrip()
    raise ValueError(f"unknown runner {runner!r}")


_JAVA_CLASS = re.compile(r"^([A-Za-z_$][\w$]*\.)*[A-Z_$][\w$]*$")
"""A class name as Surefire reports it: a package (optional) and a capitalised simple name
(module ids, artifactIds such as ``core``, are never selected as classes)."""


def _maven_selection(ids: list[str]) -> str:
    """Surefire's ``-Dtest=Class#m1+m2,Other`` for ``Class#method`` ids (a parameterised
    ``m(int)[1]``, Surefire 2's ``m{int}[1]``, runs as ``m``: all its invocations); ids that
    name no class (a module that failed to build) add nothing."""
    methods: dict[str, list[str]] = {}
    whole: set[str] = set()
    for test_id in ids:
        cls, _, method = test_id.partition("#")
        if not _JAVA_CLASS.match(cls):
            continue
        if not method:
            whole.add(cls)
            continue
        name = re.split(r"[({\[]", method, maxsplit=1)[0]
        methods.setdefault(cls, [])
        if name and name not in methods[cls]:
            methods[cls].append(name)
    parts = [
        c if c in whole or not methods.get(c) else f"{c}#{'+'.join(methods[c])}"
        for c in dict.fromkeys([*methods, *sorted(whole)])
    ]
    if not parts:
        return ""
    return (
        f"{shlex.quote('-Dtest=' + ','.join(parts))} -Dsurefire.failIfNoSpecifiedTests=false"
        " -DfailIfNoTests=false"
    )


# ------------------------------------------------------------------------------ collect output

_SUMMARY_COUNT = re.compile(r"^(\d+) tests? collected\b", re.M)
_MOCHA_PASSING = re.compile(r"^\s*(\d+) passing\b", re.M)
_TAP_TESTS = re.compile(r"^# tests (\d+)\s*$", re.M)
_JSON_TOTAL = re.compile(r'"numTotalTests"\s*:\s*(\d+)')
_CTEST_TOTAL = re.compile(r"^Total Tests: (\d+)\s*$", re.M)


def collect_summary(output: str) -> dict[str, Any] | None:
    """The last ``REPOGYM-COLLECT {json}`` line of a collect command's output (None: none)."""
    for line in reversed(output.splitlines()):
        if line.startswith(COLLECT_MARK + " "):
            try:
                data = json.loads(line[len(COLLECT_MARK) + 1 :])
            except ValueError:
                return None
            return data if isinstance(data, dict) else None
    return None


def count_collected(runner: str, output: str) -> int:
    """Count the tests listed by a recipe's collect command (per-runner output formats).

    A ``REPOGYM-COLLECT`` summary line (see :data:`COLLECT_MARK`) wins over the listing.
    """
    summary = collect_summary(output)
    if summary is not None and isinstance(summary.get("collected"), int):
        return int(summary["collected"])
    lines = output.splitlines()
    if runner == "pytest":
        return sum(1 for ln in lines if "::" in ln and not ln.startswith(("ERROR", "  ")))
    if runner == "unittest":
        found = _SUMMARY_COUNT.findall(output)
        return int(found[-1]) if found else 0
    if runner in ("jest", "vitest"):
        found = _JSON_TOTAL.findall(output)
        return int(found[-1]) if found else 0
    if runner == "mocha":
        found = _MOCHA_PASSING.findall(output)
        return sum(int(x) for x in found)
    if runner == "node":
        found = _TAP_TESTS.findall(output)
        return int(found[-1]) if found else 0
    if runner == "go":
        return sum(1 for ln in lines if re.match(r"^(Test|Example|Fuzz)\w*\s*$", ln))
    if runner == "cargo":
        return sum(1 for ln in lines if ln.endswith(": test"))
    if runner == "ctest":
        found = _CTEST_TOTAL.findall(output)
        return int(found[-1]) if found else 0
    if runner == "maven":
        return sum(1 for ln in lines if ln.startswith(COLLECT_MARK + "-ID "))
    raise ValueError(f"unknown runner {runner!r}")


# ------------------------------------------------------------------------------ Dockerfile text

_SAFE_WORD = re.compile(r"^[A-Za-z0-9_@%+=:,./-]+$")


class DockerfileWriter:
    """Builds Dockerfile text that both Docker and the local sandbox accept."""

    def __init__(self, header: str) -> None:
        self.lines: list[str] = [f"# {line}".rstrip() for line in header.splitlines()]

    def blank(self) -> None:
        self.lines.append("")

    def comment(self, text: str) -> None:
        self.lines += [f"# {line}".rstrip() for line in text.splitlines()]

    def from_(self, image: str) -> None:
        self.lines.append(f"FROM {image}")

    def workdir(self, path: str) -> None:
        self.lines.append(f"WORKDIR {path}")

    def env(self, values: dict[str, str]) -> None:
        if not values:
            return
        items = [f"{k}={v if _SAFE_WORD.match(v) else json.dumps(v)}" for k, v in values.items()]
        self._wrapped("ENV", items)

    def copy(self, sources: list[str], dest: str) -> None:
        """``COPY src... dest`` (JSON form when a path needs quoting)."""
        words = [*sources, dest]
        if all(_SAFE_WORD.match(w) for w in words):
            self.lines.append("COPY " + " ".join(words))
        else:
            self.lines.append("COPY " + json.dumps(words))

    def run(self, words: list[str]) -> None:
        """``RUN`` of already shell-quoted words, wrapped with continuations."""
        self._wrapped("RUN", words)

    def _wrapped(self, keyword: str, words: list[str], width: int = 96) -> None:
        line, out = keyword, []
        for word in words:
            if len(line) + 1 + len(word) > width and line.strip() not in (keyword, ""):
                out.append(line + " \\")
                line = "    " + word
            else:
                line = f"{line} {word}"
        out.append(line)
        self.lines += out

    def render(self) -> str:
        return "\n".join(self.lines).rstrip() + "\n"


def shell_words(args: list[str]) -> list[str]:
    return [shlex.quote(a) for a in args]
