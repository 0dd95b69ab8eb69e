"""The adapter contract and the registry that picks an adapter for a location.

An :class:`Adapter` recognises a location (a folder, a file, a URL) and opens it as an
:class:`EnvReader`. Adapters from outside plug in with :func:`register` or through the
``repogym.explorer_adapters`` entry point group (each entry point loads an adapter object,
an adapter class, or a zero-argument factory returning one).
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Iterator
from typing import Protocol, runtime_checkable

from repogym.explorer.model import EnvDoc, TaskDoc

__all__ = [
    "Adapter",
    "AdapterError",
    "EnvReader",
    "ENTRY_POINT_GROUP",
    "adapters",
    "open_location",
    "pick",
    "register",
    "stat_fingerprint",
    "unregister",
]

ENTRY_POINT_GROUP = "repogym.explorer_adapters"
log = logging.getLogger("repogym.explorer")


def stat_fingerprint(
    root: str | os.PathLike[str], *, skip: frozenset[str] = frozenset(), limit: int | None = None
) -> str | None:
    """A digest of every entry under ``root`` — path, type, size, inode, modification and
    change times; stat only, nothing read — for readers' ``fingerprint(task_id)``. Entries
    named in ``skip`` are left out; None when there are more than ``limit`` entries. Raises
    OSError when a folder cannot be listed."""
    h = hashlib.blake2b(digest_size=16)
    stack = [os.fspath(root)]
    n = 0
    while stack:
        with os.scandir(stack.pop()) as it:
            entries = sorted(it, key=lambda e: e.name)
        for e in entries:
            if e.name in skip:
                continue
            n += 1
            if limit is not None and n > limit:
                return None
            st = e.stat(follow_symlinks=False)
            kind = "d" if e.is_dir(follow_symlinks=False) else "l" if e.is_symlink() else "f"
            h.update(
                f"{e.path}\0{kind}\0{st.st_size}\0{st.st_ino}\0{st.st_mtime_ns}"
                f"\0{st.st_ctime_ns}\0".encode("utf-8", "surrogateescape")
            )
            if kind == "d":
                stack.append(e.path)
    return h.hexdigest()


class AdapterError(Exception):
    """An adapter could not read a location (the message is one line, safe to show)."""


@runtime_checkable
class EnvReader(Protocol):
    """Reads one environment."""

    def env(self) -> EnvDoc: ...

    def task_ids(self) -> Iterator[str]:
        """Cheap listing, level by level, no file reads beyond what listing needs."""
        ...

    def task(self, task_id: str) -> TaskDoc:
        """The full doc, raw: ``withhold.apply()`` is run by the indexer on every TaskDoc."""
        ...

    # Optional: ``fingerprint(task_id) -> str | None``, a cheap identity of the task's source
    # that changes whenever ``task(task_id)`` would; the indexer then reuses what an equal
    # fingerprint produced before instead of reading the task (see docs/explore-adapters.md).


@runtime_checkable
class Adapter(Protocol):
    """Recognises and opens locations of one kind."""

    name: str

    def detect(self, location: str) -> float:
        """0 = not mine; higher = surer (1.0 task.toml found, 0.5 extension guess)."""
        ...

    def open(self, location: str) -> EnvReader:
        """Open ``location``; may raise :class:`AdapterError` (one-line reason)."""
        ...


_lock = threading.Lock()
_registered: list[Adapter] = []
_builtins_loaded = False

# Built-in adapters: (module, attribute). Missing modules are skipped, so the registry works
# while optional adapters are absent or their dependencies are not installed.
_BUILTINS = (
    ("repogym.explorer.adapters.harbor", "HarborAdapter"),
    ("repogym.explorer.adapters.rows", "RowsAdapter"),
    ("repogym.explorer.adapters.openenv", "OpenEnvAdapter"),
    ("repogym.explorer.adapters.hub", "HubAdapter"),
)


def _instantiate(obj: object) -> Adapter:
    if isinstance(obj, type) or (callable(obj) and not hasattr(obj, "detect")):
        obj = obj()  # class or factory
    if not (hasattr(obj, "detect") and hasattr(obj, "open") and hasattr(obj, "name")):
        raise TypeError(f"not an explorer adapter: {obj!r}")
    return obj


def _load_builtins() -> None:
    global _builtins_loaded
    if _builtins_loaded:
        return
    _builtins_loaded = True
    import importlib

    found: list[Adapter] = []
    for module, attr in _BUILTINS:
        try:
            mod = importlib.import_module(module)
            found.append(_instantiate(getattr(mod, attr)))
        except (ImportError, AttributeError) as exc:
            log.debug("explorer adapter %s.%s not available: %s", module, attr, exc)
    try:
        from importlib.metadata import entry_points

        for ep in entry_points(group=ENTRY_POINT_GROUP):
            try:
                found.append(_instantiate(ep.load()))
            except Exception as exc:  # a broken plug-in must not break the explorer
                log.warning("explorer adapter entry point %s failed: %s", ep.name, exc)
    except Exception as exc:  # pragma: no cover - metadata backend trouble
        log.debug("entry points unavailable: %s", exc)
    names = {a.name for a in _registered}
    for a in found:
        if a.name not in names:
            _registered.append(a)
            names.add(a.name)


def register(adapter: Adapter) -> None:
    """Add (or replace, by name) an adapter; adapters from outside plug in here."""
    adapter = _instantiate(adapter)
    with _lock:
        _load_builtins()
        _registered[:] = [a for a in _registered if a.name != adapter.name]
        _registered.append(adapter)


def unregister(name: str) -> None:
    """Remove the adapter called ``name`` (no error when absent)."""
    with _lock:
        _load_builtins()
        _registered[:] = [a for a in _registered if a.name != name]


def adapters() -> list[Adapter]:
    """The registered adapters (built-ins, entry points, then ``register()``ed ones)."""
    with _lock:
        _load_builtins()
        return list(_registered)


def pick(location: str) -> Adapter:
    """The surest adapter whose ``detect()`` > 0 and whose ``open()`` confirms.

    Raises :class:`AdapterError` naming what was tried when none does.
    """
    return open_location(location)[0]


def open_location(location: str) -> tuple[Adapter, EnvReader]:
    """Like :func:`pick`, also returning the reader the confirming ``open()`` gave."""
    scored: list[tuple[float, int, Adapter]] = []
    for i, a in enumerate(adapters()):
        try:
            score = float(a.detect(location))
        except Exception as exc:
            log.debug("adapter %s detect(%s) failed: %s", a.name, location, exc)
            continue
        if score > 0:
            scored.append((score, -i, a))
    if not scored:
        names = ", ".join(a.name for a in adapters()) or "none registered"
        raise AdapterError(f"no explorer adapter recognises {location} (tried: {names})")
    scored.sort(key=lambda t: (t[0], t[1]), reverse=True)
    reasons: list[str] = []
    for _score, _i, a in scored:
        try:
            reader = a.open(location)
        except AdapterError as exc:
            reasons.append(f"{a.name}: {exc}")
            continue
        return a, reader
    raise AdapterError(f"no explorer adapter could open {location} ({'; '.join(reasons)})")
