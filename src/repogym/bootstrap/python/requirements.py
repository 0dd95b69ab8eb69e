"""Requirement lines and ``setup.py`` literals, read statically (nothing is executed)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from repogym.bootstrap._files import read_text
from repogym.bootstrap.python.versions import (
    PythonInstall,
    SpecifierError,
    poetry_to_pep440,
    satisfies,
)

_REQ_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?")


def normalize(name: str) -> str:
    """PEP 503 project name normalisation."""
    return canonicalize_name(name)


def _requirement(req: str) -> Requirement | None:
    try:
        return Requirement(req.strip())
    except InvalidRequirement:
        return None


def req_name(req: str) -> str | None:
    """The normalised project name of a PEP 508 requirement; for a line PEP 508 does not
    read but pip does (``name==1.0 --hash=…``), the name it starts with; else None."""
    parsed = _requirement(req)
    if parsed is not None:
        return normalize(parsed.name)
    m = _REQ_NAME.match(req)
    return normalize(m[1]) if m else None


def req_extras(req: str) -> list[str]:
    """The extras a requirement asks for (``name[a,b]`` → ``["a", "b"]``), in the order given."""
    m = _REQ_NAME.match(req)
    if not m or not m[2]:
        return []
    return [e.strip() for e in m[2][1:-1].split(",") if e.strip()]


def lines(value: str) -> list[str]:
    """setup.cfg / tox.ini multi-line values: one entry a line, comments dropped."""
    out = []
    for line in value.splitlines():
        line = re.split(r"\s+#", line, maxsplit=1)[0].strip()
        if line and not line.startswith("#"):
            out.append(line)
    return out


# ------------------------------------------------------------------------------ requirement files


@dataclass
class RequirementFile:
    """One parsed ``requirements.txt`` and what it points at."""

    path: str
    requirements: list[str] = field(default_factory=list)
    includes: list[str] = field(default_factory=list)
    constraints: list[str] = field(default_factory=list)
    local: list[str] = field(default_factory=list)
    """Lines naming the repository itself (``-e .``, ``./sub``): installable only after COPY."""


def resolve_path(base: str, target: str) -> str:
    target = re.sub(r"^\{toxinidir\}/?", "", target.strip().strip("\"'"))
    joined = PurePosixPath(base).parent / target
    parts: list[str] = []
    for part in joined.parts:
        if part == "..":
            if parts:
                parts.pop()
        elif part != ".":
            parts.append(part)
    return "/".join(parts)


def is_local_ref(text: str) -> bool:
    text = text.strip()
    if text.startswith(("git+", "hg+", "svn+", "bzr+", "http://", "https://")):
        return False
    return text.startswith((".", "/", "file:", "${")) or text in ("", ".")


_LOCAL_TARGET = re.compile(r"^(?P<path>[^\[\]]*?)/?(?P<extras>\[[^\]]*\])?(?:#.*)?$")


def local_target(text: str) -> tuple[str, list[str]] | None:
    """A local install target (``-e .[full]``, ``'.[a, b]'``, ``./sub``, ``file:.``) as
    ``(path relative to the repository, extras)``; ``""`` is the repository itself.

    None when ``text`` is not a plain local path (URLs, variables, absolute paths). Paths are
    taken relative to the repository root, as pip does when run from it.
    """
    text = re.sub(r"^(-e|--editable)(\s+|=)", "", text.strip()).strip().strip("\"'")
    text = re.sub(r"^file:(//)?", "", text)
    m = _LOCAL_TARGET.match(text)
    if not m or text.startswith(("/", "$", "~")) or "://" in text:
        return None
    parts = [p for p in PurePosixPath(m["path"] or ".").parts if p != "."]
    if ".." in parts or any(not re.fullmatch(r"[\w.@+-]+", p) for p in parts):
        return None
    extras = [e.strip() for e in (m["extras"] or "[]")[1:-1].split(",") if e.strip()]
    return "/".join(parts), extras


_BRANCHES = r"(master|main|develop|dev|devel|trunk|HEAD)"
_MOVING_ARCHIVE = re.compile(
    rf"/archive/(refs/heads/)?{_BRANCHES}\.(tar\.gz|zip)\b|/(tarball|zipball)/{_BRANCHES}\b"
)
_VCS = re.compile(r"^(?:-e\s+)?(?:[\w.-]+\s*@\s*)?(git|hg|svn|bzr)\+\w+://(?P<rest>\S+)$")


def moving_url(req: str) -> bool:
    """A requirement on a branch (``git+…`` without a tag or commit, ``…@main``,
    ``…/archive/main.tar.gz``): what it installs depends on the day, so it contradicts
    installing as of the commit's date."""
    req = req.strip()
    if _MOVING_ARCHIVE.search(req):
        return True
    m = _VCS.match(req)
    if not m:
        return False
    path = m["rest"].split("#", 1)[0].split("/", 1)[-1]  # without host (and user@)
    ref = path.rsplit("@", 1)[1] if "@" in path else ""
    return not ref or bool(re.fullmatch(_BRANCHES, ref))


def local_text(path: str, extras: list[str]) -> str:
    """``path`` with its extras, as an install target (``examples/app[test]``)."""
    return path + (f"[{','.join(extras)}]" if extras else "")


def parse_requirement_lines(text: str, path: str = "requirements.txt") -> RequirementFile:
    """Parse pip requirement lines (``-r``/``-c``/``-e``/options/continuations/comments)."""
    out = RequirementFile(path)
    for raw in re.sub(r"\\\n", "", text).splitlines():
        line = re.split(r"(^|\s)#", raw, maxsplit=1)[0].strip()
        if not line:
            continue
        m = re.match(r"^(-r|--requirement|-c|--constraint)(?:\s*=?\s*)(\S+)", line)
        if m:
            target = resolve_path(path, m[2])
            (out.includes if m[1] in ("-r", "--requirement") else out.constraints).append(target)
            continue
        m = re.match(r"^(-e|--editable)\s*=?\s*(\S.*)$", line)
        if m:
            if is_local_ref(m[2]):
                out.local.append(line)
            else:
                out.requirements.append(line)
            continue
        if line.startswith("-"):
            continue  # --index-url, --hash-only lines, --pre …: kept only via ``-r``
        if is_local_ref(line) or re.match(r"^[\w.-]+/", line) and not req_name(line):
            out.local.append(line)
            continue
        out.requirements.append(re.sub(r"\s--hash[=\s]\S+", "", line).strip())
    return out


# ------------------------------------------------------------------------------ setup.py


@dataclass
class SetupPy:
    kwargs: dict[str, Any]
    uses_distutils: bool
    requirement_files: list[str]


_LITERAL_ERRORS = (ValueError, TypeError, SyntaxError, RecursionError)


def _literal(node: ast.AST, consts: dict[str, Any]) -> tuple[bool, Any]:
    """``(True, value)`` when ``node`` is a literal or a name bound to one."""
    if isinstance(node, ast.Name) and node.id in consts:
        return True, consts[node.id]
    try:
        return True, ast.literal_eval(node)
    except _LITERAL_ERRORS:
        return False, None


def _imports_distutils(node: ast.AST) -> bool:
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").startswith("distutils")
    if isinstance(node, ast.Import):
        return any(a.name.startswith("distutils") for a in node.names)
    return False


def parse_setup_py(text: str) -> SetupPy:
    """Literal keyword arguments of the ``setup()`` call (names bound to literals resolved)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return SetupPy({}, "distutils" in text, [])
    consts: dict[str, Any] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
            ok, value = _literal(stmt.value, {})
            if ok and isinstance(target, ast.Name):
                consts[target.id] = value
    kwargs: dict[str, Any] = {}
    uses_distutils = False
    req_files: list[str] = []
    for node in ast.walk(tree):
        uses_distutils = uses_distutils or _imports_distutils(node)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if re.fullmatch(r"[\w./-]*requirements[\w.-]*\.txt", node.value):
                req_files.append(node.value.removeprefix("./"))
        elif isinstance(node, ast.Call):
            func = node.func
            fname = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if fname != "setup":
                continue
            for kw in node.keywords:
                ok, value = _literal(kw.value, consts) if kw.arg else (False, None)
                if ok and kw.arg:
                    kwargs[kw.arg] = value
    return SetupPy(kwargs, uses_distutils, sorted(set(req_files)))


def as_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return lines(value)
    if isinstance(value, list | tuple):
        return [str(v).strip() for v in value if str(v).strip()]
    return []


def closure(repo: Path, roots: list[str]) -> tuple[list[RequirementFile], list[str]]:
    """Parse requirement files and everything they include; returns files and missing paths."""
    parsed: dict[str, RequirementFile] = {}
    missing: list[str] = []
    todo = list(roots)
    while todo:
        rel = todo.pop(0)
        if rel in parsed or rel in missing:
            continue
        text = read_text(repo / rel)
        if text is None:
            missing.append(rel)
            continue
        rf = parse_requirement_lines(text, rel)
        parsed[rel] = rf
        todo += rf.includes + rf.constraints
    return list(parsed.values()), missing


# ------------------------------------------------------------------------------ poetry, PEP 735


def _safe_satisfies(install: PythonInstall, spec: str) -> bool:
    try:
        return satisfies(install.version, spec)
    except SpecifierError:
        return True


def poetry_dep(name: str, spec: Any, install: PythonInstall | None) -> tuple[str | None, str]:
    """A Poetry dependency entry as a PEP 508 string (None + reason when skipped)."""
    if isinstance(spec, list):
        for alt in spec:
            py = alt.get("python") if isinstance(alt, dict) else None
            if install is None or not py or _safe_satisfies(install, py):
                return poetry_dep(name, alt, install)
        return None, "no alternative for this python"
    if isinstance(spec, str):
        spec = {"version": spec}
    if not isinstance(spec, dict):
        return None, "unreadable entry"
    if spec.get("optional"):
        return None, "optional"
    for key in ("path", "git", "url", "file"):
        if key in spec:
            return None, f"{key} dependency"
    if spec.get("python") and install is not None and not _safe_satisfies(install, spec["python"]):
        return None, f"only for python {spec['python']}"
    try:
        version = poetry_to_pep440(str(spec.get("version", "*"))) or ""
    except SpecifierError:
        return None, f"unreadable constraint {spec.get('version')!r}"
    extras = spec.get("extras") or []
    text = name + (f"[{','.join(extras)}]" if extras else "") + version
    if spec.get("markers"):
        text += f"; {spec['markers']}"
    return text, ""


def pep735_group(groups: dict[str, Any], name: str, seen: set[str] | None = None) -> list[str]:
    """A PEP 735 dependency group's requirements (``include-group`` followed)."""
    seen = seen if seen is not None else set()
    if name in seen:
        return []
    seen.add(name)
    out = []
    for item in groups.get(name) or []:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict) and "include-group" in item:
            out += pep735_group(groups, item["include-group"], seen)
    return out
