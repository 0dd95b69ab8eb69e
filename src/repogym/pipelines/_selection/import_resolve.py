"""Resolving an import to the repository file it names: Python roots (``src/`` layouts,
packaging and test-runner configuration) and Node resolution (``package.json`` exports,
``tsconfig`` paths, extension probing)."""

from __future__ import annotations

import os
import posixpath
import re
import warnings
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from repogym.pipelines._selection.import_scan import (
    iter_strings,
    load_json,
    match_pattern,
    scan_js,
    scan_python_bytes,
)
from repogym.pipelines._selection.repo_index import (
    JS_PROBE_EXTS,
    OUTPUT_DIRS,
    TS_SUBST,
    RepoIndex_,
    join_path,
    language_of_,
    parent_dir,
    read_file_bytes,
    read_text_file_,
    walk_files,
)
from repogym.shipped.testfiles import is_test_path

# --------------------------------------------------------------------------- resolver

#: Markers :meth:`ImportResolver._resolve_in` returns instead of a package folder.
_PARTIAL = "\0partial"  # a prefix resolved (``six.moves`` with only ``six.py``)
_MISSING = "\0missing"  # the first component is not under that root


class ImportResolver:
    """Resolves imports of one snapshot; every file is scanned at most once."""

    def __init__(self, repo: Path, extra_files: Iterable[str] = ()) -> None:
        self.repo = repo
        self._root = os.fspath(repo)
        self.index = RepoIndex_(repo)
        for f in extra_files:
            if language_of_(f) or f.endswith(".json"):
                self.index.add(f)
        self.files = self.index.files
        self.dirs = self.index.dirs
        self._edges: dict[str, set[str]] = {}
        self._py_roots: list[str] | None = None
        self._abs_cache: dict[tuple[tuple[str, ...], str], tuple[list[str], str | None]] = {}
        self._conftest_dir: dict[str, list[str]] = {}
        self._tsconfig_dir: dict[str, list[tuple[str, dict[str, list[str]], str | None]]] = {}
        self._pkg_dir: dict[str, str | None] = {}
        self._pkg_json: dict[str, dict[str, Any]] = {}
        self._workspaces: dict[str, list[str]] | None = None
        self._ts_files: dict[str, list[str]] | None = None

    # ---------------------------------------------------------------- graph

    def graph(self, starts: Iterable[str]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        queue = deque(s for s in starts if s in self.files)
        seen = set(queue)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            while queue:
                node = queue.popleft()
                deps = self.edges(node)
                out[node] = deps
                for dep in deps:
                    if dep not in seen:
                        seen.add(dep)
                        queue.append(dep)
        return out

    def edges(self, path: str) -> set[str]:
        cached = self._edges.get(path)
        if cached is None:
            lang = language_of_(path)
            if lang == "py":
                cached = self._py_edges(path)
            elif lang == "js":
                cached = self._js_edges(path)
            else:
                cached = set()
            cached.discard(path)
            self._edges[path] = cached
        return cached

    def conftests_for(self, test: str) -> list[str]:
        return list(self._conftests_in(parent_dir(test)))

    def _conftests_in(self, folder: str) -> list[str]:
        hit = self._conftest_dir.get(folder)
        if hit is None:
            conf = f"{folder}/conftest.py" if folder else "conftest.py"
            hit = [conf] if conf in self.files else []
            if folder:
                hit = hit + self._conftests_in(parent_dir(folder))
            self._conftest_dir[folder] = hit
        return hit

    # ---------------------------------------------------------------- Python

    def _py_edges(self, path: str) -> set[str]:
        imports, parsed = scan_python_bytes(read_file_bytes(os.path.join(self._root, path)))
        folder = parent_dir(path)
        deps: set[str] = set()
        # Importing a module runs its package's __init__ first (and that one its parent's).
        if posixpath.basename(path) == "__init__.py":
            own_init = (parent_dir(folder) + "/__init__.py").lstrip("/") if folder else ""
        else:
            own_init = f"{folder}/__init__.py" if folder else "__init__.py"
        if own_init and own_init in self.files:
            deps.add(own_init)
        local = self._local_roots(path, folder, parsed)
        for level, module, names in imports:
            if level:
                base: str | None = folder
                for _ in range(level - 1):
                    if not base:
                        base = None
                        break
                    base = parent_dir(base)
                if base is None:
                    continue
                files, pkg = self._resolve_in(base, module.split(".") if module else [])
                if not module:
                    init = f"{base}/__init__.py" if base else "__init__.py"
                    if init in self.files:
                        deps.add(init)
                    pkg = base
            else:
                if not module:
                    continue
                files, pkg = self._resolve_abs(local, module)
            deps.update(files)
            if pkg is not None and pkg is not _PARTIAL and pkg is not _MISSING:
                for name in names:
                    deps.update(self._submodule(pkg, name))
        return deps

    def _local_roots(self, path: str, folder: str, parsed: bool) -> tuple[str, ...]:
        """Folders on ``sys.path`` for this file only (script dir, pytest rootdir insertion)."""
        init = f"{folder}/__init__.py" if folder else "__init__.py"
        in_package = init in self.files
        if not (is_test_path(path) or not parsed or not in_package):
            return ()
        roots = [folder]
        base = folder
        while base and (f"{base}/__init__.py" in self.files):
            base = parent_dir(base)
        if base != folder:
            roots.append(base)
        return tuple(roots)

    def _submodule(self, pkg: str, name: str) -> list[str]:
        stem = f"{pkg}/{name}" if pkg else name
        out = [f for f in (f"{stem}.py", f"{stem}/__init__.py") if f in self.files]
        return out

    def _resolve_in(self, root: str, parts: list[str]) -> tuple[list[str], str | None]:
        """Files of ``parts`` under ``root``; also the package folder when all parts resolve
        to packages (for ``from pkg import submodule``). Raises nothing; partial is fine."""
        files: list[str] = []
        cur = root
        for i, part in enumerate(parts):
            stem = f"{cur}/{part}" if cur else part
            init = f"{stem}/__init__.py"
            if init in self.files:
                files.append(init)
                cur = stem
            elif f"{stem}.py" in self.files:
                files.append(f"{stem}.py")
                return files, None if i == len(parts) - 1 else _PARTIAL
            elif stem in self.dirs:
                cur = stem  # namespace package
            else:
                return files, _PARTIAL if i else _MISSING
        return files, cur

    def _resolve_abs(self, local: tuple[str, ...], module: str) -> tuple[list[str], str | None]:
        key = (local, module)
        hit = self._abs_cache.get(key)
        if hit is not None:
            return hit
        parts = module.split(".")
        roots = list(local) + [r for r in self._roots() if r not in local]
        full_empty: tuple[list[str], str | None] | None = None
        partial: tuple[list[str], str | None] | None = None
        result: tuple[list[str], str | None] = ([], None)
        for root in roots:
            files, pkg = self._resolve_in(root, parts)
            if pkg is _MISSING:
                continue
            if pkg is _PARTIAL:
                if partial is None and files:
                    partial = (files, None)
                continue
            if files:
                result = (files, pkg)
                break
            if full_empty is None:
                full_empty = (files, pkg)
        else:
            result = partial or full_empty or ([], None)
        self._abs_cache[key] = result
        return result

    def _roots(self) -> list[str]:
        if self._py_roots is None:
            roots = [""]
            if "src" in self.dirs:
                roots.append("src")
            for found in sorted(self._config_roots(), key=lambda r: (r.count("/"), r)):
                if found not in roots and found in self.dirs:
                    roots.append(found)
            self._py_roots = roots
        return self._py_roots

    def _config_roots(self) -> set[str]:
        roots: set[str] = set()
        names = ("pyproject.toml", "setup.cfg", "setup.py", "pytest.ini", "tox.ini")
        for cfg in walk_files(self.index, names):
            if "/" in cfg and is_test_path(cfg):
                continue  # fixture projects under tests/ are not module roots
            base = parent_dir(cfg)
            text = read_text_file_(os.path.join(self._root, cfg))
            if posixpath.basename(cfg) in names[:3]:
                roots.add(base)
            for rel in _config_dirs(text):
                joined = join_path(base, rel)
                if joined is not None:
                    roots.add(joined)
        return roots

    # ---------------------------------------------------------------- JS / TS

    def _js_edges(self, path: str) -> set[str]:
        text = read_text_file_(os.path.join(self._root, path))
        folder = parent_dir(path)
        deps: set[str] = set()
        for raw in scan_js(text):
            spec = raw.split("?", 1)[0].split("#", 1)[0] if not raw.startswith("#") else raw
            if not spec:
                continue
            deps.update(self._resolve_js(folder, spec))
        return deps

    def _resolve_js(self, folder: str, spec: str) -> list[str]:
        if spec.startswith(("./", "../")) or spec in (".", ".."):
            target = join_path(folder, spec)
            return self._probe(target) if target is not None else []
        if spec.startswith("/"):
            pkg = self._nearest_package(folder)
            target = join_path(pkg or "", spec.lstrip("/"))
            return self._probe(target) if target is not None else []
        out: list[str] = []
        for base, paths, base_url in self._tsconfigs(folder):
            for pattern, targets in paths.items():
                star = match_pattern(pattern, spec)
                if star is None:
                    continue
                for tgt in targets:
                    joined = join_path(base, tgt.replace("*", star, 1))
                    if joined is not None:
                        out.extend(self._probe(joined))
            if not out and base_url is not None:
                joined = join_path(base_url, spec)
                if joined is not None:
                    out.extend(self._probe(joined))
        if out:
            return out
        if spec.startswith("#"):
            return self._package_imports(folder, spec)
        segments = spec.split("/")
        name = "/".join(segments[:2]) if spec.startswith("@") else segments[0]
        sub = spec[len(name) + 1 :]
        for d in self._workspace_names().get(name, ()):
            out.extend(self._package_entry(d, sub))
        if out:
            return out
        if spec.startswith(("@/", "~/")):
            pkg = self._nearest_package(folder) or ""
            for base in ("src", ""):
                joined = join_path(pkg, posixpath.join(base, spec[2:]) if base else spec[2:])
                if joined is not None:
                    out.extend(self._probe(joined))
                if out:
                    break
        return out

    def _probe(self, target: str, *, depth: int = 0) -> list[str]:
        """Files a relative specifier resolved to ``target`` may name."""
        files = self.files
        if target in files:
            return [target]
        out: list[str] = []
        stem, ext = posixpath.splitext(target)
        for alt in TS_SUBST.get(ext, ()):
            if stem + alt in files:
                out.append(stem + alt)
        if out:
            return out
        out = [target + e for e in JS_PROBE_EXTS if target + e in files]
        if out:
            return out
        if target in self.dirs:
            pj = f"{target}/package.json" if target else "package.json"
            if pj in files and depth < 2:
                out = self._package_entry(target, "", depth=depth + 1)
            if not out:
                index = f"{target}/index" if target else "index"
                out = [index + e for e in JS_PROBE_EXTS if index + e in files]
        return out

    def _package_json(self, folder: str) -> dict[str, Any]:
        data = self._pkg_json.get(folder)
        if data is None:
            pj = f"{folder}/package.json" if folder else "package.json"
            data = load_json(os.path.join(self._root, pj)) if pj in self.files else {}
            self._pkg_json[folder] = data
        return data

    def _nearest_package(self, folder: str) -> str | None:
        if folder in self._pkg_dir:
            return self._pkg_dir[folder]
        pj = f"{folder}/package.json" if folder else "package.json"
        if pj in self.files:
            found: str | None = folder
        elif folder:
            found = self._nearest_package(parent_dir(folder))
        else:
            found = None
        self._pkg_dir[folder] = found
        return found

    def _workspace_names(self) -> dict[str, list[str]]:
        if self._workspaces is None:
            names: dict[str, list[str]] = {}
            for pj in sorted(walk_files(self.index, ("package.json",))):
                folder = parent_dir(pj)
                name = self._package_json(folder).get("name")
                if isinstance(name, str) and name:
                    names.setdefault(name, []).append(folder)
            self._workspaces = names
        return self._workspaces

    def _package_entry(self, pkg: str, sub: str, *, depth: int = 0) -> list[str]:
        """Files that ``<package at pkg>[/sub]`` names (exports, main/module, sub path)."""
        data = self._package_json(pkg)
        exports = data.get("exports")
        targets: list[str] = []
        key = f"./{sub}" if sub else "."
        if isinstance(exports, dict) and any(k.startswith(".") for k in exports):
            for pattern, value in exports.items():
                star = match_pattern(pattern, key)
                if star is not None:
                    targets.extend(t.replace("*", star) for t in iter_strings(value))
        elif exports is not None and not sub:
            targets.extend(iter_strings(exports))
        if not sub:
            for field in ("source", "module", "main", "browser"):
                value = data.get(field)
                if isinstance(value, str):
                    targets.append(value)
        out: list[str] = []
        for tgt in targets:
            joined = join_path(pkg, tgt)
            if joined is None or joined.endswith(".d.ts"):
                continue
            found = self._probe_entry(joined, depth)
            out.extend(f for f in found if f not in out)
        if not out:
            fallbacks = [sub, f"src/{sub}"] if sub else ["index", "src/index"]
            for rel in fallbacks:
                joined = join_path(pkg, rel)
                if joined is not None and joined != pkg:
                    out.extend(self._probe(joined, depth=depth + 1))
                if out:
                    break
        return out

    def _probe_entry(self, target: str, depth: int) -> list[str]:
        found = self._probe(target, depth=depth + 1)
        if found:
            return found
        parts = target.split("/")
        for i, part in enumerate(parts):
            if part in OUTPUT_DIRS:
                alt = "/".join([*parts[:i], "src", *parts[i + 1 :]])
                stem, ext = posixpath.splitext(alt)
                found = self._probe(alt, depth=depth + 1)
                if not found and ext in TS_SUBST:
                    found = self._probe(stem, depth=depth + 1)
                if found:
                    return found
        return []

    def _package_imports(self, folder: str, spec: str) -> list[str]:
        pkg = self._nearest_package(folder)
        if pkg is None:
            return []
        imports = self._package_json(pkg).get("imports")
        out: list[str] = []
        if isinstance(imports, dict):
            for pattern, value in imports.items():
                star = match_pattern(pattern, spec)
                if star is None:
                    continue
                for tgt in iter_strings(value):
                    joined = join_path(pkg, tgt.replace("*", star))
                    if joined is not None and tgt.startswith("."):
                        out.extend(self._probe_entry(joined, 0))
        return out

    def _tsconfigs(self, folder: str) -> list[tuple[str, dict[str, list[str]], str | None]]:
        """(folder ``paths`` are relative to, ``paths``, ``baseUrl`` folder) of every config in
        the nearest folder (from ``folder`` up) holding a ``tsconfig*.json``/``jsconfig.json``."""
        hit = self._tsconfig_dir.get(folder)
        if hit is None:
            configs = self._ts_config_files().get(folder)
            if configs:
                hit = [o for cfg in configs if (o := self._ts_options(cfg, 0)) is not None]
            elif folder:
                hit = self._tsconfigs(parent_dir(folder))
            else:
                hit = []
            self._tsconfig_dir[folder] = hit
        return hit

    def _ts_config_files(self) -> dict[str, list[str]]:
        if self._ts_files is None:
            found: dict[str, list[str]] = {}
            for f in sorted(self.files):
                name = posixpath.basename(f)
                if name == "jsconfig.json" or (
                    name.startswith("tsconfig") and name.endswith(".json")
                ):
                    found.setdefault(parent_dir(f), []).append(f)
            self._ts_files = found
        return self._ts_files

    def _ts_options(
        self, cfg: str, depth: int
    ) -> tuple[str, dict[str, list[str]], str | None] | None:
        """Effective ``paths``/``baseUrl`` of one config, ``extends`` (relative) followed."""
        data = load_json(os.path.join(self._root, cfg), jsonc=True)
        base = parent_dir(cfg)
        paths: dict[str, list[str]] | None = None
        paths_dir = base
        url_dir: str | None = None
        extends = data.get("extends")
        parents = [extends] if isinstance(extends, str) else extends
        if depth < 5 and isinstance(parents, list):
            for parent in parents:  # later entries override earlier ones
                if not (isinstance(parent, str) and parent.startswith(".")):
                    continue
                rel = parent if parent.endswith(".json") else parent + ".json"
                joined = join_path(base, rel)
                inherited = self._ts_options(joined, depth + 1) if joined in self.files else None
                if inherited is not None:
                    paths_dir, paths, url_dir = inherited
                    paths = paths or None
        options = data.get("compilerOptions")
        options = options if isinstance(options, dict) else {}
        if isinstance(options.get("paths"), dict):
            paths = {
                k: [t for t in v if isinstance(t, str)]
                for k, v in options["paths"].items()
                if isinstance(k, str) and isinstance(v, list)
            }
            paths_dir = base
        if isinstance(options.get("baseUrl"), str):
            url_dir = join_path(base, options["baseUrl"])
        if paths is None and url_dir is None:
            return None
        # paths are relative to baseUrl when there is one, else to the config defining them
        return (url_dir if url_dir is not None else paths_dir, paths or {}, url_dir)


_CFG_PATTERNS = [
    # setup.py package_dir={"": "src"}; pyproject package-dir = {"" = "src"}
    re.compile(r"""package[-_]dir\s*=\s*\{\s*['"]{2}\s*[:=]\s*['"]([^'"]+)['"]"""),
    # setup.cfg [options] package_dir =\n    = src
    re.compile(r"""package_dir\s*=\s*\n\s*=\s*([\w./-]+)"""),
    # where = ["src"] / where = src / find_packages(where="src") / find_packages("src")
    re.compile(r"""\bwhere\s*=\s*\[?\s*['"]?([\w./-]+)"""),
    re.compile(r"""find_(?:namespace_)?packages\(\s*['"]([\w./-]+)['"]"""),
    # poetry packages = [{ include = "pkg", from = "src" }]
    re.compile(r"""\bfrom\s*=\s*['"]([\w./-]+)['"]"""),
]
_HATCH_PACKAGES = re.compile(r"""^\s*(?:packages|sources)\s*=\s*\[([^\]]*)\]""", re.MULTILINE)
_PYTHONPATH = re.compile(r"""^\s*pythonpath\s*=\s*(\[[^\]]*\]|[^\n]*)""", re.MULTILINE)


def _config_dirs(text: str) -> set[str]:
    """Module-root folders named in packaging/pytest config (relative to the config's folder)."""
    out: set[str] = set()
    for pattern in _CFG_PATTERNS:
        out.update(m.group(1) for m in pattern.finditer(text))
    for m in _HATCH_PACKAGES.finditer(text):
        for item in re.findall(r"""['"]([^'"]+)['"]""", m.group(1)):
            if "/" in item.strip("/"):
                out.add(posixpath.dirname(item.strip("/")))
            elif m.group(0).lstrip().startswith("sources"):
                out.add(item)
    for m in _PYTHONPATH.finditer(text):
        value = m.group(1)
        items = re.findall(r"""['"]([^'"]+)['"]""", value) if "[" in value else value.split()
        out.update(items)
    return {d.strip().strip("/") or "." for d in out if d.strip()}
