"""The build context: ``.dockerignore`` matching, ``COPY`` source resolution, content hashing."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from repogym.sandbox.base import BuildError, EnvironmentSpec

_WILDCARD = re.compile(r"[*?\[]")


def glob_regex(pattern: str) -> re.Pattern[str]:
    """Go ``filepath.Match`` syntax plus ``**`` (any number of directories)."""
    out = ["^"]
    i = 0
    n = len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "*":
            if pattern.startswith("**", i):
                i += 2
                if i < n and pattern[i] == "/":
                    out.append("(?:.*/)?")
                    i += 1
                else:
                    out.append(".*")
                continue
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            end = pattern.find("]", i + 1)
            if end < 0:
                out.append(re.escape(ch))
            else:
                body = pattern[i + 1 : end]
                if body.startswith("^") or body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end
        elif ch == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(ch))
        i += 1
    out.append("$")
    return re.compile("".join(out))


def _clean(path: str) -> str:
    parts: list[str] = []
    for comp in path.replace("\\", "/").split("/"):
        if comp in ("", "."):
            continue
        if comp == "..":
            if parts:
                parts.pop()
            continue
        parts.append(comp)
    return "/".join(parts) or "."


@dataclass
class IgnoreRules:
    """``.dockerignore`` patterns, evaluated like Docker (last match wins, ``!`` re-includes)."""

    patterns: list[tuple[re.Pattern[str], bool]] = field(default_factory=list)

    @classmethod
    def load(cls, context: Path) -> IgnoreRules:
        rules = cls()
        if not os.path.lexists(context / ".dockerignore"):
            return rules
        f = inside(context, ".dockerignore")
        if not f.is_file():
            return rules
        for line in f.read_text(errors="replace").splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            exclusion = line.startswith("!")
            if exclusion:
                line = line[1:].strip()
            pat = _clean(line)
            if pat == ".":
                continue
            rules.patterns.append((glob_regex(pat), exclusion))
        return rules

    @property
    def has_exceptions(self) -> bool:
        return any(exc for _, exc in self.patterns)

    def ignored(self, rel: str) -> bool:
        """Whether a context-relative path (``a/b/c``) is excluded."""
        if not self.patterns:
            return False
        parents = rel.split("/")[:-1]
        matched = False
        for regex, exclusion in self.patterns:
            if exclusion != matched:
                continue
            hit = bool(regex.match(rel))
            if not hit:
                for k in range(1, len(parents) + 1):
                    if regex.match("/".join(parents[:k])):
                        hit = True
                        break
            if hit:
                matched = not exclusion
        return matched


@dataclass
class Source:
    """One resolved ``COPY`` source inside the context."""

    path: Path
    """The real path (symlinks resolved; always inside the context)."""
    rel: str
    is_dir: bool
    include: set[str] | None = None
    """For directories: the entries to copy (``a/b`` files, ``a/`` dirs), relative to ``path``."""
    name: str = ""
    """The name the source was matched by (a top-level symlink's own name, not its target's)."""


class ContextError(ValueError):
    pass


def inside(context: Path, rel: str, shown: str | None = None) -> Path:
    """``context/rel`` with every symlink resolved; ContextError when that leaves the context.

    The build context is a stranger's folder: a symlink in it may point anywhere on the host.
    """
    root = context.resolve()
    real = (root / rel).resolve() if rel not in ("", ".") else root
    if real != root and root not in real.parents:
        raise ContextError(
            f"forbidden path outside the build context: {shown or rel} "
            "(a symlink in the context points outside it)"
        )
    return real


def resolve_sources(context: Path, patterns: list[str], rules: IgnoreRules) -> list[Source]:
    """Resolve ``COPY`` source patterns (globs allowed) to existing, non-ignored paths.

    A source that is (or passes through) a symlink is followed only while it stays inside the
    context, wildcard or not; one leading outside is refused. Symlinks *inside* a copied
    folder are never followed (the copy keeps them as links).
    """
    root = context.resolve()
    out: list[Source] = []
    for pattern in patterns:
        clean = _clean(pattern.lstrip("/"))
        if pattern.replace("\\", "/").lstrip("/").startswith("..") or clean.startswith(".."):
            raise ContextError(f"forbidden path outside the build context: {pattern}")
        if _WILDCARD.search(clean):
            matches = _glob(root, clean, rules, pattern)
            if not matches:
                raise ContextError(f"no source files were specified: {pattern} matches nothing")
            out.extend(_source(root, m, rules, pattern) for m in matches)
            continue
        target = root if clean == "." else root / clean
        if not os.path.lexists(target) or (clean != "." and rules.ignored(clean)):
            raise ContextError(f"{pattern}: not found in the build context")
        out.append(_source(root, clean, rules, pattern))
    return out


def _glob(root: Path, pattern: str, rules: IgnoreRules, shown: str) -> list[str]:
    comps = pattern.split("/")
    current = [""]
    for depth, comp in enumerate(comps):
        regex = glob_regex(comp)
        nxt: list[str] = []
        for base in current:
            d = inside(root, base, shown) if base else root
            if not d.is_dir():
                continue
            for name in sorted(os.listdir(d)):
                rel = f"{base}/{name}" if base else name
                if regex.match(name) and not rules.ignored(rel):
                    if depth < len(comps) - 1 and not inside(root, rel, shown).is_dir():
                        continue
                    nxt.append(rel)
        current = nxt
    return current


def _source(root: Path, rel: str, rules: IgnoreRules, shown: str) -> Source:
    path = inside(root, rel, shown)
    real_rel = "." if path == root else str(path.relative_to(root))
    if real_rel != rel and real_rel != "." and rules.ignored(real_rel):
        raise ContextError(f"{shown}: not found in the build context")
    name = PurePosixPath(rel).name if rel != "." else root.name
    if path.is_dir():
        prefix = "" if real_rel == "." else real_rel + "/"
        include: set[str] = set()
        _walk_included(path, "", prefix, rules, include)
        return Source(path, rel, True, include, name)
    if not path.is_file():
        raise ContextError(f"{shown}: {rel} is not a regular file or folder")
    return Source(path, rel, False, None, name)


def _walk_included(d: Path, rel: str, ctx_prefix: str, rules: IgnoreRules, out: set[str]) -> bool:
    """Collect non-ignored entries below ``d``; True when anything below is included."""
    any_in = False
    try:
        entries = sorted(os.scandir(d), key=lambda e: e.name)
    except OSError:
        return False
    for entry in entries:
        sub = f"{rel}/{entry.name}" if rel else entry.name
        ignored = rules.ignored(ctx_prefix + sub)
        if entry.is_dir(follow_symlinks=False):
            if ignored and not rules.has_exceptions:
                continue
            inner = _walk_included(Path(entry.path), sub, ctx_prefix, rules, out)
            if inner or not ignored:
                out.add(sub + "/")
                any_in = True
        elif not ignored:
            out.add(sub)
            any_in = True
    return any_in


def hash_sources(sources: list[Source]) -> str:
    """Content hash of what a ``COPY`` would copy (names, types, modes, bytes, link targets)."""
    h = hashlib.sha256()
    for src in sources:
        h.update(f"src:{src.rel}\0".encode())
        if not src.is_dir:
            _hash_entry(h, src.path, src.name or src.path.name)
            continue
        for rel in sorted(src.include or ()):
            _hash_entry(h, src.path / rel.rstrip("/"), rel)
    return h.hexdigest()


def _hash_entry(h: hashlib._Hash, path: Path, rel: str) -> None:
    st = os.lstat(path) if os.path.lexists(path) else None
    if st is None:
        return
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        h.update(f"l:{rel}:{os.readlink(path)}\0".encode())
    elif stat.S_ISDIR(st.st_mode):
        h.update(f"d:{rel}:{mode:o}\0".encode())
    elif stat.S_ISREG(st.st_mode):
        h.update(f"f:{rel}:{mode:o}:{st.st_size}\0".encode())
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
    # Other file types are not copied and do not count.


def is_wildcard(pattern: str) -> bool:
    return bool(_WILDCARD.search(pattern))


def posix_join(base: str, path: str) -> str:
    """Join a sandbox path onto a base directory (absolute paths win), normalised."""
    joined = PurePosixPath(base or "/") / path
    parts: list[str] = []
    for comp in joined.parts[1:]:
        if comp == "..":
            if parts:
                parts.pop()
        elif comp not in ("", "."):
            parts.append(comp)
    return "/" + "/".join(parts)


@contextlib.contextmanager
def dockerfile_of(spec: EnvironmentSpec) -> Iterator[tuple[Path, Path]]:
    """``(context, Dockerfile)`` of ``spec``; a prebuilt image alone (``docker_image``)
    becomes a one-line ``FROM`` in an empty context (pulled, or mapped onto the host)."""
    ctx = spec.context_dir
    dockerfile = Path(ctx, spec.dockerfile) if ctx is not None else None
    if dockerfile is None or not dockerfile.is_file():
        if not spec.docker_image:
            raise BuildError(f"no Dockerfile found at {dockerfile or '(no context dir)'}")
        if "\n" in spec.docker_image or not spec.docker_image.strip():
            raise BuildError(f"invalid docker_image {spec.docker_image!r}")
        with tempfile.TemporaryDirectory(prefix="repogym-image-") as tmp:
            path = Path(tmp, "Dockerfile")
            path.write_text(f"FROM {spec.docker_image.strip()}\n", encoding="utf-8")
            yield Path(tmp), path
        return
    assert ctx is not None
    try:
        inside(Path(ctx), spec.dockerfile)
    except ContextError as exc:
        # Never read it: a parse error would quote a host file's lines in the log.
        raise BuildError(f"{spec.dockerfile}: {exc}") from None
    yield Path(ctx), dockerfile
