"""Extras and dependency groups of a Python project (PEP 621, PEP 735, Poetry, PDM, Hatch,
uv), for the Python reader (:mod:`repogym.bootstrap.python.project`)."""

from __future__ import annotations

import configparser
import re
from typing import TYPE_CHECKING, Any

from repogym.bootstrap.python.requirements import (
    as_list,
    lines,
    normalize,
    pep735_group,
    poetry_dep,
    req_extras,
    req_name,
)

TEST_GROUP = re.compile(
    r"^(tests?|testing|pytest|unit[-_]?tests?|tests?[-_].+|.+[-_]tests?)$", re.I
)
DEV_GROUP = re.compile(r"^(dev|devel|develop|development|dev[-_].+)$", re.I)


class GroupsMixin:
    """Reads extras and groups into the reader's test / dev buckets (attributes live there)."""

    p: Any
    pyproject: dict[str, Any]
    pep621: dict[str, Any]
    tool: dict[str, Any]
    poetry: dict[str, Any]
    setup_cfg: configparser.ConfigParser
    dyn_optional: dict[str, Any]
    extras: dict[str, list[str]]
    test_extras: list[str]
    dev_extras: list[str]
    test_groups: list[tuple[str, list[str]]]
    dev_groups: list[tuple[str, list[str]]]
    skipped: list[str]
    group_buckets: dict[str, str]

    # Provided by the reader; declared for the checker only, so that nothing here can shadow
    # the real methods at run time.
    if TYPE_CHECKING:

        def req_file(self, rel: str, kind: str, why: str) -> None: ...
        def setup_kw(self, key: str) -> Any: ...
        def cfg(self, section: str, key: str) -> str: ...

    @staticmethod
    def _table(parent: dict[str, Any], key: str) -> dict[str, Any]:
        value = parent.get(key)
        return value if isinstance(value, dict) else {}

    def group(self, label: str, name: str, deps: list[str]) -> None:
        """A named group of extra requirements: kept when its name says test (or dev)."""
        if TEST_GROUP.match(name):
            self.test_groups.append((f"{label} {name!r}", deps))
            bucket = "test"
        elif DEV_GROUP.match(name):
            self.dev_groups.append((f"{label} {name!r}", deps))
            bucket = "dev"
        else:
            return
        if label != "extra" and self.group_buckets.get(name) != "test":
            self.group_buckets[name] = bucket

    def poetry_deps(self, table: Any) -> list[str]:
        out: list[str] = []
        if not isinstance(table, dict):
            return out
        for name, spec in table.items():
            if name.lower() == "python":
                continue
            text, why = poetry_dep(name, spec, self.p.install)
            if text:
                out.append(text)
            elif why != "optional":
                self.skipped.append(f"{name} ({why})")
        return out

    def optional(self) -> None:
        """Extras, dependency groups and tool-specific dev groups."""
        opt = self.pep621.get("optional-dependencies")
        if isinstance(opt, dict):
            self.extras.update({str(k): as_list(v) for k, v in opt.items()})
        for extra, spec in self.dyn_optional.items():
            files = as_list(spec.get("file")) if isinstance(spec, dict) else []
            kind = "test" if TEST_GROUP.match(extra) else "dev" if DEV_GROUP.match(extra) else ""
            for rel in files if kind else []:
                self.req_file(rel, kind, f"dynamic optional-dependencies {extra!r}")
        if self.setup_cfg.has_section("options.extras_require"):
            for extra, value in self.setup_cfg.items("options.extras_require"):
                self.extras.setdefault(extra, lines(value))
        extras_require = self.setup_kw("extras_require")
        if isinstance(extras_require, dict):
            for extra, value in extras_require.items():
                self.extras.setdefault(str(extra), as_list(value))
        poetry_deps = self._table(self.poetry, "dependencies")
        by_norm = {normalize(n): n for n in poetry_deps}
        for extra, names in self._table(self.poetry, "extras").items():
            reqs = []
            for n in as_list(names):
                spec = poetry_deps.get(by_norm.get(normalize(n), n), "*")
                if isinstance(spec, dict):
                    spec = {**spec, "optional": False}
                text, _ = poetry_dep(n, spec, self.p.install)
                if text:
                    reqs.append(text)
            self.extras.setdefault(extra, reqs)
        for extra in self.extras:
            if TEST_GROUP.match(extra):
                self.test_extras.append(extra)
            elif DEV_GROUP.match(extra):
                self.dev_extras.append(extra)
            self.group("extra", extra, self.expand_extra(extra))

        groups = self.pyproject.get("dependency-groups")
        if isinstance(groups, dict):
            for name in groups:
                self.group("dependency group", name, pep735_group(groups, name))
        for name, table in self._table(self.poetry, "group").items():
            if isinstance(table, dict):
                self.group("poetry group", name, self.poetry_deps(table.get("dependencies")))
        if self.poetry.get("dev-dependencies"):
            deps = self.poetry_deps(self.poetry["dev-dependencies"])
            self.dev_groups.append(("poetry dev-dependencies", deps))
        for name, reqs in self._table(self._table(self.tool, "pdm"), "dev-dependencies").items():
            reqs = [r for r in as_list(reqs) if not r.startswith("-")]
            self.group("pdm dev-dependencies", name, reqs)
        for name, env in self._table(self._table(self.tool, "hatch"), "envs").items():
            if not isinstance(env, dict):
                continue
            reqs = as_list(env.get("dependencies")) + as_list(env.get("extra-dependencies"))
            for feature in as_list(env.get("features")):
                reqs += self.expand_extra(feature)
            if name == "hatch-test":
                self.test_groups.append(("hatch env 'hatch-test'", ["pytest", *reqs]))
            elif name == "default":
                self.dev_groups.append(("hatch env 'default'", reqs))
            else:
                self.group("hatch env", name, reqs)
        tests_require = lines(self.cfg("options", "tests_require"))
        tests_require += as_list(self.setup_kw("tests_require"))
        if tests_require:
            self.test_groups.append(("tests_require", tests_require))

    def group_deps(self, name: str) -> list[str] | None:
        """The requirements of dependency group ``name`` (PEP 735, Poetry, PDM, uv's legacy
        ``dev-dependencies``); None when the project declares no such group."""
        groups = self._table(self.pyproject, "dependency-groups")
        if name in groups:
            return pep735_group(groups, name)
        poetry_group = self._table(self._table(self.poetry, "group"), name)
        if poetry_group:
            return self.poetry_deps(poetry_group.get("dependencies"))
        if name == "dev" and self.poetry.get("dev-dependencies"):
            return self.poetry_deps(self.poetry["dev-dependencies"])
        pdm = self._table(self._table(self.tool, "pdm"), "dev-dependencies")
        if name in pdm:
            return [r for r in as_list(pdm[name]) if not r.startswith("-")]
        uv_dev = self._table(self.tool, "uv").get("dev-dependencies")
        if name == "dev" and isinstance(uv_dev, list):
            return as_list(uv_dev)
        return None

    def default_groups(self, tool: str) -> list[str]:
        """The groups ``tool`` installs without being asked (those the project declares)."""
        if tool == "uv-sync":
            configured = self._table(self.tool, "uv").get("default-groups")
            names = as_list(configured) if isinstance(configured, list) else ["dev"]
        elif tool == "poetry":
            groups = self._table(self.poetry, "group")
            names = [n for n, t in groups.items() if isinstance(t, dict) and not t.get("optional")]
            names += ["dev"] if self.poetry.get("dev-dependencies") else []
        elif tool == "pdm":
            names = list(self._table(self._table(self.tool, "pdm"), "dev-dependencies"))
        else:
            names = []
        return [n for n in names if self.group_deps(n) is not None]

    def expand_extra(self, name: str, seen: set[str] | None = None) -> list[str]:
        """An extra's requirements with self-references (``pkg[other]``) expanded."""
        seen = seen if seen is not None else set()
        if name in seen or name not in self.extras:
            return []
        seen.add(name)
        own = normalize(self.p.name) if self.p.name else None
        out = []
        for req in self.extras[name]:
            if own and req_name(req) == own:
                for extra in req_extras(req):
                    out += self.expand_extra(extra, seen)
            else:
                out.append(req)
        return out
