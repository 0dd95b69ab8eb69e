"""How Node dependencies are installed: npm ci, pnpm, yarn 1 and berry, unpinned installs
(detection only: nothing is installed, no network)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from repogym.bootstrap import detect, make_recipe
from repogym.bootstrap.node import project as node
from repogym.bootstrap.node.install import package_manager, plan_install

MakeRepo = Callable[..., Path]


@pytest.fixture(autouse=True)
def one_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(node, "host_node", lambda: "20.11.1")
    monkeypatch.setattr(node, "host_nodes", lambda: ["20.11.1"])


def pkg(**fields: object) -> str:
    return json.dumps({"name": "demo", "version": "1.0.0", "scripts": {"test": "mocha"}, **fields})


def run_lines(dockerfile: str) -> list[str]:
    return [ln for ln in dockerfile.splitlines() if ln.startswith("RUN ")]


def test_package_manager_field() -> None:
    assert package_manager({"packageManager": "pnpm@8.15.4+sha512.abc"}) == ("pnpm", "8.15.4")
    assert package_manager({"packageManager": "yarn@4.1.0"}) == ("yarn", "4.1.0")
    assert package_manager({"packageManager": "bun@1"}) == (None, None)
    assert package_manager({}) == (None, None)


def test_npm_ci_with_a_package_lock(make_repo: MakeRepo) -> None:
    repo = make_repo({"package.json": pkg(), "package-lock.json": "{}"})
    plan = plan_install(repo, {})
    assert (plan.manager, plan.lockfile, plan.command, plan.pinned) == (
        "npm",
        "package-lock.json",
        "npm ci",
        True,
    )


def test_pnpm_at_the_version_package_manager_names(make_repo: MakeRepo) -> None:
    repo = make_repo(
        {
            "package.json": pkg(packageManager="pnpm@8.15.4+sha512.deadbeef"),
            "pnpm-lock.yaml": "lockfileVersion: '9.0'\n",
            "pnpm-workspace.yaml": "packages:\n  - 'packages/*'\n",
            "packages/a/package.json": pkg(name="a"),
            ".pnpmfile.cjs": "module.exports = {};\n",
        }
    )
    d = detect(repo)
    assert d.node and d.node.manager == "pnpm" and d.node.pinned
    df = make_recipe(repo, d).dockerfile
    assert "RUN npx --yes pnpm@8.15.4 install --frozen-lockfile" in df
    copy = next(ln for ln in df.splitlines() if ln.startswith("COPY repo/package.json"))
    for name in ("pnpm-lock.yaml", "pnpm-workspace.yaml", ".pnpmfile.cjs"):
        assert f"repo/{name}" in copy
    assert "COPY repo/packages/a/package.json ./packages/a/" in df
    # Without packageManager, the lockfile format decides the major.
    old = make_repo({"package.json": pkg(), "pnpm-lock.yaml": "lockfileVersion: 5.4\n"})
    assert "npx --yes pnpm@7 install --frozen-lockfile" in make_recipe(old).dockerfile


def test_yarn_classic_and_berry(make_repo: MakeRepo) -> None:
    classic = make_repo(
        {"package.json": pkg(packageManager="yarn@1.22.19"), "yarn.lock": "# yarn lockfile v1\n"}
    )
    assert "npx --yes yarn@1.22.19 install --frozen-lockfile" in make_recipe(classic).dockerfile

    lock = "__metadata:\n  version: 8\n  cacheKey: 10c0\n"
    shipped = make_repo(
        {
            "package.json": pkg(packageManager="yarn@4.1.0"),
            "yarn.lock": lock,
            ".yarnrc.yml": "yarnPath: .yarn/releases/yarn-4.1.0.cjs\n",
            ".yarn/releases/yarn-4.1.0.cjs": "// yarn\n",
            ".yarn/plugins/@yarnpkg/plugin-x.cjs": "// plugin\n",
        }
    )
    d = detect(shipped)
    assert d.node and (d.node.manager, d.node.lockfile, d.node.pinned) == (
        "yarn",
        "yarn.lock",
        True,
    )
    df = make_recipe(shipped, d).dockerfile
    assert (
        "RUN YARN_NODE_LINKER=node-modules YARN_ENABLE_TELEMETRY=0 node"
        " .yarn/releases/yarn-4.1.0.cjs install --immutable" in df.replace(" \\\n    ", " ")
    )
    assert "repo/.yarn/releases/yarn-4.1.0.cjs" in df and "plugin-x.cjs" in df

    fetched = make_repo(
        {
            "package.json": pkg(packageManager="yarn@3.6.4"),
            "yarn.lock": lock,
            ".yarnrc.yml": "nodeLinker: node-modules\n",
        }
    )
    command = detect(fetched).node.install_command  # type: ignore[union-attr]
    assert command == (
        "YARN_ENABLE_TELEMETRY=0 npx --yes --package=@yarnpkg/cli-dist@3.6.4 -- yarn install"
        " --immutable"
    )
    unknown = make_repo({"package.json": pkg(), "yarn.lock": lock})
    d = detect(unknown)
    assert d.node and not d.node.pinned
    assert any("yarn ≥2 is not supported here without packageManager" in n for n in d.notes)


def test_no_lockfile_is_unpinned_and_can_be_capped_by_date(make_repo: MakeRepo) -> None:
    repo = make_repo({"package.json": pkg()})
    d = detect(repo)
    assert d.node and not d.node.pinned
    recipe = make_recipe(repo, d)
    assert "RUN npm install --no-package-lock" in recipe.dockerfile
    assert any("unpinned" in n for n in recipe.notes)
    capped = node.node_recipe(d.node, before="2024-05-01T12:00:00Z")
    # npm finding no version that old (no publish times) falls back to the uncapped install.
    assert (
        "RUN ( npm install --no-package-lock --before=2024-05-01T12:00:00Z"
        " || npm install --no-package-lock )"
    ) in capped.dockerfile.replace(" \\\n    ", " ")
    assert any("npm --before=2024-05-01T12:00:00Z" in n for n in capped.notes)
    assert capped.hash != recipe.hash
    if hasattr(capped, "commit_date"):  # the recipe model records the cap where it can
        assert capped.commit_date == "2024-05-01T12:00:00Z"
    with_date = node.detect_node(repo, before="2024-05-01")
    assert "--before=2024-05-01" in node.node_recipe(with_date).dockerfile
    with pytest.raises(ValueError, match="ISO date"):
        node.node_recipe(d.node, before="yesterday; rm -rf /")
    # A lockfile makes the date irrelevant.
    locked = make_repo({"package.json": pkg(), "package-lock.json": "{}"})
    d = detect(locked)
    assert d.node is not None
    assert "--before" not in node.node_recipe(d.node, before="2024-05-01").dockerfile
