"""Node versions: npm semver ranges, version files, the image major and the host install."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from repogym.bootstrap import UnsupportedRepo, detect, make_recipe
from repogym.bootstrap.node import project as node
from repogym.bootstrap.node.versions import (
    Declared,
    RangeError,
    allowed_majors,
    choose_node,
    declared_node,
    range_floor,
    satisfies,
)
from repogym.sandbox import _toolchains

MakeRepo = Callable[..., Path]


@pytest.mark.parametrize(
    ("rng", "inside", "outside"),
    [
        (">=22.12", ["22.12.0", "23.1.0", "24.0.0"], ["22.11.9", "20.20.2"]),
        ("^20", ["20.0.0", "20.99.9"], ["19.9.9", "21.0.0"]),
        ("18.x || 20.x", ["18.0.0", "20.11.1"], ["19.1.0", "21.0.0", "16.20.0"]),
        (">=18 <21", ["18.0.0", "20.20.2"], ["17.9.9", "21.0.0"]),
        (">= 18", ["18.0.0"], ["17.0.0"]),
        ("~1.2.3", ["1.2.3", "1.2.9"], ["1.3.0", "1.2.2"]),
        ("~1", ["1.0.0", "1.9.9"], ["2.0.0"]),
        ("^0.2.3", ["0.2.3", "0.2.9"], ["0.3.0"]),
        ("^0.0.3", ["0.0.3"], ["0.0.4"]),
        ("1.2 - 2.3.4", ["1.2.0", "2.3.4"], ["2.3.5", "1.1.9"]),
        ("18 - 20", ["18.0.0", "20.9.9"], ["21.0.0"]),
        ("<=20", ["20.9.0"], ["21.0.0"]),
        (">1.2", ["1.3.0"], ["1.2.9"]),
        ("<20.11", ["20.10.9"], ["20.11.0"]),
        ("=20.1", ["20.1.7"], ["20.2.0"]),
        ("v20.11.1", ["20.11.1"], ["20.11.2"]),
        ("*", ["0.0.1", "99.0.0"], []),
        ("", ["20.0.0"], []),
        (">=14.17.0 || ^16.10.0", ["16.11.0", "22.0.0"], ["14.16.0"]),
        ("^18.0.0-rc.1", ["18.2.0"], ["19.0.0"]),
    ],
)
def test_npm_ranges(rng: str, inside: list[str], outside: list[str]) -> None:
    for v in inside:
        assert satisfies(v, rng), (rng, v)
    for v in outside:
        assert not satisfies(v, rng), (rng, v)


def test_range_helpers() -> None:
    assert range_floor(">=22.12") == (22, 12, 0)
    assert range_floor("^18 || >=20") == (18, 0, 0)
    assert allowed_majors(">=18 <21") == [18, 19, 20]
    assert allowed_majors("^18") == [18]
    assert allowed_majors("<=20") == list(range(0, 21))
    with pytest.raises(RangeError):
        satisfies("20.0.0", "lts/*")


def test_version_files_and_their_order(make_repo: MakeRepo) -> None:
    repo = make_repo({".nvmrc": "v20.11.1\n", ".node-version": "22\n"})
    d = declared_node(repo, {"engines": {"node": ">=18"}})
    assert (d.pin, d.pin_source, d.engines) == ("22", ".node-version", ">=18")
    d = declared_node(repo, {"volta": {"node": "18.19.0"}})
    assert (d.pin, d.pin_source) == ("18.19.0", "package.json volta.node")
    lts = declared_node(make_repo({".nvmrc": "lts/iron\n"}), {})
    assert lts.pin == "20"
    star = declared_node(make_repo({".nvmrc": "lts/*\n"}), {"engines": {"node": "lts/*"}})
    assert star.pin is None and star.engines is None
    assert any("names no version" in n for n in star.notes)
    assert any("not a range" in n for n in star.notes)


def test_choice() -> None:
    host = ["20.20.2"]
    # A range the host satisfies: the host's major.
    c = choose_node(Declared(engines=">=18"), host, "20.20.2")
    assert (c.major, c.host, c.problem) == (20, "20.20.2", "")
    # Several installs: the pin's major when the range allows it.
    c = choose_node(
        Declared(pin="22", pin_source=".nvmrc", engines=">=18"), [*host, "22.3.0"], "20.20.2"
    )
    assert (c.major, c.host) == (22, "22.3.0")
    # Needs a newer Node than any installed: refused, with a reason naming both.
    c = choose_node(Declared(engines=">=22.12"), host, "20.20.2")
    assert c.major is None and "needs Node ≥ 22.12.0" in c.problem and "20.20.2" in c.problem
    # Only excludes newer releases: the range's newest major is recorded, the host runs it.
    c = choose_node(Declared(engines="^18"), host, "20.20.2")
    assert (c.major, c.host, c.problem) == (18, "20.20.2", "")
    assert "excludes every Node on this host" in c.notes[0]
    # A pin the host lacks: recorded; the closest install runs it.
    c = choose_node(Declared(pin="22", pin_source=".nvmrc"), host, "20.20.2")
    assert (c.major, c.host) == (22, "20.20.2") and "closest" in c.notes[0]
    assert choose_node(Declared(), [], None).problem == "Node.js is not installed on this host"


@pytest.fixture
def hosts(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    def set_hosts(*versions: str) -> None:
        monkeypatch.setattr(node, "host_node", lambda: versions[0])
        monkeypatch.setattr(node, "host_nodes", lambda: list(versions))

    return set_hosts


def pkg(**fields: object) -> str:
    return json.dumps(
        {"name": "demo", "version": "1.0.0", "scripts": {"test": "node --test"}, **fields}
    )


def test_engines_decide_the_image_and_refusal(
    make_repo: MakeRepo, hosts: Callable[..., None]
) -> None:
    hosts("20.20.2")
    newer = make_repo({"package.json": pkg(engines={"node": ">=22.12"})})
    d = detect(newer)
    assert not d.supported
    assert "engines.node '>=22.12' needs Node ≥ 22.12.0; this host has 20.20.2" in d.reason
    with pytest.raises(UnsupportedRepo, match="22.12"):
        make_recipe(newer, d)

    hosts("20.20.2", "22.12.1")
    recipe = make_recipe(newer)
    assert recipe.base_image == "node:22-slim"
    assert "FROM node:22-slim" in recipe.dockerfile.splitlines()
    assert any(
        "node:22 from engines.node '>=22.12'; runs on Node 22.12.1" in n for n in recipe.notes
    )

    hosts("20.20.2")
    old = make_repo({"package.json": pkg(engines={"node": "18.x"}), ".nvmrc": "20\n"})
    recipe = make_recipe(old)
    assert recipe.base_image == "node:18-slim"
    assert any("excludes every Node on this host" in n for n in recipe.notes)
    plain = make_repo({"package.json": pkg()})
    assert make_recipe(plain).base_image == "node:20-slim"


def test_local_mapping_picks_the_closest_install(monkeypatch: pytest.MonkeyPatch) -> None:
    installs = {
        "20.20.2": "/usr/bin/node",
        "18.19.0": "/opt/node18/bin/node",
        "22.3.0": "/opt/n22/bin/node",
    }
    monkeypatch.setattr(_toolchains, "host_node_installs", lambda: installs)
    monkeypatch.setattr(_toolchains, "default_node", lambda: "20.20.2")
    assert _toolchains.choose_node_install("22-slim") == ("22.3.0", "/opt/n22/bin/node", None)
    assert _toolchains.choose_node_install("18.19")[0] == "18.19.0"
    assert _toolchains.choose_node_install("slim")[0] == "20.20.2"
    version, _path, note = _toolchains.choose_node_install("24-slim")
    assert version == "22.3.0" and note and "requested node 24" in note and "closest" in note
    version, _path, note = _toolchains.choose_node_install("16")
    assert version == "18.19.0" and note
    base = _toolchains.resolve("node:22-slim")
    assert base.mapping["node"] == "22.3.0" and base.env["PATH"].startswith("/opt/n22/bin:")
    assert "note" not in base.mapping
    assert _toolchains.resolve("node:24").mapping["note"].startswith("requested node 24")
