"""Where units of work run: threads on this machine (``local``) or tasks on a Ray cluster.

A unit of work is a :class:`Work`: a module-level function and its (picklable) arguments, with
the resources it asks for (from a task's ``[environment]``: cpus, memory). An executor runs many
and yields a :class:`Done` for each as it finishes, in completion order. The caller — the
driver — alone writes task folders, reports and job records; work functions return data.

``RayExecutor`` connects to an existing cluster (``ray.init(address=…)``; Ray is imported only
here, inside the methods). Each unit becomes a Ray task with ``num_cpus``/``memory`` from its
request; it runs on whichever node has room, with that node's sandbox backend and environment
cache. A worker that dies (the process is killed, the node goes away) is retried by Ray on
another worker up to ``retries`` times; then the unit is a :class:`Done` with an ``error``
naming the reason. An exception raised by the work function itself is not retried (it would
fail the same way): it comes back as the ``error``.

Secrets never travel in a task's arguments: the executor's ``env`` (API keys, ``--pass-env``
values) becomes each Ray task's ``runtime_env`` environment variables, where the work function
reads them (also when this process was already connected to the cluster).

Large inputs shared by many units (a task folder packed as an archive) go through
:meth:`Executor.put` once: a reference into Ray's object store (the value itself, locally) that
the work function resolves with :func:`fetch`.
"""

from __future__ import annotations

import os
import socket
import traceback
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from repogym.errors import RepogymError
from repogym.plugins import PluginError, Registry, UnknownPlugin, callable_check
from repogym.sandbox import interrupt_sandboxes, resume_sandboxes

__all__ = [
    "Done",
    "Executor",
    "ExecutorError",
    "LocalExecutor",
    "RayExecutor",
    "Work",
    "fetch",
    "get_executor",
]

FORWARDED = ("REPOGYM_BUILD_SEED", "SOURCE_DATE_EPOCH")
"""Variables of the driver that workers get too, so their output is the driver's (integrity keys
and build times of generated tasks; see :func:`repogym.pipelines._harness.emit.integrity_key`)."""
RAY_HINT = "the Ray executor needs Ray: pip install 'repogym[ray]'"


class ExecutorError(RepogymError, ValueError):
    """The executor cannot be used (Ray missing, cluster unreachable): one line, exit 2."""


@dataclass(frozen=True)
class Work:
    """One unit: ``fn(*args)`` on some worker. ``fn`` must be a module-level function."""

    key: str
    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    cpus: float = 1.0
    memory_mb: int | None = None


@dataclass
class Done:
    """A finished unit: its value, or the one-line reason it failed."""

    key: str
    value: Any = None
    error: str | None = None
    node: str = ""
    attempts: int = 1
    detail: str = field(default="", repr=False)
    """The traceback of an error raised by the work function, when there is one."""

    @property
    def ok(self) -> bool:
        return self.error is None


class Executor(Protocol):
    name: str

    def map(self, work: Iterable[Work], *, parallel: int | None = None) -> Iterator[Done]:
        """Run every unit (at most ``parallel`` at once where that is the executor's to
        decide); yield each as it finishes."""
        ...

    def put(self, value: Any) -> Any:
        """A handle to ``value`` that many units can share (stored once); :func:`fetch`
        reads it in the work function."""
        ...

    def close(self) -> None: ...


def fetch(handle: Any) -> Any:
    """The value behind a handle from :meth:`Executor.put`, in a work function: a Ray object
    reference is read from the object store, anything else is the value itself."""
    import sys

    ray = sys.modules.get("ray")
    if ray is not None and isinstance(handle, ray.ObjectRef):
        return ray.get(handle)
    return handle


def _node() -> str:
    """The node a unit ran on: Ray's node id inside a Ray worker, else the host name."""
    import sys

    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        try:
            return str(ray.get_runtime_context().get_node_id())
        except Exception:  # noqa: BLE001 - not in a worker: fall back to the host
            pass
    return socket.gethostname()


def _call(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[bool, Any, str, str]:
    """Run ``fn(*args)``: (ok, value or one-line error, traceback, node)."""
    try:
        return True, fn(*args), "", _node()
    except Exception as exc:  # noqa: BLE001 - handed back to the driver as data
        first = (str(exc).splitlines() or [""])[0]
        return False, f"{type(exc).__name__}: {first}", traceback.format_exc(), _node()


class LocalExecutor:
    """Threads on this machine (today's behaviour): ``parallel`` units at once."""

    name = "local"

    def __init__(self, jobs: int = 1) -> None:
        self.jobs = max(1, jobs)

    def map(self, work: Iterable[Work], *, parallel: int | None = None) -> Iterator[Done]:
        limit = max(1, parallel or self.jobs)
        stopped = False
        try:
            with ThreadPoolExecutor(max_workers=limit) as pool:
                pending: dict[Future[tuple[bool, Any, str, str]], str] = {}
                try:
                    for unit in work:
                        while len(pending) >= limit:
                            yield from self._finished(pending)
                        pending[pool.submit(_call, unit.fn, unit.args)] = unit.key
                    while pending:
                        yield from self._finished(pending)
                except KeyboardInterrupt:
                    # Ctrl-C or SIGTERM (the command line turns it into this): the running
                    # units lose their sandboxes now (the pool would otherwise wait for each
                    # to finish its commands) and no other starts.
                    pool.shutdown(wait=False, cancel_futures=True)
                    if pending:
                        stopped = True
                        interrupt_sandboxes()
                    raise
        finally:
            if stopped:
                resume_sandboxes()

    @staticmethod
    def _finished(pending: dict[Future[tuple[bool, Any, str, str]], str]) -> Iterator[Done]:
        done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
        for fut in done:
            key = pending.pop(fut)
            ok, value, tb, node = fut.result()
            yield Done(key, value if ok else None, None if ok else value, node, detail=tb)

    def put(self, value: Any) -> Any:
        return value

    def close(self) -> None:
        return None


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ExecutorError(RAY_HINT) from None
    return ray


class RayExecutor:
    """Ray tasks on an existing cluster (or a local one for ``address="local"``)."""

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        *,
        retries: int = 2,
        env: dict[str, str] | None = None,
        connect_timeout_s: float = 30.0,
    ) -> None:
        target = address or os.environ.get("RAY_ADDRESS") or "auto"
        _token_auth(target)  # read by Ray when it is imported
        ray = _import_ray()
        self.ray = ray
        self.retries = retries
        # Per task (not only at ray.init): a process already connected gets it too.
        self._runtime_env = {"env_vars": dict(env)} if env else None
        if not ray.is_initialized():
            if target not in ("auto", "local") and not _reachable(target, connect_timeout_s):
                raise ExecutorError(f"--ray-address {target}: no Ray cluster answers there")
            _connect(ray, target)
        self._remote = ray.remote(_call)

    def map(self, work: Iterable[Work], *, parallel: int | None = None) -> Iterator[Done]:
        """``parallel``: at most that many units in flight, the next one taken from ``work``
        only when one has finished (a lazy ``work`` can then depend on what finished); None:
        every unit submitted at once. Units still running when the caller stops (an error,
        Ctrl-C) are cancelled."""
        ray = self.ray
        refs: dict[Any, str] = {}
        units = iter(work)
        room = max(1, parallel) if parallel else None
        try:
            while True:
                while room is None or len(refs) < room:
                    unit = next(units, None)
                    if unit is None:
                        room = len(refs)  # nothing more to submit
                        break
                    opts: dict[str, Any] = {"num_cpus": unit.cpus, "max_retries": self.retries}
                    if unit.memory_mb:
                        opts["memory"] = int(unit.memory_mb) * 1024 * 1024
                    if self._runtime_env:
                        opts["runtime_env"] = self._runtime_env
                    refs[self._remote.options(**opts).remote(unit.fn, unit.args)] = unit.key
                if not refs:
                    return
                yield from self._finished(refs)
        finally:
            for ref in refs:
                ray.cancel(ref)

    def _finished(self, refs: dict[Any, str]) -> Iterator[Done]:
        """Wait for one of ``refs`` to finish; yield it (and any other ready) as Done."""
        ray = self.ray
        ready, _ = ray.wait(list(refs), num_returns=1)
        for ref in ready:
            key = refs.pop(ref)
            try:
                ok, value, tb, node = ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - a worker or node died past the retries
                first = (str(exc).splitlines() or [""])[0]
                yield Done(
                    key,
                    error=f"worker lost after {self.retries + 1} attempts: "
                    f"{type(exc).__name__}: {first}"[:500],
                    attempts=self.retries + 1,
                )
                continue
            yield Done(key, value if ok else None, None if ok else value, node, detail=tb)

    def put(self, value: Any) -> Any:
        return self.ray.put(value)

    def close(self) -> None:
        return None  # the connection is the process's; ray.shutdown() would end a local cluster


def _token_available() -> bool:
    """Whether this machine holds a Ray cluster token (Ray's own places for it)."""
    if os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return True
    return (Path.home() / ".ray" / "auth_token").is_file()


def _token_auth(target: str) -> None:
    """Ray sends its cluster token for an explicit address only with ``RAY_AUTH_MODE=token``
    (a cluster found with ``auto`` gets it anyway), read when Ray is imported. When that is
    unset and this machine holds a token, set it: a cluster without token authentication
    accepts such a client too."""
    explicit = target not in ("auto", "local")
    if explicit and "RAY_AUTH_MODE" not in os.environ and _token_available():
        os.environ["RAY_AUTH_MODE"] = "token"


def _connect(ray: Any, target: str) -> None:
    """``ray.init`` for ``target``; a failure is one line."""
    try:
        ray.init(
            address=None if target == "local" else target,
            log_to_driver=False,
            include_dashboard=False,
            logging_level="ERROR",
            configure_logging=False,
        )
    except (ConnectionError, RuntimeError, ValueError) as exc:
        first = (str(exc).splitlines() or ["no answer"])[0]
        hint = ""
        if os.environ.get("RAY_AUTH_MODE") == "token":
            hint = " (is RAY_AUTH_TOKEN, or ~/.ray/auth_token, the cluster's token?)"
        raise ExecutorError(
            f"cannot connect to the Ray cluster at {target}: {first}{hint}"
        ) from None


def _reachable(address: str, timeout_s: float) -> bool:
    """Whether ``host:port`` (a GCS address; ``ray://`` client URLs included) accepts a TCP
    connection: an unreachable cluster is said at once, not after Ray's own long retries."""
    target = address.removeprefix("ray://")
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        return True  # not host:port: let Ray judge it
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=min(timeout_s, 5)):
            return True
    except OSError:
        return False


def _local(jobs: int, address: str | None, env: dict[str, str] | None) -> Executor:
    return LocalExecutor(jobs)


def _ray(jobs: int, address: str | None, env: dict[str, str] | None) -> Executor:
    from repogym.sandbox.shared_cache import forwarded_env

    same = {k: os.environ[k] for k in FORWARDED if os.environ.get(k)}
    return RayExecutor(address, env={**forwarded_env(), **same, **(env or {})} or None)


ExecutorFactory = Callable[[int, str | None, dict[str, str] | None], Executor]


EXECUTORS: Registry[ExecutorFactory] = Registry(
    "executor",
    group="repogym.executors",
    builtins={"local": _local, "ray": _ray},
    check=callable_check("an executor factory"),
)
"""Executor names → ``factory(jobs, address, env)``; plug-ins: the ``repogym.executors`` group."""


def get_executor(
    name: str, *, jobs: int = 1, address: str | None = None, env: dict[str, str] | None = None
) -> Executor:
    """``local`` (threads, ``jobs`` at once) or ``ray`` (the cluster at ``address``; default
    ``$RAY_ADDRESS`` or ``auto``). ``env``: secrets for the workers' environment; this
    process's shared environment cache (``$REPOGYM_SHARED_CACHE``) and reproducible-build
    settings (:data:`FORWARDED`) go along."""
    try:
        factory = EXECUTORS.get(name)
    except UnknownPlugin:
        raise ExecutorError(f"unknown executor {name!r}: use local or ray") from None
    except PluginError as exc:
        raise ExecutorError(str(exc)) from None
    return factory(jobs, address, env)
