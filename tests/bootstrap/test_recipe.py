"""Recipes: Dockerfile shape, stable hash, JSON round trip, test selection, collect counting."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from repogym.bootstrap import Recipe, detect, make_recipe
from repogym.bootstrap.model import DockerfileWriter, count_collected
from repogym.bootstrap.python.versions import PythonInstall

MakeRepo = Callable[..., Path]

PROJECT = {
    "pyproject.toml": """
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "shape"
        version = "1"
        dependencies = ["attrs"]

        [project.optional-dependencies]
        tests = ["pytest"]
    """,
    "requirements.txt": "idna\n",
    "src/shape/__init__.py": "",
    "tests/test_shape.py": "def test_ok():\n    pass\n",
}


def _recipe(make_repo: MakeRepo, pythons: list[PythonInstall], files: dict | None = None) -> Recipe:
    repo = make_repo(files or PROJECT)
    return make_recipe(repo, detect(repo, pythons=pythons))


def test_dependency_steps_come_before_the_source(
    make_repo: MakeRepo, pythons: list[PythonInstall]
) -> None:
    lines = _recipe(make_repo, pythons).dockerfile.splitlines()
    source = lines.index("COPY repo/ /workspace/")
    assert lines[0].startswith("#")
    assert [ln.split()[0] for ln in lines if ln and not ln.startswith(("#", " "))][:3] == [
        "FROM",
        "WORKDIR",
        "ENV",
    ]
    manifest = lines.index("COPY repo/requirements.txt ./")
    install = next(i for i, ln in enumerate(lines) if ln.startswith("RUN uv pip install"))
    editable = next(i for i, ln in enumerate(lines) if "--no-build-isolation-package" in ln)
    assert manifest < install < source < editable
    assert "attrs" in "\n".join(lines[install:source]) and "pytest" in "\n".join(
        lines[install:source]
    )


def test_dockerfile_parses_as_a_dockerfile(
    make_repo: MakeRepo, pythons: list[PythonInstall]
) -> None:
    from repogym import dockerfile as _dockerfile

    recipe = _recipe(make_repo, pythons)
    parsed = _dockerfile.parse(recipe.dockerfile)
    keywords = [ins.keyword for ins in parsed.instructions]
    # The installer (uv) comes right after the environment: shared by every recipe.
    assert keywords == ["FROM", "WORKDIR", "ENV", "RUN", "COPY", "RUN", "COPY", "RUN"]
    assert parsed.instructions[0].args == "python:3.13-slim"


def test_hash_is_stable_across_locations(
    make_repo: MakeRepo, pythons: list[PythonInstall], tmp_path: Path
) -> None:
    first = make_repo(PROJECT, name="a")
    second = tmp_path / "elsewhere" / "b"
    shutil.copytree(first, second)
    r1 = make_recipe(first, detect(first, pythons=pythons))
    r2 = make_recipe(second, detect(second, pythons=pythons))
    assert r1.hash == r2.hash
    assert len(r1.hash) == 64
    assert r1 == r2


def test_hash_follows_content_not_notes(make_repo: MakeRepo, pythons: list[PythonInstall]) -> None:
    recipe = _recipe(make_repo, pythons)
    data = recipe.to_json()
    data["notes"] = ["something else"]
    assert Recipe.from_json(data).hash == recipe.hash
    changed = _recipe(make_repo, pythons, {**PROJECT, "requirements.txt": "idna\nsix\n"})
    assert changed.hash == recipe.hash  # requirements.txt is installed by path: same recipe
    changed = _recipe(
        make_repo, pythons, {**PROJECT, "pyproject.toml": PROJECT["pyproject.toml"] + "\n"}
    )
    assert changed.hash == recipe.hash
    extra_dep = PROJECT["pyproject.toml"].replace('["attrs"]', '["attrs", "six"]')
    assert _recipe(make_repo, pythons, {**PROJECT, "pyproject.toml": extra_dep}).hash != (
        recipe.hash
    )


def test_json_round_trip_and_tamper_check(
    make_repo: MakeRepo, pythons: list[PythonInstall]
) -> None:
    recipe = _recipe(make_repo, pythons)
    assert Recipe.from_json(recipe.to_json()) == recipe
    data = recipe.to_json()
    data["dockerfile"] += "RUN true\n"
    with pytest.raises(ValueError, match="hash"):
        Recipe.from_json(data)


def test_unknown_runner_is_rejected() -> None:
    with pytest.raises(ValueError):
        Recipe("x", "nose", "img", "FROM img\n", "t", "c", "s")


@pytest.mark.parametrize(
    ("runner", "prefix", "ids", "expected"),
    [
        (
            "pytest",
            "python -m pytest -rA",
            ["tests/test_x.py::TestC::test_b[a b-1]", "tests/test_y.py"],
            "python -m pytest -rA 'tests/test_x.py::TestC::test_b[a b-1]' tests/test_y.py",
        ),
        (
            "unittest",
            "python -m unittest -v",
            ["pkg.mod.C.test"],
            "python -m unittest -v pkg.mod.C.test",
        ),
        (
            "vitest",
            "npx vitest run",
            ["a.test.ts > s > t (1)", "a.test.ts > u"],
            "npx vitest run a.test.ts -t '(^|\\s)(s t \\(1\\)|u)$'",
        ),
        ("jest", "npx jest", ["a.test.js", "b.test.js > x"], "npx jest a.test.js b.test.js"),
        ("mocha", "npx mocha", ["math > adds"], "npx mocha --grep '^(math adds)$'"),
        ("node", "node --test", ["alpha"], "node --test --test-name-pattern '^(alpha)$'"),
    ],
)
def test_test_command_for(runner: str, prefix: str, ids: list[str], expected: str) -> None:
    recipe = Recipe("x", runner, "img", "FROM img\n", "FULL", "LIST", prefix)
    assert recipe.test_command_for(ids) == expected
    assert recipe.test_command_for([]) == "FULL"


@pytest.mark.parametrize(
    ("runner", "output", "count"),
    [
        (
            "pytest",
            "tests/test_a.py::test_x\ntests/test_a.py::T::test_y[1]\n\n"
            "=== warnings summary ===\n  tests/test_a.py::test_x: warn\n2 tests collected in 0.1s\n",
            2,
        ),
        ("unittest", "a.T.test_x\nIMPORT ERROR b\n1 tests collected, 1 import errors\n", 1),
        ("jest", '{"numFailedTestSuites":0,"numPendingTests":3,"numTotalTests":3}\n', 3),
        ("vitest", 'noise\n{"numTotalTestSuites":2,"numTotalTests":2,"success":true}\n', 2),
        ("mocha", "  ✔ top\n  math\n    ✔ adds\n\n  2 passing (4ms)\n", 2),
        ("node", "TAP version 13\n1..2\n# tests 2\n# suites 1\n", 2),
        ("go", "TestA\nTestB\nExampleC\nok  \texample.com/x\t0.01s\n", 3),
        ("cargo", "tests::a: test\ntests::b: test\n\n2 tests, 0 benchmarks\n", 2),
    ],
)
def test_count_collected(runner: str, output: str, count: int) -> None:
    assert count_collected(runner, output) == count


def test_dockerfile_writer_wraps_and_quotes() -> None:
    df = DockerfileWriter("header")
    df.from_("python:3.12-slim")
    df.env({"A": "1", "B": "has space"})
    df.copy(["repo/a b.txt"], "./")
    df.run(["echo"] + ["word"] * 40)
    text = df.render()
    assert 'ENV A=1 B="has space"' in text
    assert 'COPY ["repo/a b.txt", "./"]' in text
    assert max(len(line) for line in text.splitlines()) <= 100
    assert " \\\n    word" in text
