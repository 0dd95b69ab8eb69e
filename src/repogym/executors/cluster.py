"""What a Ray cluster offers repogym (``repogym cluster status``): its nodes and, on each live
node, what work scheduled there will find.

The driver lists the nodes from Ray (address, alive, CPUs and memory, total and free) and runs
one tiny task pinned to each live node (``NodeAffinitySchedulingStrategy``, ``soft=False``,
no CPU asked, so a busy node answers too). :func:`probe_node` reports, from inside the node:
the sandbox backend it would use (``local`` when bubblewrap is usable, ``docker`` when an engine
answers), the Python and repogym versions, the local cache root and its size, and the shared
environment cache's URL and counters (:mod:`repogym.sandbox.shared_cache`). A node that does
not answer within the timeout is reported as such, never waited for forever.

Ray is imported only inside the functions (``repogym[ray]``).
"""

from __future__ import annotations

import os
import platform
import socket
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from repogym.executors import ExecutorError, RayExecutor, _reachable

__all__ = ["ClusterStatus", "NodeStatus", "cluster_status", "probe_node"]

RAY_HINT = "repogym cluster needs Ray: pip install 'repogym[ray]'"
PROBE_TIMEOUT_S = 60.0
SIZE_BUDGET_S = 2.0
"""Measuring a node's cache stops after this long (the size is then a lower bound)."""


@dataclass
class NodeStatus:
    node_id: str
    address: str
    alive: bool
    head: bool = False
    cpus: float = 0.0
    cpus_free: float | None = None
    memory_bytes: int = 0
    memory_free_bytes: int | None = None
    probe: dict[str, Any] | None = None
    """What :func:`probe_node` reported there (None: not alive or no answer)."""
    problems: list[str] = field(default_factory=list)

    @property
    def short_id(self) -> str:
        return self.node_id[:12]


@dataclass
class ClusterStatus:
    address: str
    repogym: str
    python: str
    nodes: list[NodeStatus]

    @property
    def ok(self) -> bool:
        """Every live node answered and has what work needs."""
        return all(not n.problems for n in self.nodes if n.alive)

    def to_json(self) -> dict[str, Any]:
        alive = [n for n in self.nodes if n.alive]
        return {
            "address": self.address,
            "repogym": self.repogym,
            "python": self.python,
            "ok": self.ok,
            "summary": {
                "nodes": len(self.nodes),
                "alive": len(alive),
                "cpus": sum(n.cpus for n in alive),
                "cpus_free": sum(n.cpus_free or 0 for n in alive),
            },
            "nodes": [{**asdict(n), "short_id": n.short_id} for n in self.nodes],
        }


# ---------------------------------------------------------------------------- on the node


def _backends() -> dict[str, dict[str, Any]]:
    """Which sandbox backends work here (the existing availability checks, nothing installed)."""
    from repogym.sandbox.docker import DockerSandbox
    from repogym.sandbox.local import LocalSandbox

    out: dict[str, dict[str, Any]] = {}
    for name, check in (
        ("local", lambda: LocalSandbox.available(install=False)),
        ("docker", DockerSandbox.available),
    ):
        try:
            ok, why = check()
        except Exception as exc:  # noqa: BLE001 - a broken check is "not available"
            ok, why = False, f"{type(exc).__name__}: {exc}"
        out[name] = {"ok": bool(ok), "why": (str(why).splitlines() or [""])[0]}
    return out


def tree_size(root: Path, budget_s: float = SIZE_BUDGET_S) -> tuple[int, bool]:
    """Bytes of the regular files under ``root`` (symlinks not followed, hard links once) and
    whether the count is complete (False: stopped after ``budget_s``)."""
    deadline = time.monotonic() + budget_s
    total = 0
    seen: set[tuple[int, int]] = set()
    stack = [root]
    while stack:
        if time.monotonic() > deadline:
            return total, False
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))
            elif entry.is_file(follow_symlinks=False):
                if st.st_nlink > 1:
                    ident = (st.st_dev, st.st_ino)
                    if ident in seen:
                        continue
                    seen.add(ident)
                total += st.st_size
    return total, True


def _shared(cache_root: Path) -> dict[str, Any]:
    from repogym.sandbox import shared_cache

    url = shared_cache.configured_url()
    usable, why = url is not None, ""
    if url is not None:
        try:
            shared_cache.check_url(url)
        except shared_cache.SharedCacheError as exc:
            usable, why = False, str(exc)
    shown = shared_cache.shown_url()
    return {"url": shown, "usable": usable, "why": why, **shared_cache.read_stats(cache_root)}


def probe_node() -> dict[str, Any]:
    """What work scheduled on this node finds here (runs inside a Ray task on the node)."""
    import repogym
    from repogym.sandbox import default_cache_root

    backends = _backends()
    root = default_cache_root()
    size, complete = tree_size(root) if root.is_dir() else (0, True)
    return {
        "hostname": socket.gethostname(),
        "python": platform.python_version(),
        "repogym": repogym.__version__,
        "sandbox": next((name for name, b in backends.items() if b["ok"]), None),
        "backends": backends,
        "cache_root": str(root),
        "cache_bytes": size,
        "cache_size_complete": complete,
        "shared_cache": _shared(root),
    }


# ---------------------------------------------------------------------------- the driver


def _connect(address: str | None) -> Any:
    try:
        import ray  # noqa: F401 - only to say clearly that it is missing
    except ImportError:
        raise ExecutorError(RAY_HINT) from None
    target = address or os.environ.get("RAY_ADDRESS") or "auto"
    if target not in ("auto", "local") and not _reachable(target, 5.0):
        raise ExecutorError(f"--ray-address {target}: no Ray cluster answers there")
    return RayExecutor(address).ray


def _problems(node: NodeStatus, here: dict[str, str]) -> list[str]:
    probe = node.probe or {}
    out = []
    if probe.get("sandbox") is None:
        whys = "; ".join(f"{k}: {v['why']}" for k, v in probe.get("backends", {}).items())
        out.append(f"no sandbox backend ({whys})")
    if probe.get("repogym") != here["repogym"]:
        out.append(f"repogym {probe.get('repogym')} here, {here['repogym']} on the driver")
    if probe.get("python", "").rsplit(".", 1)[0] != here["python"].rsplit(".", 1)[0]:
        out.append(f"Python {probe.get('python')} here, {here['python']} on the driver")
    shared = probe.get("shared_cache") or {}
    if shared.get("url") and not shared.get("usable"):
        out.append(f"shared cache unusable: {shared.get('why')}")
    return out


def cluster_status(
    address: str | None = None, *, timeout_s: float = PROBE_TIMEOUT_S
) -> ClusterStatus:
    """Connect to the cluster at ``address`` (default ``$RAY_ADDRESS``, else ``auto``), list
    its nodes and probe each live one. Raises :class:`ExecutorError` (one line) when Ray is
    missing or no cluster answers."""
    ray = _connect(address)
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    import repogym

    here = {"repogym": repogym.__version__, "python": platform.python_version()}
    try:
        from ray._private import state as ray_state

        free: dict[str, dict[str, float]] = ray_state.available_resources_per_node()
    except Exception:  # noqa: BLE001 - a private API: free resources are then unknown
        free = {}
    nodes: list[NodeStatus] = []
    for raw in ray.nodes():
        res = raw.get("Resources") or {}
        node_id = str(raw.get("NodeID", ""))
        avail = free.get(node_id)
        nodes.append(
            NodeStatus(
                node_id=node_id,
                address=str(raw.get("NodeManagerAddress", "")),
                alive=bool(raw.get("Alive")),
                head=any(k.startswith("node:__internal_head__") for k in res),
                cpus=float(res.get("CPU", 0.0)),
                cpus_free=float(avail.get("CPU", 0.0)) if avail is not None else None,
                memory_bytes=int(res.get("memory", 0)),
                memory_free_bytes=int(avail.get("memory", 0)) if avail is not None else None,
            )
        )
    nodes.sort(key=lambda n: (not n.alive, not n.head, n.address, n.node_id))
    remote = ray.remote(probe_node)
    refs = {
        remote.options(
            num_cpus=0,
            max_retries=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=n.node_id, soft=False),
        ).remote(): n
        for n in nodes
        if n.alive
    }
    ready, pending = ray.wait(list(refs), num_returns=len(refs), timeout=timeout_s)
    for ref in ready:
        node = refs[ref]
        try:
            node.probe = ray.get(ref)
            node.problems = _problems(node, here)
        except Exception as exc:  # noqa: BLE001 - the probe failed there: say why
            first = (str(exc).splitlines() or [""])[0]
            node.problems = [f"probe failed: {type(exc).__name__}: {first}"[:300]]
    for ref in pending:
        refs[ref].problems = [f"no answer within {timeout_s:.0f}s"]
        ray.cancel(ref, force=True)
    gcs = ""
    try:
        gcs = str(ray.get_runtime_context().gcs_address)
    except Exception:  # noqa: BLE001 - only for display
        gcs = address or ""
    return ClusterStatus(gcs, here["repogym"], here["python"], nodes)
