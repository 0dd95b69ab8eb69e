"""cve_patches end to end in the real sandbox, through the CLI: the synthetic advisory folder
(with the real advisory GHSA-h5c8-rqwp-cp95 as its graded record) over the Jinja-like history,
the tasks it emits (instruction, metadata, validate --deep, verify, Harbor's loader), the yield
table's drop reasons, --resume, osv=api against a local stub, and bad input."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from repogym.cli import app
from repogym.sources.patches import parse_patch
from tests.pipelines.test_contract_tasks import harbor_python
from tests.pipelines_cve.history import (
    COMMIT_MESSAGE_ONLY,
    REAL_ID,
    real_record,
    synthetic_records,
)
from tests.pipelines_cve.osv_stub import OsvStub, serve
from tests.sources.conftest import GitRepo

pytestmark = pytest.mark.slow

REAL_TASK = "pallets__jinja-ghsa-h5c8-rqwp-cp95"
TEXT_TASK = "pallets__jinja-syn-2024-0002"
FAST = ["--opt", "reruns=0"]


def _generate(repo: Path, out: Path, *args: str) -> tuple[int, str]:
    res = CliRunner().invoke(
        app,
        ["generate", "--repo", str(repo), "--pipeline", "cve_patches", "--out", str(out)]
        + list(args),
    )
    return res.exit_code, res.output


def _report(output: str) -> dict[str, Any]:
    """The --json report (warnings about malformed files may precede it)."""
    return json.loads(output[output.index("{\n") :])


def _toml(task_dir: Path) -> dict[str, Any]:
    return tomllib.loads((task_dir / "task.toml").read_text())


@pytest.fixture(scope="module")
def generated(jinja_repo, osv_folder, tmp_path_factory) -> tuple[Path, dict[str, Any]]:
    repo, _ = jinja_repo
    out = tmp_path_factory.mktemp("cve") / "out"
    code, output = _generate(repo, out, "--opt", f"osv={osv_folder}", *FAST, "-j", "2", "--json")
    assert code == 0, output
    return out, _report(output)


def test_yield_table_counts_each_reason(generated) -> None:
    _, report = generated
    assert report["pipeline"] == "cve_patches" and report["status"] == "complete"
    assert report["yield"]["kept"] == 2 and report["yield"]["candidates"] == 9
    assert report["yield"]["dropped"] == {
        "fix commit not in history": 2,
        "malformed advisory file": 1,
        "advisory withdrawn": 1,
        "advisory for another repository": 1,
        "duplicate advisory": 1,
        "no advisory text": 1,
    }
    assert sorted(o["task_id"] for o in report["outcomes"] if o["kept"]) == [
        REAL_TASK,
        TEXT_TASK,
    ]


def test_real_advisory_becomes_a_graded_task(generated, jinja_repo) -> None:
    out, _ = generated
    _, shas = jinja_repo
    task = out / "tasks" / REAL_TASK
    instruction = (task / "instruction.md").read_text()
    assert instruction.startswith(
        "# Jinja vulnerable to HTML attribute injection when passing user input as keys to "
        "xmlattr filter\n"
    )
    assert "inject other attributes and perform XSS" in instruction
    gold = (task / "solution" / "patch.diff").read_text()
    added = [ln[1:].strip() for ln in gold.splitlines() if ln.startswith("+") and ln[1:].strip()]
    for leak in ["://", COMMIT_MESSAGE_ONLY, "_BAD_KEY", shas["xmlattr"][:7], shas["init"][:7]]:
        assert leak not in instruction, leak
    assert not [ln for ln in added if len(ln) > 8 and ln in instruction]
    changed_sources = [f.path for f in parse_patch(gold)]
    assert changed_sources == ["src/jinjalite/filters.py"]
    assert "jinjalite/filters" not in instruction  # the advisory does not name the fixed file

    data = _toml(task)
    assert data["metadata"]["category"] == "security"
    assert "security" in data["task"]["keywords"]
    block = data["metadata"]["repo2env"]
    assert block["pipeline"] == "cve_patches" and block["reward_kinds"] == ["test_execution"]
    assert block["reference"] == f"https://osv.dev/vulnerability/{REAL_ID}"
    sub = block["cve_patches"]
    assert sub["advisory_id"] == REAL_ID
    assert sub["aliases"] == ["CVE-2024-22195", "PYSEC-2024-9"]
    assert sub["cve_ids"] == ["CVE-2024-22195"] and sub["cwe_ids"] == ["CWE-79"]
    assert sub["severity"] == "MODERATE"
    assert sub["cvss"] == [
        {
            "type": "CVSS_V3",
            "vector": "CVSS:3.1/AV:N/AC:L/PR:L/UI:R/S:C/C:L/I:L/A:N",
            "score": 5.4,
        }
    ]
    assert sub["published"] == "2024-01-11T15:20:48Z" and sub["task_kind"] == "graded"
    assert sub["fix_commit"] == shas["xmlattr"] and sub["base_commit"] == shas["init"]
    assert sub["fail_to_pass"] == ["tests/test_filters.py::test_xmlattr_rejects_keys_with_spaces"]
    assert len(sub["pass_to_pass"]) == 3
    assert block["evaluation"]["status"] == "verified"


def test_text_only_task_from_a_fix_without_tests(generated, jinja_repo) -> None:
    out, _ = generated
    _, shas = jinja_repo
    task = out / "tasks" / TEXT_TASK
    instruction = (task / "instruction.md").read_text()
    assert instruction.startswith("# urlize links allow reverse tabnabbing\n")
    assert "reverse tabnabbing" in instruction and "opener" in instruction
    for leak in ["://", "SYN-2024-0002", "CVE-2099", "upgrade", "1.0.1", "noreferrer"]:
        assert leak not in instruction, leak
    assert (task / "tests" / "oracle.patch").is_file() and not (
        task / "tests" / "f2p.json"
    ).exists()
    block = _toml(task)["metadata"]["repo2env"]
    assert block["reward_kinds"] == ["diff_similarity"]
    sub = block["cve_patches"]
    assert sub["advisory_id"] == "SYN-2024-0002" and sub["task_kind"] == "text_only"
    assert sub["cwe_ids"] == ["CWE-1022"] and sub["severity"] == "MEDIUM"
    assert sub["fix_commit"] == shas["urlize"] and sub["files"] == ["src/jinjalite/utils.py"]
    assert block["evaluation"]["status"] == "verified"


def test_validate_deep_and_verify(generated) -> None:
    out, _ = generated
    cli = CliRunner()
    res = cli.invoke(app, ["validate", str(out / "tasks"), "--deep"])
    assert res.exit_code == 0, res.output
    res = cli.invoke(app, ["verify", str(out / "tasks"), "--reruns", "0", "--json"])
    assert res.exit_code == 0, res.output
    verdicts = {v["task_id"]: v for v in json.loads(res.output)["tasks"]}
    for task_id in (REAL_TASK, TEXT_TASK):
        assert verdicts[task_id]["status"] == "verified"
        assert verdicts[task_id]["oracle_rewards"] == [1.0]
        assert verdicts[task_id]["nop_reward"] == 0.0


def test_harbor_loads_the_tasks(generated) -> None:
    """Harbor's own task loader reads both tasks (from the Harbor venv the integration tests
    cache; skipped without it)."""
    python = harbor_python()
    if python is None:
        pytest.skip("no cached Harbor venv (tests/integrations/test_harbor_plugin.py makes one)")
    out, _ = generated
    code = (
        "import sys\nfrom harbor.models.task.task import Task\n"
        "for p in sys.argv[1:]:\n    t = Task(p)\n    print(t.config.verifier.timeout_sec)\n"
    )
    paths = [str(out / "tasks" / t) for t in (REAL_TASK, TEXT_TASK)]
    res = subprocess.run([python, "-c", code, *paths], capture_output=True, text=True)
    if "No module named 'harbor'" in res.stderr:
        pytest.skip("the cached venv has no Harbor")
    assert res.returncode == 0, res.stderr
    assert len(res.stdout.split()) == 2


def test_resume_examines_nothing_again(generated, jinja_repo, osv_folder) -> None:
    out, _ = generated
    repo, _ = jinja_repo
    code, output = _generate(repo, out, "--opt", f"osv={osv_folder}", "--resume", "--json")
    report = _report(output)
    assert code == 1 and report["outcomes"] == [] and report["yield"]["kept"] == 0


def test_osv_api_with_limit(jinja_repo, tmp_path) -> None:
    repo, shas = jinja_repo
    records = [
        dict(real_record(shas["xmlattr"])),
        synthetic_records(shas)["SYN-2024-0002.json"],
    ]
    for record in records:
        record["affected"] = [{"package": {"ecosystem": "PyPI", "name": "jinjalite"}}]
    with serve(OsvStub(records, page_size=1)) as stub:
        code, output = _generate(
            repo,
            tmp_path / "out",
            "--opt",
            "osv=api",
            "--opt",
            f"osv_url={stub.url}",
            "--limit",
            "1",
            "--json",
        )
    assert code == 0, output
    report = _report(output)
    # Newest advisory first: the text-only one, and the limit stops there.
    assert [o["task_id"] for o in report["outcomes"]] == [TEXT_TASK]
    assert [r["body"].get("page_token") for r in stub.requests] == [None, "1"]


def _one_line_error(code: int, output: str, needle: str) -> None:
    assert code == 2, output
    lines = output.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], output


def test_bad_input_exits_2_with_one_line(jinja_repo, make_repo, tmp_path) -> None:
    repo, _ = jinja_repo
    out = tmp_path / "out"
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "bad.zip").write_text("x")
    cases = [
        (["--opt", "osv=/no/such/export"], "no such file or folder"),
        (["--opt", f"osv={tmp_path / 'notes.txt'}"], "not an OSV export"),
        (["--opt", f"osv={tmp_path / 'bad.zip'}"], "not a zip archive"),
        (["--opt", "osv=api", "--opt", "osv_url=ftp://x"], "not an http(s) URL"),
        (["--opt", "osv_file=x"], "unknown --opt key 'osv_file'"),
        ([], "needs --opt osv=PATH"),
    ]
    for args, needle in cases:
        _one_line_error(*_generate(repo, out, *args), needle)
    with serve(OsvStub([], status=400)) as stub:
        _one_line_error(
            *_generate(repo, out, "--opt", "osv=api", "--opt", f"osv_url={stub.url}"),
            "OSV API",
        )
    plain: GitRepo = make_repo("plain")
    plain.write("a.py", "x = 1\n")
    plain.commit("init")
    (tmp_path / "r.json").write_text(json.dumps(real_record("c" * 40)))
    _one_line_error(
        *_generate(plain.path, out, "--opt", f"osv={tmp_path / 'r.json'}"), "match_repo=false"
    )
    assert not out.exists()  # nothing was written for bad input
