"""The import rules of the source tree, checked on the code as it is (read with ``ast``; lazy
imports count): packages form layers and call only downward, no two packages import each other,
no package takes another's private (``_x``) module or name, and the CLI uses only public names.

The order below is the one docs/architecture.md draws. Synthesis (sources, bootstrap,
pipelines) and distribution (run, integrations, openenv, hub, explorer, mcp) meet only at the
task directory (``taskdir/``): neither side imports the other.
"""

from __future__ import annotations

import functools

from tests.structure import graph

ORDER: tuple[str, ...] = (
    # the foundation: top-level modules every layer may use
    "_secrets",
    "errors",
    "atomic",
    # named plug-in registries (standard library only)
    "plugins",
    "http",
    "_llm_wire",
    "llm",
    "ui",
    "dockerfile",
    "example_repo",
    # what generated tasks receive (which files are tests, log parsers, the tamper scan, the
    # verifiers' scripts): standard library only, importing only each other, below everything
    # that reads repositories or judges runs
    "shipped",
    # credentials: where each service's token comes from
    "auth",
    # the task directory, the one contract synthesis and distribution share
    "taskdir",
    "sandbox",
    # where work runs: this process, threads, Ray
    "executors",
    # the one client of OpenEnv servers (HTTP and WebSocket episodes)
    "openenv_client",
    # synthesis, lower half
    "sources",
    "bootstrap",
    # log parsers and rewards (used by synthesis and distribution alike)
    "verify",
    # what to generate: option models
    "spec",
    # synthesis, top
    "pipelines",
    # distribution
    "run",
    "integrations",
    "openenv",
    "hub",
    "explorer",
    "mcp",
    # library entry points that span synthesis and distribution (generation behind the gate)
    "workflows",
    # the command line, above everything
    "cli",
    # the public API (repogym.__all__: lazy re-exports of every layer's entry points)
    "repogym",
)
"""Packages lowest first: a package imports only packages before it."""

SYNTHESIS = frozenset({"sources", "bootstrap", "pipelines"})
DISTRIBUTION = frozenset({"run", "integrations", "openenv", "hub", "explorer", "mcp"})


@functools.cache
def _imports() -> list[graph.Import]:
    return list(graph.imports())


@functools.cache
def _edges() -> dict[tuple[str, str], list[graph.Import]]:
    return graph.package_edges()


def _rank(package: str) -> int:
    assert package in ORDER, f"package {package!r} is not in the declared ORDER: add it there"
    return ORDER.index(package)


def test_every_package_is_declared() -> None:
    packages = {graph.package_of(m) for m in graph.modules()}
    missing = sorted(p for p in packages if p not in ORDER)
    assert not missing, f"add these packages to ORDER (lowest first): {missing}"


def test_every_package_edge_goes_downward() -> None:
    upward = []
    for (a, b), imps in sorted(_edges().items()):
        if _rank(b) < _rank(a):
            continue
        where = ", ".join(sorted({f"{i.module}:{i.line}" for i in imps}))
        upward.append(f"{a} -> {b} ({where})")
    assert not upward, "imports that go up the layers:\n  " + "\n  ".join(upward)


def test_synthesis_and_distribution_meet_only_at_the_task_directory() -> None:
    crossing = [
        f"{a} -> {b}"
        for a, b in sorted(_edges())
        if (a in SYNTHESIS and b in DISTRIBUTION) or (a in DISTRIBUTION and b in SYNTHESIS)
    ]
    assert not crossing, crossing


def test_no_cycles_between_packages() -> None:
    cycles = graph.package_cycles(_edges())
    assert not cycles, cycles


def test_no_private_module_or_name_across_packages() -> None:
    taken = [
        f"{i.module}:{i.line} -> {i.target} {list(i.names)}"
        for i in graph.private_cross_package(_imports())
    ]
    assert not taken, "private names used across packages:\n  " + "\n  ".join(taken)


def test_cli_uses_only_public_names() -> None:
    """The CLI parses flags and renders: it reaches the layers below through public names only
    (no ``_x`` module anywhere on the path, no ``_x`` name), top-level modules included."""
    taken = [
        f"{i.module}:{i.line} -> {i.target} {list(i.names)}"
        for i in _imports()
        if graph.package_of(i.module) == "cli"
        and graph.package_of(i.target) != "cli"
        and (graph.is_private(i.target) or any(graph.is_private(n) for n in i.names))
    ]
    assert not taken, "the CLI takes private names:\n  " + "\n  ".join(taken)


SHIPPED_SCRIPTS = frozenset(
    {
        # run as standalone scripts inside tasks or sandboxes (one file each, stdlib only)
        "repogym.shipped.scripts.verifier",
        "repogym.shipped.scripts.equiv_verifier",
        "repogym.sandbox._forkserver",
    }
)
LONG_FUNCTIONS_LEFT: frozenset[str] = frozenset()


def test_modules_and_functions_stay_small() -> None:
    """Rooms a newcomer can read: no module over 700 lines (shipped scripts aside), no function
    over 100 lines."""
    sizes = graph.sizes()
    big = sorted(
        f"{m} ({n})" for m, n in sizes.modules.items() if n > 700 and m not in SHIPPED_SCRIPTS
    )
    long = sorted(
        f"{f} ({n})" for f, n in sizes.functions.items() if n > 100 and f not in LONG_FUNCTIONS_LEFT
    )
    assert not big, f"modules over 700 lines: {big}"
    assert not long, f"functions over 100 lines: {long}"
