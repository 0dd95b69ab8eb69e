"""``generate --llm``: instructions rewritten through the real ``repogym.llm`` client against a
local OpenAI-compatible stub; rewrites that leak the fix, carry a credential, come back empty
or fail keep the deterministic instruction, and the reason is recorded."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repogym.cli import app
from repogym.llm import LLM
from repogym.pipelines._instructions.text import (
    InstructionRewriter,
    build_instruction,
    rewrite_leaks,
)
from tests.llm.stub_servers import error, openai_ok, openai_stub
from tests.pipelines_remote.remote_fixtures import (
    CIRCLE_BODY,
    GOLD_TRIANGLE,
    TRIANGLE_BODY,
    Hosted,
    HostedGitHub,
)

GOLD = (
    "--- a/src/m.py\n+++ b/src/m.py\n@@ -1,2 +1,2 @@\n def total(items):\n"
    "-    return sum(items)\n+    return sum(i.price for i in items if i.valid)\n"
)
DETERMINISTIC, _ = build_instruction(
    "total() counts invalid items",
    "The total includes items marked invalid; they should not count.",
    workdir="/workspace",
    gold_patch=GOLD,
)
KEY = "sk-test-RewriteKey-0123456789"
GOOD = (
    "# Exclude invalid items from the total\n\n"
    "`total(items)` adds up every item, including the ones marked invalid. Make it leave "
    "invalid items out."
)


def rewriter(stub_url: str) -> InstructionRewriter:
    return InstructionRewriter(
        LLM("openai/gpt-4o-mini", endpoint=f"{stub_url}/v1", api_key=KEY, backoff_s=0.01)
    )


def rewrite(reply_script: list) -> tuple:
    with openai_stub(*reply_script) as stub:
        rw = rewriter(stub.base_url)
        result = rw.rewrite(DETERMINISTIC, gold_patch=GOLD, workdir="/workspace")
    return result, rw, stub


def test_accepted_rewrite_and_prompt() -> None:
    result, rw, stub = rewrite([openai_ok(GOOD, 40, 30)])
    assert result.status == "accepted" and result.reason is None
    assert result.instruction.startswith("# Exclude invalid items from the total\n")
    assert "leave invalid items out" in result.instruction
    assert "checked out at `/workspace`" in result.instruction
    sent = stub.requests[0]["json"]["messages"]
    assert "never describe the solution" in sent[0]["content"].lower()
    assert "The total includes items marked invalid" in sent[1]["content"]
    assert "checked out at" not in sent[1]["content"]  # the statement only, never the patch
    assert "i.price" not in json.dumps(sent)
    assert rw.summary()["input_tokens"] == 40 and rw.summary()["accepted"] == 1
    assert result.to_json()["cost_usd"] > 0


@pytest.mark.parametrize(
    "text",
    [
        GOOD + "\n\nFor example: return sum(i.price for i in items if i.valid)",
        GOOD + "\n\n```python\nreturn  sum(i.price  for i in items\n if i.valid)\n```",
        GOOD + "\n\nUse `return sum(i.price for i in items if i.valid)`.",
    ],
)
def test_leaking_rewrite_rejected(text: str) -> None:
    result, rw, _ = rewrite([openai_ok(text)])
    assert result.status == "rejected" and result.instruction is None
    assert "added line" in result.reason
    assert rw.summary()["rejected"] == 1


def test_rewrite_with_credential_or_empty_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    result, _, _ = rewrite([openai_ok(GOOD + f"\n\nkey: {KEY}")])
    assert (result.status, result.reason) == ("rejected", "the rewrite contains a credential")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_Rewrite0123456789")
    result, _, _ = rewrite([openai_ok(GOOD + "\n\nghp_Rewrite0123456789")])
    assert result.status == "rejected"
    result, _, _ = rewrite([openai_ok("   ")])
    assert (result.status, result.reason) == ("rejected", "the rewrite is empty or too vague")


def test_llm_error_recorded_without_key() -> None:
    result, rw, stub = rewrite([error(500, f"upstream exploded for key {KEY}")])
    assert result.status == "failed" and result.instruction is None
    assert (
        "HTTP 500" in result.reason and KEY not in result.reason and KEY[:12] not in result.reason
    )
    assert len(stub.requests) == 4  # first try + 3 retries
    assert rw.summary()["failed"] == 1 and rw.summary()["calls"] == 0


def test_rewrite_leaks_normalises_whitespace() -> None:
    assert rewrite_leaks("x:  return   sum(i.price for i in items if i.valid)", GOLD)
    assert not rewrite_leaks("return the sum of valid prices", GOLD)


def test_import_repogym_loads_no_sdk() -> None:
    code = (
        "import sys, repogym, repogym.pipelines, repogym.spec, repogym.cli;"
        "print([m for m in ('openai', 'anthropic') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


REWRITE_CIRCLE = (
    "# Add a circle area helper\n\n"
    "The shapes package cannot compute the area of a circle. Add circle(r) to shapes.area, "
    "returning the area of a disc of radius r."
)
REWRITE_TRIANGLE_LEAK = (
    "# Add a triangle helper\n\nAdd triangle(base, height). Implement it as:\n\n"
    f"    {GOLD_TRIANGLE}\n"
)


@pytest.mark.slow
def test_generate_with_llm(hosted: Hosted, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    out = tmp_path / "out"
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    script = [
        openai_ok(REWRITE_CIRCLE, 100, 40),  # #9: accepted
        openai_ok(REWRITE_TRIANGLE_LEAK, 90, 30),  # #8: repeats the gold line → rejected
        error(500, "model overloaded"),  # #5: fails (retried, then given up)
    ]
    with HostedGitHub(hosted) as gh, openai_stub(*script) as llm:
        monkeypatch.setenv("REPOGYM_GITHUB_API", gh.url)
        res = CliRunner().invoke(
            app,
            [
                "generate",
                "-p",
                "pr_runtime",
                "--repo",
                "acme/widgets",
                "--out",
                str(out),
                "--llm",
                "openai/gpt-4o-mini",
                "--llm-endpoint",
                f"{llm.base_url}/v1",
            ],
        )
    assert res.exit_code == 0, res.stderr
    report = json.loads((out / "generate-report.json").read_text())
    totals = report["llm"]
    assert totals["llm"] == "openai/gpt-4o-mini" and totals["endpoint"] == f"{llm.base_url}/v1"
    assert (totals["calls"], totals["input_tokens"], totals["output_tokens"]) == (2, 190, 70)
    assert (totals["accepted"], totals["rejected"], totals["failed"]) == (1, 1, 1)
    assert totals["cost_usd"] == pytest.approx((190 * 0.15 + 70 * 0.60) / 1e6, abs=1e-6)
    line = " ".join(res.stdout.split())
    assert "LLM openai/gpt-4o-mini: 2 call(s), 190 input + 70 output tokens" in line
    assert "rewrites accepted 1, rejected 1, failed 1" in line

    by_id = {o["task_id"]: o for o in report["outcomes"]}
    tasks = out / "tasks"

    def meta(task_id: str) -> dict:
        return tomllib.loads((tasks / task_id / "task.toml").read_text())["metadata"]

    # Accepted: the rewrite is the instruction; provenance names the model.
    circle = (tasks / "acme__widgets-9" / "instruction.md").read_text()
    assert circle.startswith("# Add a circle area helper\n")
    assert "cannot compute the area of a circle" in circle
    assert meta("acme__widgets-9")["repo2env"]["synthesis_llm"] == "openai/gpt-4o-mini"
    assert by_id["acme__widgets-9"]["instruction_rewrite"]["status"] == "accepted"

    # Rejected: the deterministic instruction stays, the reason is recorded.
    triangle = (tasks / "acme__widgets-8" / "instruction.md").read_text()
    assert GOLD_TRIANGLE not in triangle and TRIANGLE_BODY in triangle
    rw8 = meta("acme__widgets-8")["repogym"]["instruction_rewrite"]
    assert rw8["status"] == "rejected" and "added line" in rw8["reason"]
    assert meta("acme__widgets-8")["repo2env"]["synthesis_llm"] == "none"

    # Failed: deterministic instruction, the error recorded.
    rw5 = by_id["acme__widgets-5"]["instruction_rewrite"]
    assert rw5["status"] == "failed" and "HTTP 500" in rw5["reason"]
    assert (
        "rectangle() returns the wrong area"
        in (tasks / "acme__widgets-5" / "instruction.md").read_text()
    )
    assert meta("acme__widgets-5")["repogym"]["instruction_rewrite"]["status"] == "failed"
    assert CIRCLE_BODY not in circle  # the rewrite replaced the PR text
    res = CliRunner().invoke(app, ["validate", str(out), "--json"])
    assert res.exit_code == 0, res.output
