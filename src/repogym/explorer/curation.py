"""Curation settings of a hosted explorer: one JSON file plus an append-only audit log.

The admin app (:mod:`repogym.explorer.admin`) writes them; the public explorer reads them. The
two processes share the data folder (``--data DIR``), never code paths or memory:

- ``DIR/curation.json`` (:data:`SETTINGS_FILE`): the settings, replaced atomically (temp file +
  rename) under an exclusive lock, so a reader sees the old file or the new one, never half;
- ``DIR/curation-audit.jsonl`` (:data:`AUDIT_FILE`): one JSON line per change: who, what, when,
  the values before and after.

:class:`CurationReader` is what the public side asks (``hidden(env)``, ``pinned()``,
``visible(ids)``, ``runs_refusal(env)``, …): it stats the file at most once a second and
re-reads it when its mtime or size changed. A file that does not parse is reported
(:attr:`CurationReader.error`) and the last good settings stay in force. Standard library only.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from repogym.atomic import atomic_write

__all__ = [
    "AUDIT_FILE",
    "SETTINGS_FILE",
    "Banner",
    "CurationError",
    "CurationReader",
    "Settings",
    "SettingsFile",
    "read_audit",
]

log = logging.getLogger("repogym.explorer")

SETTINGS_FILE = "curation.json"
AUDIT_FILE = "curation-audit.jsonl"
LOCK_FILE = ".curation.lock"
MAX_IDS = 10_000
MAX_ID = 300
MAX_TEXT = 500
LIMIT_KEYS = ("max_concurrent", "per_hour", "time_limit_s", "budget_usd", "max_steps")


class CurationError(ValueError):
    """Settings that cannot be used (the message says which value and why)."""


@dataclass(frozen=True)
class Banner:
    """A site-wide notice: text and at most one link; visitors may close it."""

    text: str
    link: str = ""
    link_text: str = ""

    def to_json(self) -> dict[str, str]:
        return {"text": self.text, "link": self.link, "link_text": self.link_text}


def _ids(value: Any, what: str) -> list[str]:
    if not isinstance(value, list) or len(value) > MAX_IDS:
        raise CurationError(f"{what} must be a list of at most {MAX_IDS} ids")
    out: list[str] = []
    for v in value:
        if not isinstance(v, str) or not v.strip() or len(v) > MAX_ID or "\x00" in v:
            raise CurationError(f"{what}: ids are non-empty strings up to {MAX_ID} characters")
        if v.strip() not in out:
            out.append(v.strip())
    return out


def _link(value: Any) -> str:
    if value in (None, ""):
        return ""
    if not isinstance(value, str) or len(value) > 2000:
        raise CurationError("banner.link must be a URL string")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") and not (value.startswith("/") and not parts.netloc):
        raise CurationError("banner.link must be an http(s) URL or a path starting with /")
    return value


def _banner(value: Any) -> Banner | None:
    if value in (None, {}):
        return None
    if not isinstance(value, dict):
        raise CurationError("banner must be an object {text, link, link_text} or null")
    text = value.get("text")
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_TEXT:
        raise CurationError(f"banner.text must be 1 to {MAX_TEXT} characters")
    link_text = value.get("link_text") or ""
    if not isinstance(link_text, str) or len(link_text) > 100:
        raise CurationError("banner.link_text must be a string up to 100 characters")
    return Banner(text.strip(), _link(value.get("link")), link_text.strip())


def _limits(value: Any) -> dict[str, float]:
    if not isinstance(value, dict):
        raise CurationError("limits must be an object")
    out: dict[str, float] = {}
    for k, v in value.items():
        if k not in LIMIT_KEYS:
            raise CurationError(f"unknown limit {k!r} (limits: {', '.join(LIMIT_KEYS)})")
        if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
            raise CurationError(f"limit {k} must be a number ≥ 0")
        out[k] = v
    return out


@dataclass(frozen=True)
class Settings:
    """What admins decided. Ids are environment ids unless said otherwise."""

    hidden: tuple[str, ...] = ()
    pinned: tuple[str, ...] = ()
    """In the order they lead the home page."""
    featured: tuple[str, ...] = ()
    collections: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Name → dataset or OpenEnv server ids."""
    banner: Banner | None = None
    runs_enabled: bool = True
    runs_off: tuple[str, ...] = ()
    """Environments whose runs are off while runs are on."""
    limits: dict[str, float] = field(default_factory=dict)
    agents: tuple[str, ...] | None = None
    """The agents offered (None: the explorer's own choice)."""
    community_hidden: tuple[str, ...] = ()
    """Run ids taken off the community view."""
    stop: dict[str, float] = field(default_factory=dict)
    """Run id → when a stop was asked."""

    @classmethod
    def from_json(cls, obj: Any) -> Settings:
        """Validated settings; raises :class:`CurationError`."""
        if not isinstance(obj, dict):
            raise CurationError("the settings must be a JSON object")
        cols = obj.get("collections") or {}
        if not isinstance(cols, dict) or len(cols) > 1000:
            raise CurationError("collections must be an object name -> list of ids")
        for name in cols:
            if not name.strip() or len(name) > 100:
                raise CurationError("a collection name is 1 to 100 characters")
        runs = obj.get("runs") or {}
        if not isinstance(runs, dict) or not isinstance(runs.get("enabled", True), bool):
            raise CurationError("runs must be {enabled: true|false, off: [env ids]}")
        agents = obj.get("agents")
        stop = obj.get("stop") or {}
        if not isinstance(stop, dict) or not all(
            isinstance(t, int | float) and not isinstance(t, bool) for t in stop.values()
        ):
            raise CurationError("stop must be an object run id -> time")
        return cls(
            hidden=tuple(_ids(obj.get("hidden") or [], "hidden")),
            pinned=tuple(_ids(obj.get("pinned") or [], "pinned")),
            featured=tuple(_ids(obj.get("featured") or [], "featured")),
            collections={n: tuple(_ids(v, f"collection {n!r}")) for n, v in cols.items()},
            banner=_banner(obj.get("banner")),
            runs_enabled=bool(runs.get("enabled", True)),
            runs_off=tuple(_ids(runs.get("off") or [], "runs.off")),
            limits=_limits(obj.get("limits") or {}),
            agents=None if agents is None else tuple(_ids(agents, "agents")),
            community_hidden=tuple(_ids(obj.get("community_hidden") or [], "community_hidden")),
            stop={
                k: float(v) for k, v in zip(_ids(list(stop), "stop"), stop.values(), strict=True)
            },
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "hidden": list(self.hidden),
            "pinned": list(self.pinned),
            "featured": list(self.featured),
            "collections": {n: list(v) for n, v in self.collections.items()},
            "banner": self.banner.to_json() if self.banner else None,
            "runs": {"enabled": self.runs_enabled, "off": list(self.runs_off)},
            "limits": dict(self.limits),
            "agents": None if self.agents is None else list(self.agents),
            "community_hidden": list(self.community_hidden),
            "stop": dict(self.stop),
        }


def _changed(before: dict[str, Any], after: dict[str, Any]) -> tuple[dict, dict]:
    keys = [k for k in after if before.get(k) != after.get(k)]
    return {k: before.get(k) for k in keys}, {k: after[k] for k in keys}


class SettingsFile:
    """The writer: read, change and replace the settings (atomic), logging each change."""

    def __init__(self, data_dir: Path | str) -> None:
        self.dir = Path(data_dir)
        self.path = self.dir / SETTINGS_FILE
        self.audit_path = self.dir / AUDIT_FILE

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def read(self) -> Settings:
        """The settings on disk (defaults when there is no file); raises
        :class:`CurationError` for a file that does not parse."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return Settings()
        try:
            obj = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise CurationError(f"{self.path}: not valid JSON ({exc})") from None
        return Settings.from_json(obj)

    def change(self, who: str, action: str, edit: Callable[[dict[str, Any]], None]) -> Settings:
        """Apply ``edit`` to the settings' JSON form, validate, write atomically and append
        one audit line (who, action, when, before, after). A refused edit changes nothing."""
        with self._locked():
            current = self.read().to_json()
            proposed = copy.deepcopy(current)
            edit(proposed)
            new = Settings.from_json(proposed)
            after_json = new.to_json()
            before, after = _changed(current, after_json)
            text = json.dumps(after_json, ensure_ascii=False, indent=1, sort_keys=True)
            atomic_write(self.path, text + "\n", mode=0o644)
            entry = {
                "at": round(time.time(), 3),
                "who": who,
                "action": action,
                "before": before,
                "after": after,
            }
            line = json.dumps(entry, ensure_ascii=False, sort_keys=True) + "\n"
            fd = os.open(self.audit_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode())
                os.fsync(fd)
            finally:
                os.close(fd)
            return new


def read_audit(data_dir: Path | str, last: int | None = None) -> list[dict[str, Any]]:
    """The audit log's entries, oldest first (the ``last`` ones when given); a torn line is
    skipped."""
    path = Path(data_dir) / AUDIT_FILE
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines[-last:] if last else lines:
        with contextlib.suppress(ValueError):
            out.append(json.loads(line))
    return out


class CurationReader:
    """The public side's view of the settings, re-read when the file changes.

    Each question costs at most one ``stat`` per ``interval`` seconds; a changed file is read
    and validated, and when it does not parse the last good settings stay in force
    (:attr:`error` says why, until a good file replaces it)."""

    def __init__(self, data_dir: Path | str, *, interval: float = 1.0) -> None:
        self.file = SettingsFile(data_dir)
        self.interval = interval
        self.error: str | None = None
        self._settings = Settings()
        self._sig: tuple[int, int] | None = None
        self._checked = float("-inf")
        self._revision = 0
        self._lock = threading.Lock()
        self.refresh(force=True)

    @property
    def revision(self) -> int:
        """Grows each time new settings are taken in (part of the explorer's cache keys)."""
        self.settings()
        return self._revision

    def refresh(self, *, force: bool = False) -> Settings:
        now = time.monotonic()
        with self._lock:
            if not force and now - self._checked < self.interval:
                return self._settings
            self._checked = now
            try:
                st = os.stat(self.file.path)
                sig: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
            except FileNotFoundError:
                sig = None
            if sig == self._sig and not force:
                return self._settings
            try:
                fresh = self.file.read()
            except (CurationError, OSError) as exc:
                if sig != self._sig or self.error is None:
                    log.warning("curation settings ignored, the last good ones stay: %s", exc)
                self.error = str(exc)
                self._sig = sig
                return self._settings
            self._sig, self.error = sig, None
            if fresh != self._settings:
                self._settings = fresh
                self._revision += 1
            return self._settings

    def settings(self) -> Settings:
        """The settings in force."""
        return self.refresh()

    # -- questions the explorer asks

    def hidden(self, env_id: str) -> bool:
        return env_id in self.settings().hidden

    def hidden_ids(self) -> frozenset[str]:
        return frozenset(self.settings().hidden)

    def visible(self, env_ids: Iterable[str]) -> list[str]:
        """``env_ids`` without the hidden ones, order kept."""
        hidden = self.hidden_ids()
        return [e for e in env_ids if e not in hidden]

    def pinned(self) -> list[str]:
        """Pinned environments that are not hidden, in their order."""
        return self.visible(self.settings().pinned)

    def featured(self) -> list[str]:
        return self.visible(self.settings().featured)

    def collections(self) -> dict[str, list[str]]:
        return {n: self.visible(v) for n, v in self.settings().collections.items()}

    def banner(self) -> Banner | None:
        return self.settings().banner

    def runs_refusal(self, env_id: str | None = None) -> str | None:
        """Why runs are refused (globally, or for ``env_id``), or None when allowed."""
        s = self.settings()
        if not s.runs_enabled:
            return "runs are turned off on this explorer"
        if env_id is not None and (env_id in s.runs_off or env_id in s.hidden):
            return f"runs are turned off for {env_id}"
        return None

    def limits(self) -> dict[str, float]:
        return dict(self.settings().limits)

    def agents(self) -> list[str] | None:
        agents = self.settings().agents
        return None if agents is None else list(agents)

    def rollout_hidden(self, run_id: str) -> bool:
        """Whether a run was taken off the community view."""
        return run_id in self.settings().community_hidden

    def stop_requests(self) -> dict[str, float]:
        """Run id → when its stop was asked."""
        return dict(self.settings().stop)
