"""Instructions from evidence, on a real repository in the real sandbox: a new keyword argument
(parametrised tests), a new function with an asserted error message under a squash-merge
message full of residue, and a sentence that describes the implementation; the title, tdd and
solvability modes; validate agrees with the generator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repogym.pipelines import GenerateError
from repogym.spec import GenerationInput
from repogym.taskdir import load_task
from repogym.taskdir.validate import validate_task
from repogym.workflows import generate
from tests.sources.conftest import GitRepo, pin_git_env

pytestmark = pytest.mark.slow

PYPROJECT = """\
[project]
name = "sizes"
version = "0.1.0"
requires-python = ">=3.9"
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"
"""
CORE_V1 = """\
def fmt(n):
    return str(n)


def parse(text):
    if not text:
        return 0
    return int(text)
"""
TESTS_V1 = """\
from sizes.core import fmt, parse


def test_fmt_plain():
    assert fmt(3) == "3"


def test_parse_plain():
    assert parse("12") == 12
"""
UNIT_TESTS = """

import pytest


@pytest.mark.parametrize(
    "n, unit, expected", [(1, "s", "1s"), (2, "ms", "2ms"), (3, "", "3")]
)
def test_fmt_with_unit(n, unit, expected):
    assert fmt(n, unit=unit) == expected
"""
SIZE_TESTS = '''\
import pytest

from sizes.core import parse_size


def test_parse_size_kb():
    """Kilobyte sizes are read in bytes."""
    assert parse_size("2 KB") == 2048


def test_parse_size_negative():
    with pytest.raises(ValueError, match="size must be positive"):
        parse_size("-1 KB")
'''
PARSE_SIZE = """

def parse_size(text):
    number, _, unit = text.partition(" ")
    value = int(number)
    if value < 0:
        raise ValueError("size must be positive")
    return value * {"KB": 1024, "MB": 1024 * 1024}.get(unit, 1)
"""
SQUASH = """\
Add parse_size for human sizes (#12)

* Add parse_size

* Apply suggestions from code review

Co-authored-by: Bob Reviewer <bob@example.org>

* fix lint

---------

Co-authored-by: Bob Reviewer <bob@example.org>
"""
HOW = """\
Treat empty strings as invalid in parse

An empty string is not a size and must be refused with an error. Replace the truthiness guards
with 'is None' checks.
"""
OPTS = {"mutants": 0, "reruns": 0, "verify_reruns": 0, "adversarial": False}


@pytest.fixture(scope="module")
def sizes_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    mp = pytest.MonkeyPatch()
    pin_git_env(mp)
    repo = GitRepo(tmp_path_factory.mktemp("repos") / "sizes")
    shas = {}
    repo.write("pyproject.toml", PYPROJECT)
    repo.write("src/sizes/__init__.py", "")
    repo.write("src/sizes/core.py", CORE_V1)
    repo.write("tests/test_core.py", TESTS_V1)
    shas["init"] = repo.commit("Initial sizes package")

    core = CORE_V1.replace(
        "def fmt(n):\n    return str(n)", 'def fmt(n, unit=""):\n    return f"{n}{unit}"'
    )
    repo.write("src/sizes/core.py", core)
    repo.write("tests/test_core.py", TESTS_V1 + UNIT_TESTS)
    shas["kwarg"] = repo.commit("Support units in fmt")

    core += PARSE_SIZE
    repo.write("src/sizes/core.py", core)
    repo.write("tests/test_size.py", SIZE_TESTS)
    shas["function"] = repo.commit(SQUASH)

    core = core.replace(
        "    if not text:\n        return 0\n    return int(text)",
        '    if text is None:\n        return 0\n    if text == "":\n'
        '        raise ValueError("empty size")\n    return int(text)',
    )
    repo.write("src/sizes/core.py", core)
    repo.write(
        "tests/test_core.py",
        TESTS_V1
        + UNIT_TESTS
        + "\n\ndef test_parse_empty_string_is_an_error():\n"
        + "    with pytest.raises(ValueError):\n        parse('')\n",
    )
    shas["how"] = repo.commit(HOW)
    yield repo.path, shas
    mp.undo()


def _generate(repo: Path, out: Path, **opts) -> dict:
    inp = GenerationInput(
        repo=str(repo), pipeline="commit_runtime", out=out, options={**OPTS, **opts}
    )
    return json.loads(generate(inp).report.read_text())


@pytest.fixture(scope="module")
def evidence(sizes_repo, tmp_path_factory) -> tuple[Path, dict, dict[str, str]]:
    repo, shas = sizes_repo
    out = tmp_path_factory.mktemp("evidence")
    return out, _generate(repo, out), shas


def _task(out: Path, sha: str):
    return load_task(out / "tasks" / f"local__sizes-{sha[:12]}")


def test_new_keyword_argument_and_parametrised_group(evidence) -> None:
    out, report, shas = evidence
    assert report["yield"]["kept"] == 3, report["outcomes"]
    task = _task(out, shas["kwarg"])
    text = task.instruction()
    assert text.startswith("# Support units in fmt\n")
    assert "## Expected behaviour" in text
    assert "fmt with unit (3 cases) (`tests/test_core.py`)" in text
    assert "unexpected keyword argument 'unit'" in text  # the failure before the fix
    assert "## Required interface" in text and "`unit`" in text
    record = task.config.metadata["repogym"]["instruction"]
    assert record["mode"] == "evidence" and record["spec_coverage"] == 1.0
    assert "unit" in record["required"] and record["missing"] == []
    assert "assert fmt(n, unit=unit)" not in text  # no test source
    assert 'return f"{n}{unit}"' not in text  # no gold line


def test_new_function_error_message_and_squash_residue(evidence) -> None:
    out, _, shas = evidence
    task = _task(out, shas["function"])
    text = task.instruction()
    assert text.startswith("# Add parse_size for human sizes\n")
    assert "parse_size" in text.split("## Required interface", 1)[1]
    assert "size must be positive" in text
    assert "Kilobyte sizes are read in bytes." in text  # the test's docstring
    # The module failed to import before the fix: that is the failure shown.
    assert "Now: `ImportError: cannot import name 'parse_size'" in text
    assert "* Add parse_size" not in text  # a bullet repeating the title
    for residue in ("Apply suggestions", "Co-authored", "fix lint", "---------", "#12"):
        assert residue not in text, residue
    assert task.config.metadata["repogym"]["instruction"]["spec_coverage"] == 1.0
    assert "raise ValueError" not in text


def test_implementation_sentence_removed(evidence) -> None:
    out, _, shas = evidence
    task = _task(out, shas["how"])
    text = task.instruction()
    assert "An empty string is not a size and must be refused with an error." in text
    assert "is None" not in text and "truthiness" not in text
    assert task.config.metadata["repogym"]["instruction"]["removed_sentences"] == 1
    meta = task.config.metadata
    assert meta["difficulty"] == "easy" and meta["category"] in ("bugfix", "feature")
    assert "1 fail-to-pass test(s)" in meta["repogym"]["summary"]
    # The explorer shows that summary, and nothing of the answer.
    from repogym.explorer import withhold
    from repogym.explorer.adapters.harbor import HarborAdapter

    doc = withhold.apply(HarborAdapter().open(str(out)).task(task.path.name))
    assert doc.summary == meta["repogym"]["summary"]
    assert "is None" not in doc.summary


def test_validate_agrees_with_the_generator(evidence) -> None:
    out, _, shas = evidence
    for key in ("kwarg", "function", "how"):
        report = validate_task(_task(out, shas[key]).path)
        checks = {p.check for p in report.problems}
        assert not checks & {"underspecified", "leak", "leak-ngram"}, report.problems
    # A title-only instruction for the same task is underspecified in validate's eyes.
    task = _task(out, shas["kwarg"])
    (task.path / "instruction.md").write_text("# Support units in fmt\n")
    problems = [p for p in validate_task(task.path).problems if p.check == "underspecified"]
    assert problems and "does not name" in problems[0].message and "unit" in problems[0].message


def test_title_mode_is_repaired_or_dropped(sizes_repo, tmp_path) -> None:
    repo, shas = sizes_repo
    report = _generate(repo, tmp_path / "repaired", instruction="title", max_candidates=1)
    task = _task(tmp_path / "repaired", shas["how"])
    record = task.config.metadata["repogym"]["instruction"]
    assert record["mode"] == "title" and record["spec_coverage"] == 1.0
    report = _generate(
        repo, tmp_path / "dropped", instruction="title", solvability="drop", max_candidates=3
    )
    reasons = {o["task_id"]: (o.get("reason"), o.get("detail")) for o in report["outcomes"]}
    reason, detail = reasons[f"local__sizes-{shas['kwarg'][:12]}"]
    assert reason == "underspecified" and "does not name" in detail and "unit" in detail


def test_tdd_mode_puts_the_tests_in_the_workspace(sizes_repo, tmp_path) -> None:
    repo, shas = sizes_repo
    report = _generate(repo, tmp_path / "tdd", instruction="tdd", max_candidates=2)
    assert report["yield"]["kept"] == 2, report["outcomes"]
    task = _task(tmp_path / "tdd", shas["function"])
    visible = task.path / "environment" / "repo" / "tests" / "test_size.py"
    assert visible.read_text() == SIZE_TESTS
    assert "## Tests to make pass" in task.instruction()
    assert task.config.metadata["repo2env"]["evaluation"]["status"] == "verified"
    # The policy's shortcut: make the visible tests trivial. The hidden copy restores them.
    from repogym.run.agents import CommandAgent
    from repogym.run.trial import TrialRunner
    from repogym.sandbox import get_backend

    trivial = (
        "printf 'def test_parse_size_kb():\\n    pass\\n\\n\\n"
        "def test_parse_size_negative():\\n    pass\\n' > tests/test_size.py"
        " && python -m pytest -q tests/test_size.py"  # they pass in the agent's workspace
    )
    out = TrialRunner(get_backend("local")).run(task, CommandAgent(trivial))
    assert "2 passed" in json.dumps(out.result), "the shortcut did not run"
    assert out.reward == 0.0, out.error


def test_llm_mode_needs_llm(sizes_repo, tmp_path) -> None:
    repo, _ = sizes_repo
    with pytest.raises(GenerateError, match="instruction=llm needs --llm"):
        _generate(repo, tmp_path / "x", instruction="llm")


NAMES_ALL = (
    "# Sizes need units and a parser\n\n"
    "`fmt(n, unit=...)` must append the `unit` to the number. A new `parse_size(text)` reads "
    "sizes such as 2 KB in bytes and refuses negative sizes with ValueError('size must be "
    "positive'). An empty string is not a size and must be refused with an error."
)
NAMES_NONE = "# Sizes need work\n\nMake the size helpers behave the way the tests expect them to."


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_llm_mode_keeps_rewrites_that_name_the_interface(
    sizes_repo, tmp_path, monkeypatch, provider
) -> None:
    """instruction=llm: the model gets the evidence (never the patch); a rewrite naming every
    required name is kept and the model recorded; one that drops them is rejected and the
    evidence text stays."""
    from tests.llm.stub_servers import anthropic_ok, anthropic_stub, openai_ok, openai_stub

    repo, shas = sizes_repo
    monkeypatch.setenv("REPOGYM_LLM_API_KEY", "sk-test-0123456789abcdef")
    ok, stub_of = (
        (openai_ok, openai_stub) if provider == "openai" else (anthropic_ok, anthropic_stub)
    )
    # Newest first: "how" (no required names), "function", then "kwarg".
    script = [ok(NAMES_NONE), ok(NAMES_ALL), ok(NAMES_NONE)]
    with stub_of(*script) as stub:
        endpoint = stub.base_url + ("/v1" if provider == "openai" else "")
        inp = GenerationInput(
            repo=str(repo),
            pipeline="commit_runtime",
            out=tmp_path / "out",
            options={**OPTS, "instruction": "llm", "max_candidates": 3},
            llm=f"{provider}/stub-writer",
            llm_endpoint=endpoint,
        )
        report = json.loads(generate(inp).report.read_text())
    assert len(stub.requests) == 3
    sent = json.dumps([r["json"] for r in stub.requests])
    assert "## Expected behaviour" in sent and "## Required interface" in sent
    assert 'return f\\"{n}{unit}\\"' not in sent and "raise ValueError" not in sent  # no gold
    out = tmp_path / "out"
    how, function, kwarg = (_task(out, shas[k]) for k in ("how", "function", "kwarg"))
    # No required names: the rewrite stands.
    assert how.instruction().startswith("# Sizes need work")
    assert how.config.metadata["repogym"]["instruction"]["mode"] == "llm"
    assert how.config.metadata["repo2env"]["synthesis_llm"] == f"{provider}/stub-writer"
    # Names everything: kept.
    assert function.instruction().startswith("# Sizes need units and a parser")
    # Drops `unit`: rejected, the evidence instruction stays.
    assert "## Required interface" in kwarg.instruction()
    assert kwarg.config.metadata["repogym"]["instruction"]["mode"] == "evidence"
    rewrite = kwarg.config.metadata["repogym"]["instruction_rewrite"]
    assert rewrite["status"] == "rejected" and "unit" in rewrite["reason"]
    assert report["llm"]["accepted"] == 2 and report["llm"]["rejected"] == 1
