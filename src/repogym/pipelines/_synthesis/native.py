"""What ``bug_synth`` needs for compiled languages (Go, Rust, Java with Maven, C/C++ with CTest)
beside the shared harness (:mod:`.harness`): the compile check of an edit, the suite's line
coverage where the toolchain has it (Go), the Rust source files whose inline tests the verifier
splices back, and which files are library code a suite tests."""

from __future__ import annotations

import re
from pathlib import Path

from repogym.bootstrap import Recipe
from repogym.bootstrap.native.compile import COVER_PROFILE, coverage_command, covered_lines
from repogym.sandbox import BuiltEnvironment, EnvironmentSpec, Sandbox, SandboxError, Session
from repogym.shipped import rust_tests
from repogym.shipped.testfiles import is_test_path

NATIVE_RUNNERS = ("go", "cargo", "maven", "ctest")
"""Runners of the compiled languages ``bug_synth`` takes (with a compile check per edit)."""
ERROR_LINE = re.compile(r"\berror\b", re.IGNORECASE)
LOCATED_LINE = re.compile(r"[\w/.-]+\.\w+:\[?\d+[:,]\d+\]?:? ")
"""A compiler's message about a place (``money.go:11:23: …``, ``Money.java:[10,25] …``,
``src/a.cpp:12:5: error: …``): the line of a failed compile check worth showing."""


def compile_error(session: Session, recipe: Recipe, command: str, timeout_s: float) -> str | None:
    """Run the compile check in ``session``: None when the code compiles, else the first line
    of the compiler's complaint. New files are left writable by everyone (``umask 0``): the
    tests later run as another user and rebuild in the same build folders."""
    res = session.exec(
        f"umask 0000; {command}",
        cwd=recipe.workdir,
        env=dict(recipe.env),
        network=False,
        timeout_s=timeout_s,
    )
    if res.timed_out:
        return "the compile check timed out"
    if res.exit_code == 0:
        return None
    lines = [ln.strip() for ln in (res.stdout + "\n" + res.stderr).splitlines() if ln.strip()]
    located = [ln for ln in lines if LOCATED_LINE.search(ln)]
    marked = [ln for ln in lines if ERROR_LINE.search(ln)]
    return ((located or marked or lines or [f"exit status {res.exit_code}"])[0])[:300]


def line_coverage(
    backend: Sandbox,
    built: BuiltEnvironment,
    spec: EnvironmentSpec,
    recipe: Recipe,
    snapshot: Path,
    timeout_s: float,
) -> dict[str, set[int]] | None:
    """The lines one run of the suite executes, where the toolchain measures it (Go), else
    None (every edit is tried)."""
    command = coverage_command(recipe)
    module = go_module(snapshot)
    if command is None or module is None:
        return None
    with backend.start(built, spec) as session:
        session.exec(
            command, cwd=recipe.workdir, env=dict(recipe.env), network=False, timeout_s=timeout_s
        )
        try:
            profile = session.read(COVER_PROFILE).decode("utf-8", "replace")
        except (OSError, SandboxError):
            return None
    return covered_lines(profile, module) or None


def go_module(root: Path) -> str | None:
    """The module path of ``root/go.mod`` (None without one)."""
    try:
        text = (root / "go.mod").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    m = re.search(r"(?m)^\s*module\s+\"?([^\s\"]+)", text)
    return m.group(1) if m else None


def inline_tests(root: Path, files: list[str]) -> dict[str, str]:
    """Rust source files of ``root`` (``files``: the revision's paths) with top-level test
    items, each with those items: the verifier splices them back into whatever file the agent
    leaves, so no unit test inside a source file can be weakened. A file the scanner cannot
    read is left out (its tests are then the agent's to change, and the canaries' to catch)."""
    out: dict[str, str] = {}
    for rel in files:
        if not rel.endswith(".rs") or is_test_path(rel) or not (root / rel).is_file():
            continue
        try:
            text = (root / rel).read_text(encoding="utf-8")
            spans = rust_tests.test_items(text)
        except (UnicodeDecodeError, rust_tests.RustSyntaxError):
            continue
        if spans:
            out[rel] = rust_tests.items_text(text, spans)
    return out


NOT_UNDER_TEST = frozenset(
    {"benches", "bench", "benchmark", "benchmarks", "examples", "example", "samples", "sample"}
    | {"demo", "demos", "docs", "doc", "fuzz", "tools", "scripts", "vendor", "third_party"}
    | {"thirdparty", "third-party", "external", "extern", "deps", "contrib", "build", "target"}
)
"""Folders of a compiled-language repository whose code no test suite exercises (benchmarks,
examples, fuzz targets, vendored dependencies, build output)."""


def under_test(rel: str) -> bool:
    """Whether a compiled-language source file is library code a suite tests: not in one of
    :data:`NOT_UNDER_TEST` (above any ``src`` folder), and in a Maven layout only under
    ``src/main/``. (Python's suites are traced instead: the functions they call decide.)"""
    parts = rel.split("/")[:-1]
    if "src" in parts:  # below a source root, folders are packages (`com/example/demo`)
        parts = parts[: parts.index("src")]
    if any(p.lower() in NOT_UNDER_TEST for p in parts):
        return False
    return not rel.endswith(".java") or "src/main/" in f"/{rel}"
