"""Answer withholding: every shape an answer takes, and the notes that say what was withheld."""

from __future__ import annotations

import json
import tomllib

import pytest

from repogym.explorer import withhold
from repogym.explorer.model import FileDoc, Section, TaskDoc

SECRET = "S3CR3T"


def _doc(files: dict[str, bytes] | None = None, sections: list[Section] | None = None) -> TaskDoc:
    return TaskDoc(
        id="t",
        title="t",
        summary="",
        facets={},
        grading="tests",
        environment="text only",
        network="unknown",
        runnable=False,
        sections=sections or [],
        files=[FileDoc(p, len(b), b) for p, b in (files or {}).items()],
    )


def _files(doc: TaskDoc) -> dict[str, FileDoc]:
    return {f.path: f for f in doc.files}


def test_solution_files_are_withheld() -> None:
    doc = withhold.apply(
        _doc({"solution/solve.sh": b"echo " + SECRET.encode(), "solution/patch.diff": b"+x"})
    )
    for f in doc.files:
        assert f.data is None and f.withheld == "solution (the answer)"
    assert doc.withheld == ["solution/ (2 files): solution (the answer)"]


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("tests/expected_output.txt", "expected output (grader data)"),
        ("tests/data/expected.json", "expected output (grader data)"),
        ("tests/answers.txt", "expected output (grader data)"),
        ("tests/rubric.md", "rubric (grader data)"),
        ("tests/gold_patch.txt", "gold data (grader data)"),
        ("tests/golden/out.txt", None),  # a folder name alone does not decide
        ("tests/golden.txt", "gold data (grader data)"),
        ("tests/test.patch", "hidden test patch (grader data)"),
        ("tests/hidden/fix.diff", "hidden test patch (grader data)"),
        ("expected_output.txt", "expected output (grader data)"),
        ("environment/expected.txt", None),  # the agent sees its environment anyway
        ("tests/test_main.py", None),
        ("tests/files/tests/test_mod.py", "hidden tests (grader data)"),
        ("tests/hidden/tests/test_counts.py", "hidden tests (grader data)"),
        ("tests/verifier.py", None),
    ],
)
def test_grader_data_files(path: str, reason: str | None) -> None:
    doc = withhold.apply(_doc({path: SECRET.encode()}))
    f = doc.files[0]
    assert f.withheld == reason
    if reason:
        assert f.data is None
        assert any(path in n and reason in n for n in doc.withheld)
    else:
        assert f.data == SECRET.encode()


def test_nested_answer_keys_in_task_toml() -> None:
    toml = f"""schema_version = "1.4"
# a comment that survives
[metadata]
difficulty = "hard"
gold_answer = "{SECRET}"
[metadata.grader]
notes = "keep me"
reference_solution = \"\"\"
{SECRET}
\"\"\"
[metadata.grader.deep]
expected_output = ["{SECRET}", 1]
[solution.env]
KEY = "{SECRET}"
"""
    doc = withhold.apply(
        _doc({"task.toml": toml.encode()}, [Section("config", "task.toml", toml, "code", "toml")])
    )
    for text in (doc.sections[0].body, doc.files[0].data.decode()):
        assert SECRET not in text
        assert "# a comment that survives" in text
        data = tomllib.loads(text)
        assert data["metadata"]["difficulty"] == "hard"
        assert data["metadata"]["grader"]["notes"] == "keep me"
        assert data["metadata"]["gold_answer"] == withhold.MASK
    assert any("metadata.gold_answer" in n for n in doc.withheld)


def test_inline_table_answers_in_toml_fall_back_to_a_rewrite() -> None:
    toml = f'[metadata]\ngrader = {{ answer = "{SECRET}", kind = "exact" }}\n'
    out = withhold.mask_toml(toml, found := [])
    assert SECRET not in out
    assert tomllib.loads(out)["metadata"]["grader"] == {"answer": withhold.MASK, "kind": "exact"}
    assert found == ["metadata.grader.answer"]


def test_nested_answer_keys_in_json_and_jsonl() -> None:
    data = {"a": [{"b": {"ground_truth": SECRET, "keep": 1}}], "label": SECRET, "labels_count": 2}
    jsonl = "\n".join(json.dumps({"prompt": "p", "answer": SECRET}) for _ in range(3)) + "\n"
    doc = withhold.apply(
        _doc({"tests/config.json": json.dumps(data).encode(), "tests/rows.jsonl": jsonl.encode()})
    )
    files = _files(doc)
    masked = json.loads(files["tests/config.json"].data)
    assert masked["a"][0]["b"] == {"ground_truth": withhold.MASK, "keep": 1}
    assert masked["label"] == withhold.MASK and masked["labels_count"] == 2
    assert files["tests/config.json"].size == len(files["tests/config.json"].data)
    rows = [json.loads(line) for line in files["tests/rows.jsonl"].data.decode().splitlines()]
    assert all(r == {"prompt": "p", "answer": withhold.MASK} for r in rows)
    assert any("tests/config.json" in n for n in doc.withheld)


def test_yaml_ish_metadata_section() -> None:
    body = f"difficulty: hard\nsolution: |\n  {SECRET}\n  more\ncategory: x\n"
    doc = withhold.apply(_doc(sections=[Section("metadata", "Metadata", body, "code", "yaml")]))
    assert SECRET not in doc.sections[0].body
    assert "difficulty: hard" in doc.sections[0].body
    assert "category: x" in doc.sections[0].body


@pytest.mark.parametrize(
    "script",
    [
        f'EXPECTED="{SECRET}"\n',
        f"export EXPECTED_OUTPUT='{SECRET}'\n",
        f"local answer={SECRET}\n",
        f'answer = "{SECRET}"\n',
        f'GOLD: str = "{SECRET}"\n',
        f'expected = """\n{SECRET}\n"""\n',
        f"cat > /tmp/expected <<EOF\n{SECRET}\nEOF\n",
        f"cat <<-'END' > /tmp/out\n\t{SECRET}\n\tEND\n",
        f"tee /tmp/answer.txt <<EOF\n{SECRET}\nEOF\n",
        f'echo "{SECRET}" > /tmp/expected.txt\n',
        f"python3 - <<PY\nanswer = '{SECRET}'\nPY\n",
    ],
)
def test_answers_in_grader_scripts_are_masked(script: str) -> None:
    test_sh = "#!/bin/bash\nset -e\n" + script + "diff /app/out /tmp/expected && echo 1\n"
    doc = withhold.apply(
        _doc(
            {"tests/test.sh": test_sh.encode(), "tests/grade.py": script.encode()},
            [Section("grader", "tests/test.sh", test_sh, "code", "bash")],
        )
    )
    assert SECRET not in doc.sections[0].body
    assert withhold.MASK in doc.sections[0].body
    assert "diff /app/out /tmp/expected && echo 1" in doc.sections[0].body
    assert SECRET.encode() not in _files(doc)["tests/test.sh"].data
    assert any("tests/test.sh: answers masked" in n for n in doc.withheld)


def test_ordinary_grader_script_is_untouched() -> None:
    script = '#!/bin/bash\nOUT=$(python3 /app/main.py)\nif [ "$OUT" == "$EXPECTED" ]; then :; fi\n'
    doc = withhold.apply(_doc({"tests/test.sh": script.encode()}))
    assert doc.files[0].data == script.encode()
    assert doc.withheld == []


def test_instruction_and_environment_are_never_rewritten() -> None:
    text = "answer: this is what you are asked\nEXPECTED=1\n"
    doc = withhold.apply(
        _doc(
            {"environment/config.json": b'{"answer": 1}', "environment/run.sh": b"EXPECTED=1\n"},
            [Section("instruction", "Instruction", text)],
        )
    )
    assert doc.sections[0].body == text
    assert _files(doc)["environment/config.json"].data == b'{"answer": 1}'


def test_adapter_reasons_are_kept_and_answer_facets_dropped() -> None:
    doc = _doc()
    doc.files = [FileDoc("data/row.json", 5, b"12345", withheld="answer column (rows)")]
    doc.facets = {"difficulty": "easy", "gold_answer": SECRET}
    withhold.apply(doc)
    assert doc.files[0].data is None and doc.files[0].withheld == "answer column (rows)"
    assert doc.facets == {"difficulty": "easy"}


def test_apply_is_idempotent() -> None:
    files = {"solution/a": b"x", "tests/test.sh": f'EXPECTED="{SECRET}"\n'.encode()}
    doc = withhold.apply(_doc(files))
    notes = list(doc.withheld)
    withhold.apply(doc)
    assert doc.withheld == notes


@pytest.mark.parametrize(
    ("key", "answer"),
    [
        ("gold_answer", True),
        ("expected_output", True),
        ("Expected-Output", True),
        ("answer", True),
        ("answers", True),
        ("solution", True),
        ("reference_solution", True),
        ("gold", True),
        ("ground_truth", True),
        ("label", True),
        ("correct_answer", True),
        ("reference", False),
        ("difficulty", False),
        ("category", False),
        ("fail_to_pass", False),
        ("description", False),
    ],
)
def test_answer_keys(key: str, answer: bool) -> None:
    assert withhold.is_answer_key(key) is answer


def test_repogym_provenance_is_not_mistaken_for_answers() -> None:
    """The pr_diff provenance table and verification counts stay readable; its ``answer``
    key (a description of the answer format) is still masked, like any answer-named key."""
    from repogym.explorer.withhold import mask_toml

    text = (
        "[metadata.repo2env.pr_diff]\n"
        'files = ["pkg/mod.py"]\n'
        'answer = "edits in /workspace"\n'
        "[metadata.repo2env.evaluation]\n"
        "oracle_runs = 2\n"
        "oracle_passes = 2\n"
    )
    found: list[str] = []
    masked = mask_toml(text, found)
    assert 'files = ["pkg/mod.py"]' in masked
    assert "oracle_runs = 2" in masked and "oracle_passes = 2" in masked
    assert "edits in /workspace" not in masked


SAMPLE_KEYS = [
    *(
        k
        for w in withhold._KEY_WORDS
        for k in (w, f"{w}s", f"{w}_x", f"x_{w}", f"x_{w}s", f"{w.title()}-X")
    ),
    "reference",
    "gold_patch",
    "test_patch",
    "hints_text",
    "final_answer",
    "canonical_solution",
    "oracle_runs",
    "oracle_passes",
    "pr_diff",
    "cve_patches",
    "labels_count",
    "target_os",
    "target-os",
    "Gold Answer",
    "difficulty",
    "fail_to_pass",
    "description",
]


@pytest.mark.parametrize("key", SAMPLE_KEYS)
def test_every_place_withholds_the_same_keys(key: str) -> None:
    """One rule: the maskers of task files and sections, facets, the row processors' columns
    and their ``scrub`` (also the OpenEnv adapter's) all withhold exactly the same keys."""
    from repogym.explorer.adapters.processors import answer_like, scrub

    hidden = withhold.is_answer_key(key)
    assert (withhold.answer_reason(key) is not None) is hidden
    assert (answer_like(key) is not None) is hidden
    assert (withhold.mask_data({key: "v"}) == {key: withhold.MASK}) is hidden
    assert (scrub({key: "v"}) == {}) is hidden
    found: list[str] = []
    assert (withhold.MASK in withhold.mask_toml(f'"{key}" = "v"\n', found)) is hidden
    assert (withhold.MASK in withhold.mask_json(json.dumps({key: "v"}), found)) is hidden
    assert (withhold.MASK in withhold.mask_yamlish(f"{key}: v\n", found)) is hidden
    doc = _doc()
    doc.facets[key] = "v"
    assert (key not in withhold.apply(doc).facets) is hidden
