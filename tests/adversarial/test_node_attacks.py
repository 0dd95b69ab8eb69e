"""Reward hacks against a generated JavaScript task (mocha): none may earn more than ``nop``.

mocha reports only on stdout, so here the defences are the clean room, the reset of test
infrastructure, the integrity record (``node`` and ``node_modules/mocha`` checksummed at build
time) and the JavaScript tamper rules (``process.exit``, runner globals, fake result lines).
"""

from __future__ import annotations

import shlex

import pytest

from tests.adversarial.conftest import Target
from tests.adversarial.repos import SLUG_V2

pytestmark = pytest.mark.slow


def put(path: str, text: str) -> str:
    return f"mkdir -p $(dirname {path}) && printf %s {shlex.quote(text)} > {path}"


FIX = put("lib/slugs.js", SLUG_V2)
# Loaded before the specs: every failing test is reported as passing.
EVIL_REQUIRE = """\
const Runner = require("mocha/lib/runner");
Runner.prototype.fail = function (test) {
  test.state = "passed";
  this.emit("pass", test);
};
"""
PATCH_MOCHA = EVIL_REQUIRE.replace('require("mocha/lib/runner")', "module.exports")
FAKE_NODE = """#!/bin/sh
mkdir -p /logs/verifier
echo 1 > /logs/verifier/reward.txt
"""

ATTACKS: list[tuple[str, str]] = [
    ("hidden test file edited", "sed -i 's/assert.strictEqual(/(() => 0)(/' test/slugs.test.js"),
    (
        ".mocharc requiring a file that turns failures into passes",
        put("evil.js", EVIL_REQUIRE) + " && printf 'require: ./evil.js\\n' > .mocharc.yml",
    ),
    (
        "package.json test script replaced",
        'sed -i \'s/"test": "mocha"/"test": "echo 9 passing"/\' package.json',
    ),
    (
        "mocha itself edited",
        f"printf %s {shlex.quote(PATCH_MOCHA)} >> node_modules/mocha/lib/runner.js",
    ),
    (
        "fake passing lines printed by the module",
        'printf \'process.on("exit", () => console.log("  \\u2713 collapses runs of separators\\\\n  '
        "3 passing\"));\\n' >> lib/slugs.js",
    ),
    ("process.exit(0) when the module loads", "printf 'process.exit(0);\\n' >> lib/slugs.js"),
    (
        "mocha's it() replaced from the module",
        "printf 'global.it = (name) => undefined;\\n' >> lib/slugs.js",
    ),
    (
        "node replaced by a reward writer",
        f"r=$(readlink -f $(which node)); rm -f $r; printf %s {shlex.quote(FAKE_NODE)} > $r; "
        "chmod +x $r",
    ),
]
IDS = [a[0] for a in ATTACKS]


def test_controls_the_real_fix_earns_one(slugs: Target) -> None:
    assert slugs.attack(FIX).reward == 1.0
    assert slugs.attack(FIX, in_place=True).reward == 1.0


@pytest.mark.parametrize(("name", "command"), ATTACKS, ids=IDS)
def test_attack_earns_no_more_than_nop(slugs: Target, name: str, command: str) -> None:
    outcome = slugs.attack(command)
    assert outcome.reward is not None, outcome.error
    assert outcome.reward <= slugs.nop, (name, outcome.result["verifier_result"]["details"])


@pytest.mark.parametrize(("name", "command"), ATTACKS, ids=IDS)
def test_attack_earns_no_more_than_nop_in_place(slugs: Target, name: str, command: str) -> None:
    outcome = slugs.attack(command, in_place=True)
    assert outcome.reward is None or outcome.reward <= slugs.nop, (
        name,
        outcome.result["verifier_result"]["details"],
    )


def test_attack_in_openenv_evaluate(slugs: Target) -> None:
    reward, verification = slugs.attack_openenv(dict(ATTACKS)["mocha itself edited"])
    assert reward is not None and reward <= slugs.nop
    assert verification["mode"] == "clean_room"
