"""A small repository history with two good merged PRs and one PR for each pr_diff filter."""

from __future__ import annotations

from tests.sources.conftest import GitRepo

CALC = '''\
"""A tiny calculator."""


def add(a, b):
    """Return a + b."""
    return a + b
'''
MULTIPLY = '''

def multiply(a, b):
    """Return a * b."""
    return a * b
'''
SUBTRACT = '''

def subtract(a, b):
    """Return the difference a - b."""
    return a - b
'''
TESTS = "from pkg.calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
HELPER = "def helper():\n    return 1\n"
OPTS = {"max_files": "3", "max_patch_lines": "40"}


def build_repo(repo: GitRepo) -> dict[str, int]:
    """A history with two good PRs and one PR for each filter; returns PR numbers by kind."""
    repo.write("pkg/__init__.py", "")
    repo.write("pkg/calc.py", CALC)
    for name in "abcd":
        repo.write(f"pkg/{name}.py", HELPER)
    repo.write("pkg/extra.py", HELPER)
    repo.write("README.md", "# calc\n")
    repo.write("docs/usage.md", "# Usage\n")
    repo.write("logo.png", b"\x89PNG\r\n\x1a\n\0\0\0binary")
    repo.write("tests/test_calc.py", TESTS)
    repo.commit("Initial calculator")

    # 1: a GitHub merge commit (kept)
    repo.checkout("-b", "mul")
    repo.write("pkg/calc.py", CALC + MULTIPLY)
    repo.write("tests/test_calc.py", TESTS + "\n\ndef test_mul():\n    pass\n")
    repo.commit("multiply")
    repo.checkout("main")
    repo.merge(
        "mul",
        "Merge pull request #1 from ada/mul",
        "Add a multiply helper to the calculator\n\n"
        "Callers need to multiply two numbers; provide multiply(a, b) next to add.",
    )
    # 2: a squash merge (kept)
    repo.write("pkg/calc.py", CALC + MULTIPLY + SUBTRACT)
    repo.write("docs/usage.md", "# Usage\n\nadd, multiply and subtract.\n")
    repo.commit(
        "Add subtraction to the calculator (#2)\n\n"
        "Provide subtract(a, b) returning the difference of two numbers, and mention it."
    )
    # 3: draft
    repo.write("pkg/extra.py", HELPER + "\n\ndef more():\n    return 2\n")
    repo.commit("WIP: rework the extra helpers (#3)")
    # 4: too many files (max_files=3)
    for name in "abcd":
        repo.write(f"pkg/{name}.py", HELPER + "\n\ndef two():\n    return 2\n")
    repo.commit("Give every helper module a second function (#4)")
    # 5: test-only
    repo.write(
        "tests/test_calc.py", TESTS + "\n\ndef test_add_zero():\n    assert add(0, 0) == 0\n"
    )
    repo.commit("Cover adding zeros (#5)")
    # 6: docs-only
    repo.write("README.md", "# calc\n\nA calculator.\n\nSee docs.\n")
    repo.write("docs/usage.md", "# Usage\n\nadd, multiply and subtract\nall take two numbers.\n")
    repo.commit("Document the calculator better (#6)")
    # 7: revert
    repo.write("pkg/extra.py", HELPER)
    repo.commit('Revert "rework the extra helpers" (#7)\n\nThis reverts commit 1234567890abcdef.')
    # 8: tiny diff
    repo.write("pkg/calc.py", (CALC + MULTIPLY + SUBTRACT).replace("tiny", "small"))
    repo.commit("Call it a small calculator (#8)")
    # 9: binary-only
    repo.write("logo.png", b"\x89PNG\r\n\x1a\n\0\0\0other binary")
    repo.commit("New logo for the calculator (#9)")
    # 10: too large (max_patch_lines=40)
    repo.write("pkg/big.py", "".join(f"V{i} = {i}\n" for i in range(60)))
    repo.commit("Add a table of sixty constants (#10)")
    return {"kept": 2}
