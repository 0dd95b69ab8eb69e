"""How a Node project's dependencies are installed: package manager, lockfile, pinning.

* ``package-lock.json`` / ``npm-shrinkwrap.json``: ``npm ci`` (exactly the locked versions).
* ``pnpm-lock.yaml``: pnpm at the version ``packageManager`` names (``pnpm@8.15.4``), else the
  major the lockfile format implies (5 → 7, 6 → 8, 9 → 9), fetched from the npm registry with
  ``npx`` and run with ``--frozen-lockfile``.
* ``yarn.lock`` v1: yarn 1 (``packageManager``'s exact version when given) with
  ``--frozen-lockfile``. yarn ≥ 2 ("berry", a ``__metadata`` lockfile): the release the repository
  ships (``.yarnrc.yml`` ``yarnPath``, run with ``node``) or the version ``packageManager`` names
  (npm package ``@yarnpkg/cli-dist``), with ``--immutable`` and ``YARN_NODE_LINKER=node-modules``
  so the runners find a ``node_modules`` tree; without either, npm resolves ``package.json``.
* no lockfile: ``npm install --no-package-lock``, recorded as **unpinned**; with a date (the
  commit's), ``--before=<date>`` makes npm pick the versions that were current then.

Package managers are npm packages run through ``npx`` rather than ``corepack``: corepack is no
longer bundled from Node 25 on, and it fetches yarn ≥ 2 from repo.yarnpkg.com, not the npm
registry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repogym.bootstrap._files import read_text

_PM = re.compile(r"^(npm|pnpm|yarn)@(\d+(?:\.\d+){0,2}(?:-[\w.]+)?)")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}(?:[T ][\d:.]+(?:Z|[+-]\d{2}:?\d{2})?)?$")


@dataclass
class InstallPlan:
    """The install step of a Node recipe."""

    manager: str = "npm"
    lockfile: str | None = None
    command: str = "npm install"
    copy: list[str] = field(default_factory=list)
    """Files the install needs before the source (besides ``package.json``)."""
    pinned: bool = True
    """False when nothing fixes the dependency versions (no usable lockfile)."""
    notes: list[str] = field(default_factory=list)


def package_manager(pkg: dict[str, Any]) -> tuple[str | None, str | None]:
    """``packageManager`` as ``(name, version)`` (``"pnpm@8.15.4+sha512…"`` → pnpm, 8.15.4)."""
    value = pkg.get("packageManager")
    m = _PM.match(value) if isinstance(value, str) else None
    return (m[1], m[2]) if m else (None, None)


def _pnpm_version(pkg: dict[str, Any], lock_text: str) -> str:
    name, version = package_manager(pkg)
    if name == "pnpm" and version:
        return version
    m = re.search(r"^lockfileVersion:\s*'?(\d+)", lock_text, re.M)
    number = int(m[1]) if m else 9
    return {5: "7", 6: "8"}.get(number, "9")


def _yarnrc(repo: Path) -> str:
    return read_text(repo / ".yarnrc.yml", 65536) or ""


def date_flag(before: str | None) -> str:
    """`` --before=<date>`` for npm (empty without a date); raises ValueError for a non-ISO date."""
    if not before:
        return ""
    if not _DATE.match(before.strip()):
        raise ValueError(f"not an ISO date for npm --before: {before!r}")
    return f" --before={before.strip()}"


def plan_install(
    repo: Path,
    pkg: dict[str, Any],
    *,
    ignore: str = "",
    rebuild: str = "",
    before: str | None = None,
) -> InstallPlan:
    """Decide the install of ``repo`` (``ignore``: `` --ignore-scripts`` or empty; ``rebuild``:
    a command appended when scripts were skipped; ``before``: an ISO date capping unpinned
    installs)."""
    plan = InstallPlan()
    notes = plan.notes
    pm_name, pm_version = package_manager(pkg)
    npm_unpinned = f"npm install --no-package-lock{ignore}{date_flag(before)}{rebuild}"
    for lock in ("package-lock.json", "npm-shrinkwrap.json"):
        if (repo / lock).is_file():
            plan.lockfile = lock
            plan.command = f"npm ci{ignore}{rebuild}"
            notes.append(f"{lock}: `npm ci` installs exactly the locked versions")
            break
    else:
        if (repo / "pnpm-lock.yaml").is_file():
            _pnpm(repo, pkg, plan, ignore, rebuild)
        elif (repo / "yarn.lock").is_file():
            _yarn(repo, pkg, plan, ignore, rebuild, npm_unpinned)
        else:
            plan.command = npm_unpinned
            plan.pinned = False
            notes.append(
                "no lockfile: npm resolves package.json ranges at build time (unpinned)"
                + (f"; capped at {before} with npm --before" if before else "")
            )
    if pm_name and pm_name != plan.manager and plan.lockfile:
        notes.append(f"packageManager names {pm_name}, the lockfile is {plan.lockfile}: it decides")
    if plan.lockfile:
        plan.copy.append(plan.lockfile)
    return plan


def _pnpm(repo: Path, pkg: dict[str, Any], plan: InstallPlan, ignore: str, rebuild: str) -> None:
    plan.manager, plan.lockfile = "pnpm", "pnpm-lock.yaml"
    version = _pnpm_version(pkg, read_text(repo / "pnpm-lock.yaml", 4096) or "")
    pnpm = f"npx --yes pnpm@{version}"
    plan.command = f"{pnpm} install --frozen-lockfile{ignore}"
    if rebuild:
        plan.command += f" && {pnpm} rebuild"
    for name in ("pnpm-workspace.yaml", ".pnpmfile.cjs"):
        if (repo / name).is_file():
            plan.copy.append(name)
    patched = (
        pkg.get("pnpm", {}).get("patchedDependencies")
        if isinstance(pkg.get("pnpm"), dict)
        else None
    )
    if isinstance(patched, dict):
        plan.copy += sorted(str(p) for p in patched.values() if isinstance(p, str))
    source = "packageManager" if package_manager(pkg)[0] == "pnpm" else "the lockfile format"
    plan.notes.append(f"pnpm-lock.yaml: pnpm {version} ({source}; fetched from npm with npx)")


def _yarn(
    repo: Path,
    pkg: dict[str, Any],
    plan: InstallPlan,
    ignore: str,
    rebuild: str,
    npm_unpinned: str,
) -> None:
    plan.lockfile = "yarn.lock"
    head = read_text(repo / "yarn.lock", 4096) or ""
    pm_name, pm_version = package_manager(pkg)
    berry = "__metadata:" in head or (pm_name == "yarn" and (pm_version or "1")[0] != "1")
    if not berry:
        plan.manager = "yarn"
        version = pm_version if pm_name == "yarn" and pm_version else "1"
        plan.command = (
            f"npx --yes yarn@{version} install --frozen-lockfile --non-interactive{ignore}"
        )
        if rebuild:
            plan.command += " && npm rebuild"
        plan.notes.append(f"yarn.lock (v1): yarn {version} (fetched from npm with npx) installs it")
        return
    rc = _yarnrc(repo)
    m = re.search(r"^yarnPath:\s*['\"]?([^'\"\s]+)", rc, re.M)
    yarn_path = m[1] if m and (repo / m[1]).is_file() else None
    if yarn_path:
        yarn, how = f"node {yarn_path}", f"the release the repository ships ({yarn_path})"
        plan.copy += [".yarnrc.yml", yarn_path]
    elif pm_name == "yarn" and pm_version:
        yarn = f"npx --yes --package=@yarnpkg/cli-dist@{pm_version} -- yarn"
        how = f"yarn {pm_version} (packageManager; npm package @yarnpkg/cli-dist)"
        if rc:
            plan.copy.append(".yarnrc.yml")
    else:
        plan.lockfile = None
        plan.command = npm_unpinned
        plan.pinned = False
        plan.notes.append(
            "yarn.lock of yarn ≥2 is not supported here without packageManager or a yarnPath"
            " release: npm resolves package.json ranges instead (unpinned; versions may differ"
            " from the lockfile)"
        )
        return
    plan.manager = "yarn"
    plugins = (
        sorted(
            p.relative_to(repo).as_posix()
            for p in (repo / ".yarn" / "plugins").rglob("*")
            if p.is_file()
        )
        if (repo / ".yarn" / "plugins").is_dir()
        else []
    )
    plan.copy += plugins
    linker = re.search(r"^nodeLinker:\s*['\"]?node-modules", rc, re.M)
    env = "" if linker else "YARN_NODE_LINKER=node-modules "
    skip = " --mode=skip-build" if ignore else ""
    plan.command = f"{env}YARN_ENABLE_TELEMETRY=0 {yarn} install --immutable{skip}"
    if rebuild:
        plan.command += " && npm rebuild"
    plan.notes.append(f"yarn.lock (berry): {how} installs it into node_modules")
