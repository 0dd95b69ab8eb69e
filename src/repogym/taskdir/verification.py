"""How a task wants to be verified: ``[metadata.repo2env.verification]`` in ``task.toml``.

```toml
[metadata.repo2env.verification]
mode = "clean_room"          # or "in_place" (the default: what Harbor itself does)
protected = ["**/conftest.py", "tests/**", ...]   # paths whose agent edits never count
```

* ``in_place``: the verifier runs in the sandbox the agent just used. Foreign Harbor tasks get
  this: their verifiers may check container state (a service started, a file under ``/etc``).
* ``clean_room``: the agent's change to the files under the working directory is carried onto a
  fresh copy-on-write root of the built environment, minus every ``protected`` path, and the
  verifier runs there with no network. Nothing else the agent did survives (see
  docs/reward-contract.md).

``protected`` holds glob patterns over paths relative to the working directory: ``*`` and ``?``
stay within one path component, ``**`` spans any number of them (``**/x`` also matches ``x``),
``[abc]`` is a character class and ``{a,b}`` alternatives. A pattern matches a path or any
folder above it, so ``tests`` protects everything below ``tests/``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from repogym.shipped.testfiles import TEST_PATH_GLOBS

VerificationMode = Literal["clean_room", "in_place"]
MODES = ("clean_room", "in_place")


@dataclass(frozen=True)
class Verification:
    mode: VerificationMode = "in_place"
    protected: tuple[str, ...] = ()


def parse_verification(block: object) -> Verification:
    """The ``[metadata.repo2env.verification]`` table, checked (read it from a task with
    :meth:`repogym.taskdir.provenance.Provenance.read_verification`).

    Raises ValueError for a table that is not one, an unknown mode or a malformed pattern list.
    """
    if not isinstance(block, dict):
        raise ValueError("[metadata.repo2env.verification] must be a table")
    mode = block.get("mode", "in_place")
    if mode not in MODES:
        raise ValueError(
            f"[metadata.repo2env.verification] mode {mode!r} is not one of {', '.join(MODES)}"
        )
    protected = block.get("protected", [])
    if not isinstance(protected, list) or not all(isinstance(p, str) and p for p in protected):
        raise ValueError("[metadata.repo2env.verification] protected must be a list of patterns")
    for pattern in protected:
        compile_glob(pattern)
    return Verification(mode, tuple(protected))


def _expand_braces(pattern: str) -> list[str]:
    m = re.search(r"\{([^{}]*)\}", pattern)
    if m is None:
        return [pattern]
    out: list[str] = []
    for alt in m.group(1).split(","):
        out += _expand_braces(pattern[: m.start()] + alt + pattern[m.end() :])
    return out


def _translate(pattern: str) -> str:
    i, out = 0, []
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end == -1:
                raise ValueError(f"unclosed [ in pattern {pattern!r}")
            body = pattern[i + 1 : end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append(f"[{body}]")
            i = end + 1
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


@functools.lru_cache(maxsize=512)
def compile_glob(pattern: str) -> re.Pattern[str]:
    """A regex matching ``pattern`` against a path or any of its parent folders."""
    if pattern.startswith("/") or not pattern.strip():
        raise ValueError(f"protected pattern {pattern!r} must be relative and non-empty")
    alts = [_translate(p.rstrip("/")) for p in _expand_braces(pattern)]
    return re.compile("^(?:" + "|".join(alts) + ")(?:/.*)?$")


class Matcher:
    """Matches relative paths against a set of protected patterns (first match reported)."""

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = list(dict.fromkeys(patterns))
        self._compiled = [(p, compile_glob(p)) for p in self.patterns]

    def match(self, path: str) -> str | None:
        """The first pattern protecting ``path`` (or a folder above it), or None."""
        for pattern, rx in self._compiled:
            if rx.match(path):
                return pattern
        return None


#: What our runtime tasks protect (relative to the working directory). Test infrastructure:
#: test files and their data, by the same rule the pipelines split patches with
#: (:data:`repogym.shipped.testfiles.TEST_PATH_GLOBS`); runner configuration; interpreter start-up
#: hooks; installed metadata, dependencies, caches and VCS data; modules that would shadow the
#: test runner at the top of the tree.
TEST_PATHS = TEST_PATH_GLOBS
RUNNER_CONFIG = (
    "**/pytest.ini",
    "**/.pytest.ini",
    "**/tox.ini",
    "**/noxfile.py",
    "**/setup.cfg",
    "**/pyproject.toml",
    "**/package.json",
    "**/{jest,vitest,vite,vitest.workspace,babel,karma}.config.*",
    "**/{jest,vitest,test}.setup.*",
    "**/{jest,test}-setup.*",
    "**/setupTests.*",
    "**/.mocharc*",
    "**/.babelrc*",
    "**/.cargo",
)
BUILD_DEFINITIONS = (
    "**/{Cargo.toml,Cargo.lock,build.rs,rust-toolchain,rust-toolchain.toml}",
    "**/{go.mod,go.sum,go.work,go.work.sum}",
    "**/{pom.xml,.mvn,junit-platform.properties}",
    "**/META-INF/services",
    "**/{build.gradle,build.gradle.kts,settings.gradle,settings.gradle.kts}",
    "**/{CMakeLists.txt,CMakePresets.json,*.cmake}",
    "**/{meson.build,meson_options.txt}",
)
"""Compiled languages' build definitions: what runs when the tests are built and run (see
:mod:`repogym.shipped.infra`, which holds them to the same rule in the task)."""
START_UP_HOOKS = (
    "**/sitecustomize.py",
    "**/usercustomize.py",
    "**/*.pth",
    "**/*.egg-info",
    "**/*.dist-info",
    "**/*.egg-link",
    "{pytest,_pytest,pluggy,py,unittest,site}.py",
    "{pytest,_pytest,pluggy,py,unittest}",
    "src/{pytest,_pytest,pluggy,py,unittest,site}.py",
    "src/{pytest,_pytest,pluggy,py,unittest}",
)
ARTEFACTS = (
    "**/__pycache__",
    "**/*.py[co]",
    "**/.pytest_cache",
    "**/node_modules",
    "**/site-packages",
    "**/.venv",
    "**/.git",
    "**/.tox",
    "**/.nox",
    "target/{debug,release,CACHEDIR.TAG,.rustc_info.json}",
    "**/target/{classes,test-classes,generated-sources,generated-test-sources}",
    "**/target/{maven-status,maven-archiver,surefire-reports,surefire}",
)
RUNTIME_PROTECTED = TEST_PATHS + RUNNER_CONFIG + BUILD_DEFINITIONS + START_UP_HOOKS + ARTEFACTS
