"""Named plug-in registries: one way for every extension point to find its implementations.

A :class:`Registry` maps a name to an object of one kind (a sandbox backend class, an agent
factory, an LLM provider …). Its entries come from three places, in this order of precedence:

1. objects added at run time with :meth:`Registry.register` (they replace what is there);
2. built-ins, named as ``"module:attribute"`` and imported only when first used, so a missing
   optional dependency never breaks ``import repogym``;
3. entry points of the registry's group (e.g. ``repogym.sandboxes``) in installed
   distributions, read once, on the first look-up.

A plug-in that fails to load is isolated: looking it up raises :class:`PluginError` whose one
line names it and says why, while every other entry goes on working. A built-in whose module
needs an optional dependency names the ``repogym`` extra that provides it (``extra="docker"``);
the missing dependency becomes :class:`MissingDependency` with the install line
``pip install 'repogym[docker]'``.

Only the standard library is imported here.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Generic, TypeVar

__all__ = [
    "Builtin",
    "MissingDependency",
    "PluginError",
    "Registry",
    "UnknownPlugin",
    "install_hint",
    "load_target",
]

T = TypeVar("T")
log = logging.getLogger(__name__)


class PluginError(Exception):
    """A plug-in cannot be used; the message is one line naming it."""


class UnknownPlugin(PluginError, LookupError):
    """No plug-in of that name is registered."""

    def __init__(self, message: str, name: str, known: list[str]) -> None:
        super().__init__(message)
        self.name = name
        self.known = known


class MissingDependency(PluginError, ImportError):
    """A plug-in's optional dependency is not installed; the message says how to install it."""


def install_hint(extra: str) -> str:
    """The command that installs the ``repogym`` extra ``extra``."""
    return f"pip install 'repogym[{extra}]'"


def load_target(target: str) -> object:
    """The object a ``"module:attribute"`` (or ``"module:a.b"``) string names, imported now."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"plug-in target must look like 'module:attribute', got {target!r}")
    obj: object = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class Builtin:
    """A built-in entry: where it lives and which extra its dependencies come from."""

    target: str
    """``"module:attribute"``, imported on first use."""
    extra: str | None = None
    """The ``repogym`` extra that installs what the module imports (``docker``, ``llm`` …)."""
    hidden: bool = False
    """Usable by name but not listed by :meth:`Registry.names` (e.g. a backend for tests)."""


@dataclass
class _Entry:
    source: str
    """Where the entry came from, for messages: ``repogym.sandbox.docker:DockerSandbox``,
    ``entry point repogym.sandboxes:foo``, ``registered``."""
    builtin: Builtin | None = None
    point: EntryPoint | None = None
    value: object = None
    loaded: bool = False
    error: PluginError | None = None


def instance_of(kind: type[T], what: str) -> Callable[[object], T]:
    """A ``check`` for registries of objects: the loaded object must be a ``kind``."""

    def check(obj: object) -> T:
        if not isinstance(obj, kind):
            raise TypeError(f"not {what}: {obj!r}")
        return obj

    return check


def subclass_of(kind: type | tuple[type, ...], what: str) -> Callable[[object], Any]:
    """A ``check`` for registries of classes: the loaded object must be a subclass of ``kind``."""

    def check(obj: object) -> Any:
        if not (isinstance(obj, type) and issubclass(obj, kind)):
            raise TypeError(f"not {what}: {obj!r}")
        return obj

    return check


def callable_check(what: str) -> Callable[[object], Any]:
    """A ``check`` for registries of factories: the loaded object must be callable."""

    def check(obj: object) -> Any:
        if not callable(obj):
            raise TypeError(f"not {what}: {obj!r}")
        return obj

    return check


class Registry(Generic[T]):
    """Name → object of one kind, loaded lazily; see the module's description.

    ``kind`` names the kind in messages (``sandbox backend``); ``group`` is the entry point
    group or None; ``builtins`` maps names to ``"module:attr"`` strings, :class:`Builtin`
    records or ready objects; ``check`` turns what was loaded into a ``T`` or raises
    ``TypeError``/``ValueError`` (the plug-in is then reported as broken).
    """

    def __init__(
        self,
        kind: str,
        *,
        group: str | None,
        builtins: Mapping[str, str | Builtin | T],
        check: Callable[[object], T],
    ) -> None:
        self.kind = kind
        self.group = group
        self._check = check
        self._lock = threading.RLock()
        self._entries: dict[str, _Entry] = {}
        self._hidden: set[str] = set()
        self._discovered = group is None
        for name, spec in builtins.items():
            if isinstance(spec, str):
                spec = Builtin(spec)
            if isinstance(spec, Builtin):
                self._entries[name] = _Entry(spec.target, builtin=spec)
                if spec.hidden:
                    self._hidden.add(name)
            else:
                self._entries[name] = _Entry("built-in", value=spec, loaded=True)

    # -- entries --------------------------------------------------------------------------------

    def register(self, name: str, obj: T | str, *, hidden: bool = False) -> None:
        """Add or replace ``name``: an object, or a ``"module:attr"`` string loaded on use."""
        with self._lock:
            self._discover()
            if isinstance(obj, str):
                self._entries[name] = _Entry(obj, builtin=Builtin(obj))
            else:
                self._entries[name] = _Entry("registered", value=self._check(obj), loaded=True)
            self._hidden.discard(name)
            if hidden:
                self._hidden.add(name)

    def unregister(self, name: str) -> None:
        """Remove ``name`` (no error when absent)."""
        with self._lock:
            self._discover()
            self._entries.pop(name, None)
            self._hidden.discard(name)

    def names(self, *, hidden: bool = False) -> list[str]:
        """Every name, sorted; the hidden ones only when asked. Nothing is imported."""
        with self._lock:
            self._discover()
            return sorted(n for n in self._entries if hidden or n not in self._hidden)

    def __contains__(self, name: object) -> bool:
        with self._lock:
            self._discover()
            return name in self._entries

    def get(self, name: str) -> T:
        """The object called ``name``, imported on first use.

        Raises :class:`UnknownPlugin` (naming the listed choices), :class:`MissingDependency`
        (with the install line) or :class:`PluginError` (a broken plug-in, in one line).
        """
        with self._lock:
            self._discover()
            entry = self._entries.get(name)
            if entry is None:
                known = self.names()
                raise UnknownPlugin(
                    f"unknown {self.kind} {name!r}; choose one of: {', '.join(known)}", name, known
                )
            if not entry.loaded:
                self._load(name, entry)
            if entry.error is not None:
                raise entry.error
            value: T = entry.value  # type: ignore[assignment]  # checked by _load
            return value

    def load_all(self) -> dict[str, T]:
        """Every entry that loads, by name; broken ones are logged (one line each) and skipped."""
        out: dict[str, T] = {}
        for name in self.names(hidden=True):
            try:
                out[name] = self.get(name)
            except PluginError as exc:
                log.warning("%s", exc)
        return out

    def errors(self) -> dict[str, str]:
        """The entries that failed to load so far, with their one-line reasons."""
        with self._lock:
            return {n: str(e.error) for n, e in self._entries.items() if e.error is not None}

    # -- loading --------------------------------------------------------------------------------

    def _discover(self) -> None:
        if self._discovered:
            return
        self._discovered = True
        try:
            points = list(entry_points(group=self.group or ""))
        except Exception as exc:  # pragma: no cover - metadata backend trouble
            log.debug("entry points of %s unavailable: %s", self.group, exc)
            return
        for point in points:
            if point.name in self._entries:
                log.warning(
                    "%s plug-in %r (%s) ignored: the name is taken",
                    self.kind,
                    point.name,
                    point.value,
                )
                continue
            source = f"entry point {point.group}:{point.name} = {point.value}"
            self._entries[point.name] = _Entry(source, point=point)

    def _load(self, name: str, entry: _Entry) -> None:
        entry.loaded = True
        extra = entry.builtin.extra if entry.builtin else None
        try:
            obj = entry.point.load() if entry.point else load_target(entry.source)
            entry.value = self._check(obj)
        except ImportError as exc:
            entry.error = self._import_error(name, entry, exc, extra)
        except Exception as exc:  # a broken plug-in must not break the others
            entry.error = PluginError(
                f"{self.kind} {name!r} ({entry.source}) is broken: {_one_line(exc)}"
            )
        if entry.error is not None:
            log.debug("%s", entry.error)

    def _import_error(
        self, name: str, entry: _Entry, exc: ImportError, extra: str | None
    ) -> PluginError:
        module = entry.source.partition(":")[0]
        missing = exc.name or ""
        own = missing and (module == missing or module.startswith(f"{missing}."))
        if extra and missing and not own:
            return MissingDependency(
                f"the {self.kind} {name!r} needs {missing.split('.')[0]}: {install_hint(extra)}"
            )
        return PluginError(f"{self.kind} {name!r} ({entry.source}) is broken: {_one_line(exc)}")


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."
