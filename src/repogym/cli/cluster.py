"""``repogym cluster status``: the Ray cluster's nodes and what work finds on each."""

from __future__ import annotations

import json
import sys

import typer

from repogym.cli.app import app, new_group
from repogym.cli.common import JsonOpt, RayAddressOpt, bad_input

cluster_app = new_group(help="The Ray cluster repogym's --executor ray runs on.")
app.add_typer(cluster_app, name="cluster")


@cluster_app.command("status")
def status(ray_address: RayAddressOpt = None, json_out: JsonOpt = False) -> None:
    """List the cluster's nodes (address, alive, CPUs and memory, total and free) and, on each
    live node, the sandbox backend, Python and repogym versions, the local cache and the
    shared cache's hits/misses/uploads. Exit 1 when a live node has a problem (no sandbox
    backend, another repogym version, no answer), 2 when no cluster answers."""
    from repogym.executors import ExecutorError
    from repogym.executors.cluster import cluster_status

    try:
        result = cluster_status(ray_address)
    except ExecutorError as exc:
        raise bad_input(str(exc)) from None
    if json_out:
        sys.stdout.write(json.dumps(result.to_json()) + "\n")
    else:
        from repogym.ui.cluster import print_status

        print_status(result)
    if not result.ok:
        raise typer.Exit(1)
