"""The pr_diff scorer: components, weights, size cap, malformed input, standalone use."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from repogym.shipped.diff_reward import (
    DEFAULT_WEIGHTS,
    score_diff,
    weights_from_env,
)


def _blank_context(text: str) -> str:
    """Literals write blank context lines (a single space) as '.' to keep editors from eating them."""
    return re.sub(r"(?m)^\.$", " ", text)


DIFF_REWARD_PY = (
    Path(__file__).resolve().parents[2] / "src" / "repogym" / "shipped" / "diff_reward.py"
)

GOLD = _blank_context("""\
diff --git a/src/app.py b/src/app.py
index 1111111..2222222 100644
--- a/src/app.py
+++ b/src/app.py
@@ -10,6 +10,7 @@ def load(path):
     with open(path) as fh:
         data = fh.read()
-    return data
+    data = data.strip()
+    return data.upper()
.
.
 def save(path, data):
@@ -40,6 +41,6 @@ def save(path, data):
 def main():
     args = parse()
-    run(args.input, verbose=False)
+    run(args.input, verbose=args.verbose)
     return 0
.
.
""")

# Only the first of the two gold hunks.
PARTIAL = _blank_context("""\
--- a/src/app.py
+++ b/src/app.py
@@ -10,6 +10,7 @@ def load(path):
     with open(path) as fh:
         data = fh.read()
-    return data
+    data = data.strip()
+    return data.upper()
.
.
 def save(path, data):
""")

# The gold with indentation, inner spacing and trailing whitespace changed, no context (-U0).
WS_REFORMAT = """\
--- a/src/app.py
+++ b/src/app.py
@@ -12 +12,2 @@
-\treturn   data
+\tdata=data.strip( )  \t
+\treturn data.upper()
@@ -42 +43 @@
-  run(args.input,verbose=False)
+  run( args.input, verbose = args.verbose )
"""

UNRELATED = _blank_context("""\
--- a/docs/README.md
+++ b/docs/README.md
@@ -1,3 +1,5 @@
 # Project
+
+Install with `pip install project` and read the guide.
.
 Some text.
""")

WRONG_FILE = GOLD.replace("src/app.py", "src/other.py")


def _clear_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("REPOGYM_DIFF_WEIGHT_"):
            monkeypatch.delenv(key)


@pytest.fixture(autouse=True)
def _no_weight_env(monkeypatch: pytest.MonkeyPatch) -> None:
    _clear_env(monkeypatch)


# -- anchor scores ------------------------------------------------------------------------------


def test_gold_scores_exactly_one() -> None:
    out = score_diff(GOLD, GOLD)
    assert out["reward"] == 1.0
    assert out["format_valid"] is True
    assert out["capped"] is False
    assert set(out["components"]) == {
        "format_valid",
        "size_sanity",
        "file_targeting",
        "region_overlap",
        "similarity",
    }
    assert all(v == 1.0 for v in out["components"].values())
    assert out["notes"] == []


def test_result_shape_and_weights_sum_to_one() -> None:
    out = score_diff(PARTIAL, GOLD)
    assert set(out) == {"reward", "components", "weights", "format_valid", "capped", "notes"}
    assert sum(out["weights"].values()) == pytest.approx(1.0)
    assert set(out["weights"]) == set(DEFAULT_WEIGHTS)
    assert abs(sum(DEFAULT_WEIGHTS.values()) - 1.0) < 1e-9


def test_empty_prediction_scores_low() -> None:
    for empty in ("", "\n", "   \n\n"):
        out = score_diff(empty, GOLD)
        assert out["reward"] < 0.2
        assert out["format_valid"] is False


def test_unrelated_patch_scores_low() -> None:
    out = score_diff(UNRELATED, GOLD)
    assert out["format_valid"] is True
    assert out["reward"] < 0.2
    assert out["components"]["file_targeting"] == 0.0
    assert out["components"]["region_overlap"] == 0.0
    assert out["components"]["similarity"] == 0.0


def test_whitespace_only_reformat_scores_high() -> None:
    out = score_diff(WS_REFORMAT, GOLD)
    assert out["format_valid"] is True
    assert out["reward"] >= 0.9
    assert out["components"]["similarity"] == 1.0
    assert out["components"]["region_overlap"] == 1.0


def test_partial_diff_scores_in_between() -> None:
    partial = score_diff(PARTIAL, GOLD)["reward"]
    assert 0.3 < partial < 0.9
    assert score_diff(UNRELATED, GOLD)["reward"] < partial < score_diff(GOLD, GOLD)["reward"]
    components = score_diff(PARTIAL, GOLD)["components"]
    assert components["file_targeting"] == 1.0
    assert 0.5 < components["region_overlap"] < 1.0  # recall 1/2, precision 1
    assert 0.3 < components["similarity"] < 1.0


def test_wrong_file_same_content_gets_low_file_targeting() -> None:
    out = score_diff(WRONG_FILE, GOLD)
    assert out["components"]["file_targeting"] == 0.0
    assert out["components"]["region_overlap"] == 0.0
    assert out["components"]["size_sanity"] == 1.0
    assert out["reward"] < 0.2


def test_file_targeting_is_f1_over_files() -> None:
    both = GOLD + UNRELATED
    out = score_diff(both, GOLD)
    assert out["components"]["file_targeting"] == pytest.approx(2 / 3, abs=1e-6)


def test_far_away_hunk_gets_no_region_credit() -> None:
    moved = PARTIAL.replace("@@ -10,6 +10,7 @@", "@@ -200,6 +200,7 @@")
    near = PARTIAL.replace("@@ -10,6 +10,7 @@", "@@ -15,6 +15,7 @@")
    assert score_diff(moved, PARTIAL)["components"]["region_overlap"] == 0.0
    assert score_diff(near, PARTIAL)["components"]["region_overlap"] == 1.0


def test_similarity_ignores_context_lines() -> None:
    other_context = PARTIAL.replace("data = fh.read()", "payload = something_else()")
    assert score_diff(other_context, PARTIAL)["components"]["similarity"] == 1.0


# -- judge and weights -------------------------------------------------------------------------


def test_judge_none_redistributes_its_weight() -> None:
    none = score_diff(PARTIAL, GOLD)
    assert none["weights"]["llm_judge"] == 0.0
    assert "llm_judge" not in none["components"]
    rest = sum(v for k, v in DEFAULT_WEIGHTS.items() if k != "llm_judge")
    for name, value in DEFAULT_WEIGHTS.items():
        if name != "llm_judge":
            assert none["weights"][name] == pytest.approx(value / rest, abs=1e-6)

    one = score_diff(PARTIAL, GOLD, judge=1.0)
    zero = score_diff(PARTIAL, GOLD, judge=0.0)
    assert one["components"]["llm_judge"] == 1.0
    assert one["weights"]["llm_judge"] == pytest.approx(DEFAULT_WEIGHTS["llm_judge"])
    assert zero["reward"] < none["reward"] < one["reward"]
    assert one["reward"] - zero["reward"] == pytest.approx(DEFAULT_WEIGHTS["llm_judge"], abs=1e-5)
    assert score_diff(GOLD, GOLD, judge=1.0)["reward"] == 1.0
    assert score_diff(GOLD, GOLD, judge=0.0)["reward"] == pytest.approx(
        1.0 - DEFAULT_WEIGHTS["llm_judge"], abs=1e-6
    )


@pytest.mark.parametrize("judge", [-0.1, 1.5, float("nan"), "high"])
def test_invalid_judge_raises(judge: object) -> None:
    with pytest.raises(ValueError):
        score_diff(GOLD, GOLD, judge=judge)  # type: ignore[arg-type]


def test_explicit_weights_merge_over_defaults() -> None:
    out = score_diff(UNRELATED, GOLD, weights={"size_sanity": 1.0, "similarity": 0.0})
    assert out["weights"]["similarity"] == 0.0
    assert out["weights"]["size_sanity"] == pytest.approx(1.0 / 1.4, abs=1e-6)
    with pytest.raises(ValueError):
        score_diff(GOLD, GOLD, weights={"bogus": 1.0})
    with pytest.raises(ValueError):
        score_diff(GOLD, GOLD, weights={name: 0.0 for name in DEFAULT_WEIGHTS})


def test_weights_from_env_overrides() -> None:
    assert weights_from_env({}) == DEFAULT_WEIGHTS
    env = {
        "REPOGYM_DIFF_WEIGHT_SIMILARITY": " 0.7 ",
        "REPOGYM_DIFF_WEIGHT_LLM_JUDGE": "0",
        "PATH": "x",
    }
    weights = weights_from_env(env)
    assert weights["similarity"] == 0.7
    assert weights["llm_judge"] == 0.0
    assert weights["size_sanity"] == DEFAULT_WEIGHTS["size_sanity"]


def test_score_diff_reads_env_weights(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPOGYM_DIFF_WEIGHT_SIMILARITY", "0")
    monkeypatch.setenv("REPOGYM_DIFF_WEIGHT_FILE_TARGETING", "0")
    monkeypatch.setenv("REPOGYM_DIFF_WEIGHT_REGION_OVERLAP", "0")
    out = score_diff(WRONG_FILE, GOLD)
    assert out["weights"]["size_sanity"] == 1.0
    assert out["reward"] == 1.0  # only size_sanity counts, and the size matches
    # an explicit weights dict ignores the environment
    assert score_diff(WRONG_FILE, GOLD, weights={})["reward"] < 0.2


@pytest.mark.parametrize(
    "key,value",
    [
        ("REPOGYM_DIFF_WEIGHT_SIMILARITY", "abc"),
        ("REPOGYM_DIFF_WEIGHT_SIMILARITY", ""),
        ("REPOGYM_DIFF_WEIGHT_SIMILARITY", "-0.5"),
        ("REPOGYM_DIFF_WEIGHT_SIMILARITY", "nan"),
        ("REPOGYM_DIFF_WEIGHT_SIMILARITY", "inf"),
        ("REPOGYM_DIFF_WEIGHT_BOGUS", "0.1"),
    ],
)
def test_invalid_env_weights_raise_one_line(key: str, value: str) -> None:
    with pytest.raises(ValueError) as info:
        weights_from_env({key: value})
    message = str(info.value)
    assert "\n" not in message
    assert key in message or key[len("REPOGYM_DIFF_WEIGHT_") :].lower() in message


def test_cli_invalid_env_weight_exits_2(tmp_path: Path) -> None:
    gold = tmp_path / "gold.diff"
    gold.write_text(GOLD, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(DIFF_REWARD_PY), str(gold), str(gold)],
        capture_output=True,
        timeout=60,
        env={"REPOGYM_DIFF_WEIGHT_SIMILARITY": "lots", "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 2
    assert b"REPOGYM_DIFF_WEIGHT_SIMILARITY" in proc.stderr


# -- size cap ----------------------------------------------------------------------------------


def _with_extra_hunk(added: int) -> str:
    body = "".join(f"+extra_line_{k} = {k}\n" for k in range(added))
    return GOLD + f"@@ -100,1 +100,{added + 1} @@\n tail()\n{body}"


def test_oversized_prediction_is_capped() -> None:
    # gold has 5 changed lines; 5 + 46 = 51 > 10 * 5
    out = score_diff(_with_extra_hunk(46), GOLD)
    assert out["format_valid"] is True
    assert out["capped"] is True
    assert out["reward"] <= 0.2
    assert any("size cap" in note for note in out["notes"])
    # 5 + 45 = 50 is not more than 10x
    not_capped = score_diff(_with_extra_hunk(45), GOLD)
    assert not_capped["capped"] is False
    assert not_capped["reward"] > 0.2


def test_undersized_prediction_is_capped() -> None:
    context_only = (
        "--- a/src/app.py\n+++ b/src/app.py\n@@ -11,1 +11,1 @@\n         data = fh.read()\n"
    )
    out = score_diff(context_only, GOLD)
    assert out["format_valid"] is True
    assert out["capped"] is True
    assert out["reward"] <= 0.2


def test_no_cap_when_gold_is_small() -> None:
    small_gold = PARTIAL  # 3 changed lines < 5
    out = score_diff(_with_extra_hunk(80), small_gold)
    assert out["capped"] is False


# -- format validity ---------------------------------------------------------------------------

MALFORMED = {
    "hunk count too large": PARTIAL.replace("@@ -10,6 +10,7 @@", "@@ -10,9 +10,7 @@"),
    "hunk count too small": PARTIAL.replace("@@ -10,6 +10,7 @@", "@@ -10,6 +10,5 @@"),
    "no headers": PARTIAL.split("\n", 2)[2],
    "plain text": "I changed load() to strip the data and upper-case it.\n",
    "headers without hunks": "--- a/src/app.py\n+++ b/src/app.py\n",
    "garbage hunk line": PARTIAL.replace("-    return data\n", "*    return data\n"),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_prediction_is_invalid(name: str) -> None:
    out = score_diff(MALFORMED[name], GOLD)
    assert out["format_valid"] is False
    assert out["components"]["format_valid"] == 0.0
    assert out["reward"] == 0.0
    assert any("not a valid unified diff" in note for note in out["notes"])
    assert {"size_sanity", "file_targeting", "region_overlap", "similarity"} <= set(
        out["components"]
    )


def test_invalid_prediction_scores_zero_even_if_content_matches() -> None:
    broken = GOLD.replace("@@ -40,6 +41,6 @@", "@@ -40,8 +41,6 @@")
    out = score_diff(broken, GOLD)
    assert out["reward"] == 0.0
    assert out["components"]["file_targeting"] == 1.0


def test_tolerated_variations() -> None:
    # prose before the diff, CRLF line endings, no trailing newline, format-patch signature
    variants = [
        "Here is my patch:\n\n" + GOLD,
        GOLD.replace("\n", "\r\n"),
        GOLD.rstrip("\n"),
        GOLD + "-- \n2.39.0\n",
        GOLD.replace(
            "--- a/src/app.py\n+++ b/src/app.py\n",
            "--- src/app.py\t2024-01-01\n+++ src/app.py\t2024-01-02\n",
        ),
    ]
    for text in variants:
        out = score_diff(text, GOLD)
        assert out["format_valid"] is True, out["notes"]
        assert out["reward"] == 1.0


def test_new_and_deleted_files() -> None:
    new_file = "--- /dev/null\n+++ b/src/new.py\n@@ -0,0 +1,2 @@\n+a = 1\n+b = 2\n"
    deleted = "diff --git a/src/old.py b/src/old.py\ndeleted file mode 100644\n--- a/src/old.py\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a = 1\n-b = 2\n"
    for text in (new_file, deleted):
        assert score_diff(text, text)["reward"] == 1.0
    assert score_diff(new_file, deleted)["components"]["file_targeting"] == 0.0


def test_bad_gold_is_noted_not_raised() -> None:
    out = score_diff(GOLD, "not a diff")
    assert any("gold diff does not parse" in note for note in out["notes"])
    assert 0.0 <= out["reward"] <= 1.0


# -- properties --------------------------------------------------------------------------------

DIFFISH_LINES = [
    "diff --git a/x.py b/x.py",
    "--- a/x.py",
    "+++ b/x.py",
    "--- /dev/null",
    "+++ b/y.py",
    "@@ -1,2 +1,2 @@",
    "@@ -0,0 +1 @@",
    "@@ -3 +3,0 @@",
    "@@ -1,99999999 +1,99999999 @@",
    " context",
    "-old line",
    "+new line",
    "+",
    "-",
    "",
    "\\ No newline at end of file",
    "rename to z.py",
    "-- ",
    "\r",
]


@settings(max_examples=300, deadline=None)
@given(st.text(), st.text())
def test_arbitrary_text_never_raises(predicted: str, gold: str) -> None:
    out = score_diff(predicted, gold)
    assert 0.0 <= out["reward"] <= 1.0
    assert all(0.0 <= v <= 1.0 for v in out["components"].values())


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.one_of(st.sampled_from(DIFFISH_LINES), st.text(max_size=20)), max_size=30),
    st.lists(st.sampled_from(DIFFISH_LINES), max_size=30),
    st.one_of(st.none(), st.floats(min_value=0.0, max_value=1.0)),
)
def test_diff_like_text_stays_in_range(pred: list, gold: list, judge: object) -> None:
    predicted, gold_text = "\n".join(pred), "\n".join(gold)
    out = score_diff(predicted, gold_text, judge=judge)  # type: ignore[arg-type]
    assert 0.0 <= out["reward"] <= 1.0
    assert all(0.0 <= v <= 1.0 for v in out["components"].values())
    if not out["format_valid"]:
        assert out["reward"] == 0.0
    if out["format_valid"] and judge is None:
        assert score_diff(predicted, predicted)["reward"] == 1.0


# -- CLI and standalone use --------------------------------------------------------------------


def _write(tmp_path: Path) -> tuple[Path, Path]:
    pred, gold = tmp_path / "pred.diff", tmp_path / "gold.diff"
    pred.write_text(PARTIAL, encoding="utf-8")
    gold.write_text(GOLD, encoding="utf-8")
    return pred, gold


def test_cli_prints_json(tmp_path: Path) -> None:
    pred, gold = _write(tmp_path)
    proc = subprocess.run(
        [sys.executable, str(DIFF_REWARD_PY), str(pred), str(gold), "--judge", "0.5"],
        capture_output=True,
        check=True,
        timeout=60,
    )
    assert json.loads(proc.stdout.decode("utf-8")) == score_diff(PARTIAL, GOLD, judge=0.5)


def test_cli_missing_file(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(DIFF_REWARD_PY), str(tmp_path / "nope"), str(tmp_path / "nope")],
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert b"cannot read" in proc.stderr


@pytest.mark.parametrize("python", ["/root/.pyenv/versions/3.8.18/bin/python"])
def test_runs_standalone_under_python38(python: str, tmp_path: Path) -> None:
    if not Path(python).exists():
        pytest.skip(f"{python} is not installed")
    copy = tmp_path / "diff_reward.py"
    copy.write_bytes(DIFF_REWARD_PY.read_bytes())
    pred, gold = _write(tmp_path)
    for p, expected in ((pred, score_diff(PARTIAL, GOLD)), (gold, score_diff(GOLD, GOLD))):
        proc = subprocess.run(
            [python, "-I", str(copy), str(p), str(gold)],
            capture_output=True,
            check=True,
            timeout=60,
            cwd=str(tmp_path),
        )
        assert json.loads(proc.stdout.decode("utf-8")) == expected


def test_file_is_self_contained() -> None:
    """Standard-library imports only, and Python 3.8 syntax."""
    source = DIFF_REWARD_PY.read_text(encoding="utf-8")
    tree = ast.parse(source, feature_version=(3, 8))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0
            imported.add((node.module or "").split(".")[0])
    stdlib = {"argparse", "collections", "difflib", "json", "math", "os", "re", "sys", "typing"}
    assert imported <= stdlib
    assert "repogym" not in imported
    assert "from __future__" not in source


def _big_diff(files: int, lines: int, salt: str) -> str:
    out = []
    for f in range(files):
        body = [f"+    value_{k % 7} = {salt}{k % 3}" if k % 2 else "-}" for k in range(lines)]
        removed = sum(1 for b in body if b.startswith("-"))
        out.append(
            f"--- a/f{f}.py\n+++ b/f{f}.py\n@@ -1,{removed} +1,{lines - removed} @@\n"
            + "\n".join(body)
            + "\n"
        )
    return "".join(out)


def test_huge_diffs_are_bounded_and_still_exact_for_gold() -> None:
    gold = _big_diff(12, 4000, "a")
    out = score_diff(gold, gold)
    assert out["reward"] == 1.0
    assert any("truncated" in note for note in out["notes"])
    assert any("multisets" in note for note in out["notes"])
    other = score_diff(_big_diff(12, 4000, "b"), gold)
    assert 0.0 < other["components"]["similarity"] < 1.0
