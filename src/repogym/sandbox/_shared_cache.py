"""The shared environment cache: built layers and bootstrap recipes in one place every node of a
cluster reaches, so a cluster builds each repository's environment once.

Set ``REPOGYM_SHARED_CACHE`` (or ``repogym --shared-cache URL …``) to any ``fsspec`` URL — a
shared folder (``file:///shared/cache`` or a plain path), object storage (``s3://bucket/prefix``,
``gs://…``, with that protocol's fsspec package installed), ``memory://…`` in tests. Unset,
nothing here runs: :func:`from_env` returns ``None`` and no hook calls further (``fsspec`` is
not even imported).

Layout under the URL::

    layers/<key>.tar                       one build layer (:mod:`._layertar`), keyed like
                                           Docker's build cache (:func:`._layers.step_key`)
    blobs/sha256/<hex>                     an image blob a node pulled (a base image's layer,
                                           a task's published image): checked against its
                                           digest when read, so each is pulled once
    recipes/<repo>/<ref>/<hash>.json       a bootstrap recipe and its check outcome
                                           (the same path as under the local recipe cache)

Every file is written under a temporary name (``.tmp-…``) and moved into place once complete,
so readers never see half a file; a layer already there is not uploaded again (the same key
means the same content). The local builder asks the shared cache only for a step missing from
the local cache: a hit is downloaded and unpacked with the same safety as local layers (see
:mod:`._layertar`), a miss is built here and uploaded. A file that turns out truncated or
corrupt is ignored with a warning (the step is rebuilt here and the file replaced); an
unreachable store is a warning too, never a failed build. The shared cache is trusted like the
local one: whoever can write to it decides what later builds unpack.

Counts of hits, misses, uploads and errors are kept in ``shared-cache.json`` in the local cache
root (:func:`read_stats`; ``repogym cluster status`` shows them per node).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import posixpath
import secrets
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repogym._secrets import redact_url
from repogym.atomic import atomic_write

if TYPE_CHECKING:
    from repogym.sandbox._layers import LayerStore

ENV_VAR = "REPOGYM_SHARED_CACHE"
STATS_FILE = "shared-cache.json"
SECTIONS = ("layers", "recipes", "images")
EVENTS = ("hits", "misses", "uploads", "errors")
FSSPEC_HINT = "the shared cache needs fsspec: pip install 'repogym[ray]'"

_log = logging.getLogger("repogym.shared_cache")
_warned: set[str] = set()


class SharedCacheError(ValueError):
    """The shared cache URL cannot be used (one line)."""


def configured_url() -> str | None:
    """``$REPOGYM_SHARED_CACHE`` (None when unset or empty)."""
    return os.environ.get(ENV_VAR, "").strip() or None


def shown_url() -> str | None:
    """:func:`configured_url` fit to print (a password in it removed)."""
    url = configured_url()
    return redact_url(url) if url else None


def check_url(url: str) -> tuple[Any, str]:
    """``(filesystem, base path)`` of ``url``, or :class:`SharedCacheError` saying why not."""
    try:
        import fsspec.core
    except ImportError:
        raise SharedCacheError(FSSPEC_HINT) from None
    try:
        fs, base = fsspec.core.url_to_fs(url)
    except ImportError as exc:  # e.g. s3:// without s3fs
        raise SharedCacheError(f"shared cache {redact_url(url)}: {exc}") from None
    except (ValueError, TypeError, OSError) as exc:
        first = (str(exc).splitlines() or [""])[0]
        raise SharedCacheError(f"shared cache {redact_url(url)}: {first}") from None
    return fs, str(base).rstrip("/")


def use(url: str) -> None:
    """Check ``url`` and make it this process's (and its Ray workers') shared cache."""
    check_url(url)
    os.environ[ENV_VAR] = url


def forwarded_env() -> dict[str, str]:
    """The variables a remote worker needs to use this process's shared cache."""
    url = configured_url()
    return {ENV_VAR: url} if url else {}


def from_env(stats_root: Path) -> SharedCache | None:
    """The shared cache ``$REPOGYM_SHARED_CACHE`` names (None when unset). A URL that cannot be
    used is a warning (once per process), never a failure: builds then stay local."""
    url = configured_url()
    if url is None:
        return None
    try:
        return SharedCache(url, stats_root)
    except SharedCacheError as exc:
        if url not in _warned:
            _warned.add(url)
            _log.warning("%s; building without it", exc)
        return None


# ------------------------------------------------------------------------------------ stats


def read_stats(root: Path) -> dict[str, Any]:
    """The counters kept in ``root`` (zeros when there are none)."""
    stats: dict[str, Any] = {s: dict.fromkeys(EVENTS, 0) for s in SECTIONS}
    stats.update(last_error=None, updated=None)
    try:
        data = json.loads((root / STATS_FILE).read_text())
    except (OSError, ValueError):
        return stats
    if isinstance(data, dict):
        for section in SECTIONS:
            got = data.get(section)
            for event in EVENTS:
                value = got.get(event) if isinstance(got, dict) else None
                if isinstance(value, int):
                    stats[section][event] = value
        stats["last_error"] = data.get("last_error")
        stats["updated"] = data.get("updated")
    return stats


def _bump(root: Path, section: str, event: str, error: str | None = None) -> None:
    with contextlib.suppress(OSError):
        root.mkdir(parents=True, exist_ok=True)
        fd = os.open(root / f".{STATS_FILE}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            stats = read_stats(root)
            stats[section][event] += 1
            if error is not None:
                stats["last_error"] = error[:300]
            stats["updated"] = time.time()
            atomic_write(root / STATS_FILE, json.dumps(stats, indent=1, sort_keys=True))
        finally:
            os.close(fd)


# ------------------------------------------------------------------------------------ cache


class SharedCache:
    """Layers and small files under one fsspec URL; ``stats_root`` is the local cache root."""

    def __init__(self, url: str, stats_root: Path) -> None:
        self.url = url
        self.fs, self.base = check_url(url)
        self.stats_root = stats_root
        self._corrupt: set[str] = set()

    def _path(self, *parts: str) -> str:
        return posixpath.join(self.base, *parts) if self.base else posixpath.join(*parts)

    def _problem(self, section: str, message: str) -> None:
        _log.warning("shared cache %s: %s", redact_url(self.url), message)
        _bump(self.stats_root, section, "errors", message)

    def _write(self, final: str, write: Callable[[Any], object]) -> None:
        """Write ``final`` through a temporary name moved into place once complete."""
        parent = posixpath.dirname(final)
        name = posixpath.basename(final)
        tmp = posixpath.join(parent, f".tmp-{name}-{os.getpid()}-{secrets.token_hex(4)}")
        with contextlib.suppress(OSError, NotImplementedError):
            self.fs.makedirs(parent, exist_ok=True)
        try:
            with self.fs.open(tmp, "wb") as fh:
                write(fh)
            self.fs.mv(tmp, final)
        except BaseException:
            with contextlib.suppress(Exception):
                self.fs.rm(tmp)
            raise

    # -- layers

    def layer_path(self, key: str) -> str:
        return self._path("layers", f"{key}.tar")

    def fetch_layer(self, store: LayerStore, key: str) -> bool:
        """Put layer ``key`` into ``store`` from the shared cache (call under the store's
        lock for ``key``, when the store lacks it). False: not there, or unusable (warned)."""
        from repogym.sandbox import _layertar

        path = self.layer_path(key)
        try:
            if not self.fs.exists(path):
                _bump(self.stats_root, "layers", "misses")
                return False
        except Exception as exc:  # noqa: BLE001 - any store failure is a miss, warned
            self._problem("layers", f"cannot look up layer {key[:12]} ({_why(exc)})")
            return False
        tmp = store.new_tmp(key)
        try:
            with self.fs.open(path, "rb") as fh:
                _layertar.unpack_layer(fh, tmp, key)
            try:
                os.rename(tmp, store.path(key))
            except OSError:
                store.discard(tmp)  # committed meanwhile by a builder without our lock
        except Exception as exc:  # noqa: BLE001 - corrupt, truncated, unreachable: rebuild
            store.discard(tmp)
            self._corrupt.add(key)
            self._problem("layers", f"layer {key[:12]} is unusable ({_why(exc)}); rebuilding it")
            return False
        _bump(self.stats_root, "layers", "hits")
        return True

    def put_layer(self, store: LayerStore, key: str) -> bool:
        """Upload layer ``key`` of ``store`` unless the shared cache has it (a copy found
        corrupt by :meth:`fetch_layer` is replaced). Failures are warnings."""
        from repogym.sandbox import _layertar

        path = self.layer_path(key)
        try:
            if key not in self._corrupt and self.fs.exists(path):
                return False
            self._write(path, lambda fh: _layertar.pack_layer(store.path(key), key, fh))
        except Exception as exc:  # noqa: BLE001 - the build succeeded; sharing it did not
            self._problem("layers", f"cannot upload layer {key[:12]} ({_why(exc)})")
            return False
        self._corrupt.discard(key)
        _bump(self.stats_root, "layers", "uploads")
        return True

    # -- image blobs (content-addressed: pulled once per cluster)

    def blob_path(self, digest: str) -> str:
        return self._path("blobs", "sha256", digest.split(":", 1)[1])

    def fetch_blob(self, digest: str, dest: Path) -> bool:
        """Copy blob ``digest`` to ``dest`` when the shared cache has it with the right bytes;
        False (``dest`` removed) otherwise: the caller asks the registry."""
        import hashlib

        try:
            if not self.fs.exists(self.blob_path(digest)):
                _bump(self.stats_root, "images", "misses")
                return False
            h = hashlib.sha256()
            with self.fs.open(self.blob_path(digest), "rb") as src, open(dest, "wb") as out:
                while chunk := src.read(1 << 20):
                    h.update(chunk)
                    out.write(chunk)
        except Exception as exc:  # noqa: BLE001 - unreachable store: a miss, warned
            dest.unlink(missing_ok=True)
            self._problem("images", f"cannot read blob {digest[:19]} ({_why(exc)})")
            return False
        if "sha256:" + h.hexdigest() != digest:
            dest.unlink(missing_ok=True)
            self._corrupt.add(digest)
            self._problem("images", f"blob {digest[:19]} is corrupt; pulling it again")
            return False
        _bump(self.stats_root, "images", "hits")
        return True

    def put_blob(self, digest: str, path: Path) -> bool:
        """Upload blob ``digest`` (the verified file ``path``) unless the shared cache has it
        (a copy found corrupt is replaced). Failures are warnings."""
        target = self.blob_path(digest)
        try:
            if digest not in self._corrupt and self.fs.exists(target):
                return False
            with open(path, "rb") as src:
                self._write(target, lambda fh: shutil.copyfileobj(src, fh, 1 << 20))
        except Exception as exc:  # noqa: BLE001 - the pull succeeded; sharing it did not
            self._problem("images", f"cannot upload blob {digest[:19]} ({_why(exc)})")
            return False
        self._corrupt.discard(digest)
        _bump(self.stats_root, "images", "uploads")
        return True

    # -- small files (bootstrap recipes)

    def fetch_file(
        self, rel: str, dest: Path, parse: Callable[[bytes], object | None], section: str
    ) -> bool:
        """Copy shared file ``rel`` to ``dest`` when ``parse(bytes)`` accepts it (returns a
        value). ``parse`` returning None is a miss (e.g. written by other code); raising is
        a corrupt file (warned)."""
        try:
            with self.fs.open(self._path(rel), "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            _bump(self.stats_root, section, "misses")
            return False
        except Exception as exc:  # noqa: BLE001 - unreachable store: a miss, warned
            self._problem(section, f"cannot read {rel} ({_why(exc)})")
            return False
        try:
            ok = parse(data) is not None
        except Exception as exc:  # noqa: BLE001 - corrupt file: ignored
            self._problem(section, f"{rel} is unusable ({_why(exc)}); ignoring it")
            return False
        if not ok:
            _bump(self.stats_root, section, "misses")
            return False
        atomic_write(dest, data)
        _bump(self.stats_root, section, "hits")
        return True

    def list_files(self, rel_dir: str) -> list[str]:
        """Names of the files in shared folder ``rel_dir`` (empty when absent/unreachable)."""
        try:
            found = self.fs.ls(self._path(rel_dir), detail=False)
        except FileNotFoundError:
            return []
        except Exception as exc:  # noqa: BLE001 - unreachable store: nothing listed
            self._problem("recipes", f"cannot list {rel_dir} ({_why(exc)})")
            return []
        names = [posixpath.basename(str(p).rstrip("/")) for p in found]
        return sorted(n for n in names if not n.startswith("."))

    def put_file(self, rel: str, data: bytes, section: str) -> bool:
        """Upload (replace) shared file ``rel``. Failures are warnings."""
        try:
            self._write(self._path(rel), lambda fh: fh.write(data))
        except Exception as exc:  # noqa: BLE001 - the local copy is written; sharing failed
            self._problem(section, f"cannot upload {rel} ({_why(exc)})")
            return False
        _bump(self.stats_root, section, "uploads")
        return True


def _why(exc: BaseException) -> str:
    first = (str(exc).splitlines() or [""])[0][:200]
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
