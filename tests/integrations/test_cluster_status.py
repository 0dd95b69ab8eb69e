"""``repogym cluster status``: the session's local Ray cluster (a 0-CPU head and two 1-CPU
worker nodes) is listed node by node, each probed where it runs; a bad address is one line."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from repogym import __version__
from repogym.cli import app


def test_status_lists_every_node_and_probes_it(ray_cluster) -> None:  # type: ignore[no-untyped-def]
    res = CliRunner().invoke(
        app, ["cluster", "status", "--ray-address", ray_cluster.address, "--json"]
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    nodes = data["nodes"]
    assert len(nodes) == 3 and all(n["alive"] for n in nodes)
    assert sorted(n["cpus"] for n in nodes) == [0.0, 1.0, 1.0]
    assert [n["head"] for n in nodes].count(True) == 1
    assert data["summary"] == {"nodes": 3, "alive": 3, "cpus": 2.0, "cpus_free": 2.0}
    for n in nodes:
        probe = n["probe"]
        assert probe["sandbox"] == "local", probe["backends"]
        assert probe["repogym"] == __version__ and probe["python"] == data["python"]
        assert probe["cache_root"] and probe["cache_bytes"] >= 0
        assert set(probe["shared_cache"]["layers"]) == {"hits", "misses", "uploads", "errors"}
        assert n["problems"] == [] and len(n["short_id"]) == 12
    # Each probe ran on its own node: three distinct node ids answered.
    assert len({n["node_id"] for n in nodes}) == 3

    table = CliRunner().invoke(app, ["cluster", "status", "--ray-address", ray_cluster.address])
    assert table.exit_code == 0, table.output
    assert " head" in table.stdout and "on every live node" in table.stdout


def test_unreachable_address_is_one_line_exit_2() -> None:
    res = CliRunner().invoke(app, ["cluster", "status", "--ray-address", "127.0.0.1:9", "--json"])
    assert res.exit_code == 2
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "no Ray cluster answers" in lines[0], res.stderr
