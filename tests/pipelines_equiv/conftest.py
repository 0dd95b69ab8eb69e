"""``equivalence_tests`` fixtures: a small Python package whose functions cover every case the
pipeline tells apart, as a real git repository (isolated git, fixed identity)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sources.conftest import GitRepo, isolated_git, make_repo, pin_git_env

__all__ = ["GitRepo", "isolated_git", "make_repo"]

PYPROJECT = """\
[project]
name = "mathkit"
version = "0.1.0"
requires-python = ">=3.9"
[project.optional-dependencies]
test = ["pytest"]
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"
"""

CORE = '''\
"""Small helpers, some of them pure."""

import random


def clamp(value: int, low: int, high: int) -> int:
    """Return ``value`` limited to the closed range [low, high].

    Raises ValueError when ``low`` is greater than ``high``.
    """
    if low > high:
        raise ValueError("empty range")
    if value < low:
        return low
    if value > high:
        return high
    return value


def slugify(text):
    """Lower-case ``text`` and join its words with single dashes; only letters and digits
    of each word are kept (underscores and dashes separate words)."""
    words = []
    for word in text.replace("_", " ").replace("-", " ").split():
        kept = "".join(ch for ch in word.lower() if ch.isalnum())
        if kept:
            words.append(kept)
    return "-".join(words)


def push_all(stack: list[int], items: list[int]) -> int:
    """Append ``items`` to ``stack`` in order and return the new height."""
    for item in items:
        stack.append(item)
    return len(stack)


def unique_words(text):
    """The distinct words of ``text``."""
    found = set(text.split())
    return list(found)


def default_config(name: str) -> dict:
    """The settings a new component called ``name`` starts with."""
    settings = {"retries": 3, "timeout": 10}
    return settings


def shuffled(items):
    """A shuffled copy of ``items``."""
    out = list(items)
    random.shuffle(out)
    return out


def never_tested(a: int, b: int) -> int:
    """A function no test calls."""
    total = a + b
    return total * 2
'''

TESTS = """\
import pytest

from mathkit.core import clamp, default_config, push_all, shuffled, slugify, unique_words


@pytest.mark.parametrize("value,low,high", [(5, 0, 10), (-3, 0, 10), (42, 0, 10), (7, 7, 7)])
def test_clamp_stays_in_range(value, low, high):
    assert low <= clamp(value, low, high) <= high


def test_clamp_rejects_an_empty_range():
    with pytest.raises(ValueError):
        clamp(1, 5, 0)


TITLES = [
    "Hello World", "  Leading and trailing  ", "Already-slugged", "MiXeD CaSe Words",
    "Tabs\\tand\\nnewlines", "Punctuation, here!", "under_score and more", "Numbers 123 and 456",
    "multiple   spaces   inside", "a", "", "UPPER", "x-y-z", "Trailing dash-", "Crème brûlée",
    "one_two-three four",
]


@pytest.mark.parametrize("title", TITLES)
def test_slugify_is_idempotent(title):
    once = slugify(title)
    assert slugify(once) == once
    assert " " not in once


def test_push_all_appends_in_order():
    stack = [1]
    height = push_all(stack, [2, 3])
    assert height == len(stack) and stack[-2:] == [2, 3]


SENTENCES = [
    "the quick brown fox jumps", "alpha beta gamma delta epsilon", "red green blue cyan magenta",
    "one two three four five six", "spam eggs ham bacon toast", "north south east west up",
    "lorem ipsum dolor sit amet", "mercury venus earth mars jupiter", "do re mi fa sol la",
    "apple banana cherry date fig", "cat dog bird fish frog", "ruby pearl opal jade onyx",
]


def test_unique_words():
    for sentence in SENTENCES:
        assert sorted(unique_words(sentence)) == sorted(set(sentence.split()))


def test_default_config():
    for name in ("db", "cache", "queue"):
        assert default_config(name)["retries"] > 0


def test_shuffled_keeps_items():
    assert sorted(shuffled([3, 1, 2])) == [1, 2, 3]
"""


def build_mathkit(repo: GitRepo) -> str:
    repo.write("pyproject.toml", PYPROJECT)
    repo.write("src/mathkit/__init__.py", "")
    repo.write("src/mathkit/core.py", CORE)
    repo.write("tests/test_core.py", TESTS)
    return repo.commit("Initial mathkit package")


@pytest.fixture(scope="session")
def mathkit(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    mp = pytest.MonkeyPatch()
    pin_git_env(mp)
    repo = GitRepo(tmp_path_factory.mktemp("repos") / "mathkit")
    build_mathkit(repo)
    yield repo.path
    mp.undo()
