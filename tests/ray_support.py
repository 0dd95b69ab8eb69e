"""A local multi-node Ray cluster for tests (Ray's own ``ray.cluster_utils.Cluster``): a head
that runs no work (0 CPUs) and two worker nodes with 1 CPU each, each node its own raylet and
temp dir. One per test session (starting one costs ~7 s); the test process is its driver.

Use the ``ray_cluster`` fixture (in tests/conftest.py): it yields the cluster; its ``address``
is what ``--ray-address`` takes, and ``RayExecutor(address)`` connects this process to it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

WORKER_NODES = 2


def start_cluster(workers: int = WORKER_NODES) -> Any:
    cluster_utils = pytest.importorskip("ray.cluster_utils")
    cluster = cluster_utils.Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 0, "include_dashboard": False},
    )
    for _ in range(workers):
        cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    return cluster


def cluster_fixture() -> Iterator[Any]:
    cluster = start_cluster()
    try:
        yield cluster
    finally:
        import ray

        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()
