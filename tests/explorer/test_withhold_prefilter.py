"""The masking shortcuts change nothing: a TOML text whose possible keys hold no answer word
is returned without parsing, and a YAML-ish text without such a word skips the line masker.
Each is compared with the full path on hand-written attacks and on generated texts."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from repogym.explorer import withhold

WORDS = list(withhold._KEY_WORDS) + ["difficulty", "pr_diff", "truth", "reference_x", "golden"]


def full_toml(text: str, found: list[str]) -> str:
    """mask_toml without the shortcut."""
    saved = withhold._toml_key_free
    withhold._toml_key_free = lambda _t: False
    try:
        return withhold.mask_toml(text, found)
    finally:
        withhold._toml_key_free = saved


def same_toml(text: str) -> None:
    fast_found: list[str] = []
    slow_found: list[str] = []
    assert withhold.mask_toml(text, fast_found) == full_toml(text, slow_found)
    assert fast_found == slow_found


def same_yaml(text: str) -> None:
    fast_found: list[str] = []
    slow_found: list[str] = []
    assert withhold.mask_yamlish(text, fast_found) == withhold._mask_yamlish_lines(text, slow_found)
    assert fast_found == slow_found


ATTACKS = [
    'answer = "42"\n',
    'difficulty = "hard"\n[metadata.repo2env.pr_diff]\nfail_to_pass = ["a"]\n',
    '"ground truth" = "x"\n',
    "'Gold Answer' = 1\n",
    'x = { nested = { expected_output = "7" } }\n',
    '[[cases]]\ninput = "1"\ncorrect = "2"\n',
    '[a."reference_solution".b]\nk = 1\n',
    '"\\u0061nswer" = "42"\n',  # escape spells the key
    "[ground truth]\nx = 1\n",  # not TOML: the line masker reads it
    "[ Gold . x ]\ny = 2\n",
    'desc = "the expected answer is here"\nname = "x"\n',
    'a = """\nanswer = 1\n"""\n',
    "a = '''\n\"solution\" = 2\n'''\n",
    'k = "x" # "answer" in a comment\n',
    "labels = [1, 2]\n",
    "target-os = 'linux'\ntarget_os = 1\n",
    'İanswer = 1\n"İ" = "solution"\n',
    "a = 1\rsolution = 2\n",  # a lone carriage return is a line break for the line masker
    "a = 1\r\nexpected = 2\r\n",
    "a = 1\x0bgold = 2\n",
    "\u2028answer = 1\n",
    'x = "a"\n"b".oracle_x = 1\n',
    "x.y.z = 1\n\"Q\".'rubric' = 2\n",
    "patches = []\nhunk_patch = 1\n",
    "difficulty = 'diff'\nmy_diff = 1\n",
]


@pytest.mark.parametrize("text", ATTACKS)
def test_toml_shortcut_matches_the_full_path(text: str) -> None:
    same_toml(text)


@pytest.mark.parametrize("text", ATTACKS)
def test_yamlish_shortcut_matches_the_full_path(text: str) -> None:
    same_yaml(text.replace(" = ", ": "))
    same_yaml(text)


def test_the_shortcut_words_cover_every_answer_key_alternative() -> None:
    """Each alternative of the answer-key pattern needs one of the shortcut's words."""
    source = withhold._ANSWER_KEY.pattern
    body = re.sub(r"\s+", "", source)[len("^(?:") : -len(")$")]
    alternatives = body.split("|")
    assert len(alternatives) > 10
    for alt in alternatives:
        assert any(w in alt for w in withhold._KEY_WORDS), alt


def test_the_shortcut_is_taken_for_plain_task_configs() -> None:
    plain = 'schema_version = "1.4"\n[metadata]\ndifficulty = "hard"\ncategory = "x"\n'
    assert withhold._toml_key_free(plain)
    assert withhold._toml_key_free('description = "a diff of the difficulty"\n')
    assert not withhold._toml_key_free("[metadata.hidden_diff]\nx = 1\n")
    assert withhold._toml_key_free("[metadata.repo2env.pr_diff]\nx = 1\n")  # provenance
    assert not withhold._toml_key_free('x = { gold = "1" }\n')
    assert not withhold._toml_key_free('"\\u0061nswer" = 1\n')


piece = st.one_of(
    st.sampled_from(WORDS),
    st.sampled_from(["=", " = ", ".", "[", "]", "[[", "]]", "{", "}", ",", "#", '"', "'"]),
    st.sampled_from(["\n", "\r\n", "\r", " ", "\t", "-", "_", "\\", '"""', "'''", ":"]),
    st.sampled_from(["İ", "ß", "K", "\u2028", "\x0b", "Σ"]),
    st.text(alphabet="abcdefgxyzAB_-0123 ", max_size=6),
)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(piece, max_size=40).map("".join))
def test_generated_texts_mask_the_same(text: str) -> None:
    same_toml(text)
    same_yaml(text)


KEYS = st.one_of(st.sampled_from(WORDS), st.from_regex(r"[a-z_\-]{1,8}", fullmatch=True))
VALUES = st.one_of(
    st.integers(0, 9).map(str),
    st.sampled_from(WORDS).map(lambda w: f'"{w}"'),
    st.sampled_from(WORDS).map(lambda w: f"'x {w}'"),
    st.lists(st.sampled_from(WORDS).map(lambda w: f'"{w}"'), max_size=3).map(
        lambda xs: "[" + ", ".join(xs) + "]"
    ),
)


def _key(k: str, style: int) -> str:
    return (k, f'"{k}"', f"'{k}'", f'"{k.upper()} x"')[style]


@st.composite
def toml_docs(draw: st.DrawFn) -> str:
    lines = []
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.integers(0, 3))
        if kind == 0:
            parts = draw(st.lists(KEYS, min_size=1, max_size=3))
            style = draw(st.integers(0, 3))
            lines.append("[" + ".".join(_key(p, style) for p in parts) + "]")
        elif kind == 1:
            lines.append(f"{_key(draw(KEYS), draw(st.integers(0, 3)))} = {draw(VALUES)}")
        elif kind == 2:
            inner = ", ".join(f"{_key(draw(KEYS), 0)} = {draw(VALUES)}" for _ in range(2))
            lines.append(f"{draw(KEYS)} = {{ {inner} }}")
        else:
            lines.append(f"# {draw(KEYS)} = 1")
    return "\n".join(lines) + "\n"


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(toml_docs())
def test_generated_toml_documents_mask_the_same(text: str) -> None:
    same_toml(text)
