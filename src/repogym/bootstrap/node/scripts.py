"""What ``npm test`` really runs: the script chain, its ``pre`` hooks, wrappers and launchers.

* **Pre-test hooks.** ``npm test`` runs ``pretest`` first (and ``npm run X`` runs ``preX``), so a
  repository whose tests read build output (``"pretest": "npm run build"``, tests under
  ``dist/``) only works when that build runs. :func:`pretest_replay` gives the command that
  replays the hooks of the test script's chain, minus linters, formatters and type checks
  (``eslint``, ``prettier --check``, ``tsc --noEmit`` …), which decide nothing about the tests.
* **Wrappers.** ``"test": "ts-scripts test"`` calls a tool that runs a test runner itself.
  :func:`wrapped_runner` finds that runner: the package that provides the command depends on it
  (``package-lock.json`` records each package's ``bin`` and dependencies, peers included), a
  runner's configuration file or one of its plug-ins is present, or the wrapper is a known one.
* **Launchers.** ``node --throw-deprecation node_modules/.bin/jest test/`` launches jest through
  ``node``; :func:`split_invocation` keeps that launcher, and ``BABEL_ENV=x`` assignments before
  the command, so the recipe runs the tests the way the script does.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from repogym.bootstrap._files import read_text

RUNNER_BINS = {"jest": "jest", "vitest": "vitest", "mocha": "mocha", "_mocha": "mocha"}
"""Executable names of the supported runners (``_mocha`` is mocha's non-forking entry)."""
KNOWN_WRAPPERS = {
    "ts-scripts": "vitest",  # @borderless/ts-scripts (vitest since 0.9)
    "kcd-scripts": "jest",
    "tsdx": "jest",
    "dts": "jest",  # dts-cli
    "razzle": "jest",
    "react-app-rewired": "jest",
    "backstage-cli": "jest",
}
"""Test wrappers by command, with the runner they run."""
_CONFIGS = (
    ("vitest", re.compile(r"^vite(st)?\.(config|workspace)\.[cm]?[jt]s$")),
    ("jest", re.compile(r"^jest\.config\.([cm]?[jt]s|json)$")),
    ("mocha", re.compile(r"^\.mocharc(\.[cm]?js|\.json|\.jsonc|\.ya?ml)?$")),
)
_PLUGINS = (
    ("vitest", re.compile(r"^@vitest/")),
    ("jest", re.compile(r"^(@jest/|ts-jest$|babel-jest$|jest-environment-|@types/jest$)")),
    ("mocha", re.compile(r"^(@types/mocha$|mocha-)")),
)
_ENV_WORD = re.compile(r"^[A-Za-z_]\w*=")
_RUN = re.compile(r"^(?:npm\s+run(?:-script)?|pnpm(?:\s+run)?|yarn(?:\s+run)?)\s+([\w:.-]+)(.*)$")
_CHECK_ONLY = re.compile(
    r"^(eslint|tslint|xo|standard|semistandard|prettier|biome|stylelint|markdownlint\S*"
    r"|dprint|oxlint|tsd|attw|publint|commitlint|lint-staged|husky|size-limit|depcheck)\b"
    r"|^(vue-)?tsc\b.*--noEmit\b"
)
_CHECK_SCRIPT = re.compile(
    r"^(lint|format|fmt|prettier|eslint|typecheck|type-check|types|check-types|tsc"
    r"|style|size|audit)(:.*)?$"
)
_NODE_VALUE_FLAGS = ("-r", "--require", "--import", "--loader", "--experimental-loader", "-C")


# ------------------------------------------------------------------------------ script chains


def script_chain(scripts: dict[str, Any], name: str = "test", depth: int = 3) -> list[str]:
    """The scripts ``npm run <name>`` goes through when each is only ``npm run X``
    (``"test": "npm run test:unit"`` → ``["test", "test:unit"]``)."""
    chain = [name]
    script = scripts.get(name)
    while isinstance(script, str) and depth > 0:
        m = _RUN.match(script.strip())
        if not m or m[1] in chain or not isinstance(scripts.get(m[1]), str):
            break
        rest = m[2].strip()
        if rest and not rest.startswith("--"):
            break
        chain.append(m[1])
        script = scripts[m[1]]
        depth -= 1
    return chain


def _segments(script: str) -> list[str]:
    """``a && b && c`` → its commands (not split when ``||``, ``;`` or ``|`` appear)."""
    if re.search(r"[;|]", script):
        return [script.strip()]
    return [s.strip() for s in script.split("&&") if s.strip()]


def _check_only(segment: str, scripts: dict[str, Any], depth: int = 3) -> bool:
    """Whether ``segment`` only lints, formats or type-checks (through ``npm run X`` too)."""
    words = segment.split()
    while words and (_ENV_WORD.match(words[0]) or words[0] in ("npx", "cross-env", "env")):
        words = words[1:]
    text = " ".join(words)
    m = _RUN.match(text)
    if m:
        name = m[1]
        body = scripts.get(name)
        if _CHECK_SCRIPT.match(name):
            return True
        if isinstance(body, str) and depth > 0:
            return all(_check_only(s, scripts, depth - 1) for s in _segments(body))
        return False
    return bool(_CHECK_ONLY.search(text))


@dataclass
class PretestReplay:
    """The ``pre`` hooks of the test script's chain, as the recipe replays them."""

    command: str = ""
    """A shell command (empty: nothing to replay)."""
    sources: list[str] = field(default_factory=list)
    """``scripts.pretest ("npm run build")`` for each hook replayed."""
    dropped: list[str] = field(default_factory=list)
    """Commands of the hooks left out (linters and the like)."""


def pretest_replay(scripts: dict[str, Any], name: str = "test", *, env: str = "") -> PretestReplay:
    """What ``npm run <name>`` runs before the test command itself (see the module doc);
    ``env`` (``NAME=value ``) goes before each npm command."""
    replay = PretestReplay()
    parts: list[str] = []
    for step in script_chain(scripts, name):
        hook = f"pre{step}"
        body = scripts.get(hook)
        if not isinstance(body, str) or not body.strip():
            continue
        segments = _segments(body)
        kept = [s for s in segments if not _check_only(s, scripts)]
        replay.dropped += [s for s in segments if s not in kept]
        if not kept:
            continue
        replay.sources.append(f"scripts.{hook} ({body.strip()!r})")
        if len(kept) == len(segments):
            parts.append(f"{env}npm run --silent {shlex.quote(hook)}")
        else:
            parts.append(f"{env}npm exec --no -c {shlex.quote(' && '.join(kept))}")
    replay.command = " && ".join(parts)
    return replay


# ------------------------------------------------------------------------------ invocations


@dataclass
class Invocation:
    """The runner command of a simple test script, split into its parts."""

    runner: str | None = None
    env: list[str] = field(default_factory=list)
    """``NAME=value`` assignments before the command."""
    launcher: str | None = None
    """How the script starts the runner when not by its name (``node --flag path/to/jest``)."""
    args: list[str] = field(default_factory=list)
    """The words after the runner."""


def _runner_of_path(word: str) -> str | None:
    """The runner a path to its executable names (``node_modules/.bin/jest``,
    ``node_modules/mocha/bin/_mocha``, ``./node_modules/vitest/vitest.mjs``)."""
    path = PurePosixPath(word)
    stem = path.name
    for ext in (".js", ".mjs", ".cjs"):
        stem = stem.removesuffix(ext)
    if stem in RUNNER_BINS:
        return RUNNER_BINS[stem]
    parts = path.parts
    if "node_modules" in parts:
        i = len(parts) - 1 - parts[::-1].index("node_modules")
        package = parts[i + 1] if i + 1 < len(parts) else ""
        if package in RUNNER_BINS and stem in ("cli", "index", "bin", package):
            return RUNNER_BINS[package]
    return None


def split_invocation(words: list[str]) -> Invocation:
    """Split a simple command (``shlex`` words) into env, launcher, runner and arguments."""
    inv = Invocation()
    words = list(words)
    while words:
        if _ENV_WORD.match(words[0]):
            inv.env.append(words.pop(0))
        elif words[0] in ("cross-env", "env", "npx") or words[0].startswith("--no-install"):
            words.pop(0)
        else:
            break
    if not words:
        return inv
    first = words[0]
    runner = RUNNER_BINS.get(first) or (_runner_of_path(first) if "/" in first else None)
    if runner:
        inv.runner = runner
        if first not in RUNNER_BINS:
            inv.launcher = shlex.quote(first)
        inv.args = words[1:]
        return inv
    if first != "node":
        return inv
    i, n = 1, len(words)
    while i < n and words[i].startswith("-"):
        if words[i] == "--test":
            inv.runner = "node"
            inv.args = words[1:]
            return inv
        i += 2 if words[i] in _NODE_VALUE_FLAGS else 1
    if i < n and (runner := _runner_of_path(words[i])):
        inv.runner = runner
        inv.launcher = " ".join(shlex.quote(w) for w in words[: i + 1])
        inv.args = words[i + 1 :]
    elif any(w == "--test" for w in words):
        inv.runner = "node"
        inv.args = words[1:]
    return inv


# ------------------------------------------------------------------------------ wrappers


def _lock_packages(repo: Path) -> dict[str, Any]:
    for name in ("package-lock.json", "npm-shrinkwrap.json"):
        text = read_text(repo / name, 50_000_000)
        if not text:
            continue
        try:
            data = json.loads(text)
        except ValueError:
            continue
        packages = data.get("packages") if isinstance(data, dict) else None
        if isinstance(packages, dict):
            return packages
    return {}


def locked_version(repo: Path, name: str) -> str | None:
    """The version of ``name`` that ``package-lock.json`` installs at the top level."""
    entry = _lock_packages(repo).get(f"node_modules/{name}")
    version = entry.get("version") if isinstance(entry, dict) else None
    return version if isinstance(version, str) else None


def _commands(script: str) -> list[str]:
    """The first word of each command of ``script`` (after env assignments and ``npx``)."""
    out = []
    for part in re.split(r"&&|\|\||;|\|", script):
        words = part.split()
        while words and (_ENV_WORD.match(words[0]) or words[0] in ("npx", "cross-env", "env")):
            words = words[1:]
        if words:
            out.append(words[0])
    return out


def wrapped_runner(repo: Path, pkg: dict[str, Any], script: str) -> tuple[str, str] | None:
    """``(runner, why)`` for a test script that calls a wrapper of a runner, else None."""
    deps: dict[str, Any] = {}
    for key in ("devDependencies", "dependencies"):
        if isinstance(pkg.get(key), dict):
            deps.update(pkg[key])
    commands = [c for c in _commands(script) if c not in ("npm", "pnpm", "yarn", "node")]
    if not commands:
        return None
    packages = _lock_packages(repo)
    wrappers = []
    for command in commands:
        for key, entry in packages.items():
            bins = entry.get("bin") if isinstance(entry, dict) else None
            if not key.startswith("node_modules/") or not isinstance(bins, dict):
                continue
            if command not in bins or "/node_modules/" in key[len("node_modules/") :]:
                continue
            name = key[len("node_modules/") :]
            wrappers.append((command, name))
            needs: dict[str, Any] = {}
            for field_name in ("peerDependencies", "dependencies", "optionalDependencies"):
                if isinstance(entry.get(field_name), dict):
                    needs.update(entry[field_name])
            for runner in ("vitest", "jest", "mocha"):
                if runner in needs:
                    return runner, f"`{command}` ({name}) runs {runner}: package-lock.json"
    if not wrappers:
        for command in commands:
            named = [d for d in sorted(deps) if d == command or d.endswith("/" + command)]
            if named or command in KNOWN_WRAPPERS:
                wrappers.append((command, named[0] if named else command))
    if not wrappers:
        return None
    shown = ", ".join(dict.fromkeys(f"`{c}`" for c, _ in wrappers))
    try:
        top = sorted(p.name for p in repo.iterdir() if p.is_file())
    except OSError:
        top = []
    for runner, pattern in _CONFIGS:
        found = next((name for name in top if pattern.match(name)), None)
        if found:
            return runner, f"the test script calls {shown}; {found} configures {runner}"
        if runner == "jest" and isinstance(pkg.get("jest"), dict):
            return runner, f"the test script calls {shown}; package.json configures jest"
    for runner, pattern in _PLUGINS:
        found = next((d for d in sorted(deps) if pattern.match(d)), None)
        if found:
            return runner, f"the test script calls {shown}; {found} is a {runner} plug-in"
    for command, _name in wrappers:
        wrapped = KNOWN_WRAPPERS.get(command)
        if wrapped:
            return wrapped, f"`{command}` is a known wrapper of {wrapped}"
    return None
