"""A small embedded example repository, built by code, for the README's main command and tests.

``build_example_repo(dest)`` writes a git repository of a tiny Python package (``statkit``,
tested with pytest) whose history holds what a miner meets in real projects: bug fixes with
tests that fail before and pass after, a feature with new tests, a docs-only commit, a
tests-only commit, and a commit whose "fix" fixes nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from repogym.atomic import naming, staging_dir
from repogym.errors import RepogymError

_ENV = {
    "GIT_AUTHOR_NAME": "Example Dev",
    "GIT_AUTHOR_EMAIL": "dev@example.org",
    "GIT_COMMITTER_NAME": "Example Dev",
    "GIT_COMMITTER_EMAIL": "dev@example.org",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "statkit"
version = "0.1.0"
requires-python = ">=3.9"

[project.optional-dependencies]
test = ["pytest>=7"]

[tool.pytest.ini_options]
testpaths = ["tests"]
"""

STATS_V1 = '''\
"""Small statistics helpers."""


def mean(values):
    """Arithmetic mean of a sequence of numbers."""
    return sum(values) / len(values)


def clamp(value, low, high):
    """Limit value to the closed range [low, high]."""
    if value < low:
        return low
    if value > high:
        return low
    return value


def percent(part, whole):
    """part as a percentage of whole, rounded to two decimals."""
    return round(part / whole * 100, 2)
'''

TESTS_V1 = """\
import pytest

from statkit.stats import clamp, mean, percent


def test_mean():
    assert mean([1, 2, 3]) == 2


def test_clamp_inside():
    assert clamp(5, 0, 10) == 5


def test_clamp_low():
    assert clamp(-1, 0, 10) == 0


@pytest.mark.parametrize("part, whole, expected", [(1, 4, 25.0), (1, 3, 33.33)])
def test_percent(part, whole, expected):
    assert percent(part, whole) == expected
"""


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, env={**os.environ, **_ENV}
    )


def _commit(repo: Path, files: dict[str, str], message: str, day: int) -> None:
    for rel, text in files.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    _git(repo, "add", "-A")
    date = f"2024-01-{day:02d}T12:00:00+00:00"
    subprocess.run(
        ["git", "commit", "-q", "-m", message],
        cwd=repo,
        check=True,
        capture_output=True,
        env={**os.environ, **_ENV, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date},
    )


class ExampleRepoError(RepogymError):
    """The example repository could not be written (one line; nothing was left at DEST)."""


def build_example_repo(dest: Path) -> Path:
    """Create the example repository at ``dest`` (which must not exist or be empty).

    It is written in a temporary folder beside ``dest`` and renamed into place, so a full or
    read-only disk, or an interrupt, leaves no half-made repository; an :class:`OSError` names
    the path it concerns, a failing ``git`` is an :class:`ExampleRepoError`."""
    dest = Path(dest)
    if dest.exists() and any(dest.iterdir()):
        raise FileExistsError(f"{dest} exists and is not empty")
    parent = dest.absolute().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = staging_dir(parent, "example", dest.name)
    except OSError as exc:
        raise naming(exc, dest) from exc
    try:
        _write_history(tmp)
        os.replace(tmp, dest)  # onto nothing, or onto an empty folder
    except subprocess.CalledProcessError as exc:
        err = (exc.stderr or b"").decode("utf-8", "replace").strip().splitlines()
        reason = err[-1] if err else f"exit {exc.returncode}"
        raise ExampleRepoError(f"{dest}: git {exc.cmd[1]} failed: {reason}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def _write_history(dest: Path) -> None:
    """The example's seven commits, in the empty folder ``dest``."""
    _git(dest, "init", "-q", "-b", "main")
    _commit(
        dest,
        {
            "pyproject.toml": PYPROJECT,
            "README.md": "# statkit\n\nSmall statistics helpers.\n",
            "src/statkit/__init__.py": '"""statkit."""\n',
            "src/statkit/stats.py": STATS_V1,
            "tests/test_stats.py": TESTS_V1,
        },
        "Initial version of statkit",
        1,
    )
    stats = STATS_V1.replace(
        "        return low\n    return value", "        return high\n    return value"
    )
    tests = TESTS_V1 + "\n\ndef test_clamp_high():\n    assert clamp(11, 0, 10) == 10\n"
    _commit(
        dest,
        {"src/statkit/stats.py": stats, "tests/test_stats.py": tests},
        "Fix clamp returning the lower bound for values above the range\n\n"
        "clamp(11, 0, 10) returned 0 instead of 10: values above the upper bound\n"
        "must be limited to the upper bound. Reported in #3.",
        2,
    )
    _commit(
        dest,
        {"README.md": "# statkit\n\nSmall statistics helpers: mean, clamp, percent.\n"},
        "Describe the helpers in the README",
        3,
    )
    stats = stats.replace(
        '    """Arithmetic mean of a sequence of numbers."""\n    return sum(values) / len(values)',
        '    """Arithmetic mean of a sequence of numbers; the mean of nothing is 0.0."""\n'
        "    values = list(values)\n"
        "    if not values:\n"
        "        return 0.0\n"
        "    return sum(values) / len(values)",
    )
    tests += (
        "\n\ndef test_mean_of_empty_is_zero():\n    assert mean([]) == 0.0\n"
        "\n\ndef test_mean_of_generator():\n    assert mean(x for x in (2, 4)) == 3\n"
    )
    _commit(
        dest,
        {"src/statkit/stats.py": stats, "tests/test_stats.py": tests},
        "Make mean() accept empty input and generators\n\n"
        "mean([]) raised ZeroDivisionError and mean() of a generator raised TypeError.\n"
        "An empty input now has mean 0.0, and any iterable is accepted.",
        4,
    )
    tests_more = tests + "\n\ndef test_percent_of_whole():\n    assert percent(3, 3) == 100.0\n"
    _commit(dest, {"tests/test_stats.py": tests_more}, "Add a test for percent of a whole", 5)
    stats_refactor = stats.replace(
        "    return round(part / whole * 100, 2)",
        "    ratio = part / whole\n    return round(ratio * 100, 2)",
    )
    tests_refactor = (
        tests_more + "\n\ndef test_percent_small():\n    assert percent(1, 200) == 0.5\n"
    )
    _commit(
        dest,
        {"src/statkit/stats.py": stats_refactor, "tests/test_stats.py": tests_refactor},
        "Refactor percent and cover small ratios",
        6,
    )
    stats_median = stats_refactor + (
        "\n\ndef median(values):\n"
        '    """Middle of the sorted values (mean of the two middle ones for even counts)."""\n'
        "    ordered = sorted(values)\n"
        "    if not ordered:\n"
        '        raise ValueError("median of an empty sequence")\n'
        "    mid = len(ordered) // 2\n"
        "    if len(ordered) % 2:\n"
        "        return ordered[mid]\n"
        "    return (ordered[mid - 1] + ordered[mid]) / 2\n"
    )
    tests_median = tests_refactor.replace(
        "from statkit.stats import clamp, mean, percent",
        "from statkit.stats import clamp, mean, median, percent",
    ) + (
        "\n\ndef test_median_odd():\n    assert median([3, 1, 2]) == 2\n"
        "\n\ndef test_median_even():\n    assert median([4, 1, 3, 2]) == 2.5\n"
        "\n\ndef test_median_empty():\n    with pytest.raises(ValueError):\n        median([])\n"
    )
    _commit(
        dest,
        {"src/statkit/stats.py": stats_median, "tests/test_stats.py": tests_median},
        "Add median()\n\nProvide a median() helper that returns the middle value of the sorted\n"
        "input, averaging the two middle values for an even number of items, and\n"
        "raising ValueError for an empty input.",
        7,
    )
