"""What CI configurations, tox, nox and requirement files add to a Python recipe (static)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from repogym.bootstrap import detect, make_recipe
from repogym.bootstrap.ci import read_ci, read_makefile
from repogym.bootstrap.installs import apt_packages, is_test_command, parse_install, split_commands
from repogym.bootstrap.python.requirements import local_target
from repogym.bootstrap.python.toxnox import expand_braces, read_noxfile
from repogym.bootstrap.python.versions import PythonInstall

MakeRepo = Callable[..., Path]

PYPROJECT = """
    [build-system]
    requires = ["setuptools>=61"]
    build-backend = "setuptools.build_meta"

    [project]
    name = "demo"
    version = "1"
    dependencies = ["attrs"]

    [project.optional-dependencies]
    test = ["pytest"]
    yaml = ["pyyaml"]
    full = ["rich"]
    docs = ["sphinx"]
"""
TEST = "import pytest\n\ndef test_a():\n    assert True\n"


def _flat(dockerfile: str) -> str:
    return dockerfile.replace(" \\\n    ", " ")


WORKFLOW = """
    name: CI
    on: [push, pull_request]
    jobs:
      lint:
        runs-on: ubuntu-latest
        steps:
          - uses: actions/checkout@v4
          - run: pip install ruff flake8
          - run: ruff check .
      tests:
        runs-on: ubuntu-latest
        strategy:
          matrix:
            python-version: ["3.10", "3.11"]
        steps:
          - uses: actions/checkout@v4
          - uses: actions/setup-python@v5
            with:
              python-version: ${{ matrix.python-version }}
          - name: Install
            run: |
              sudo apt-get update
              sudo apt-get install -y --no-install-recommends libxml2-dev \\
                graphviz
              python -m pip install --upgrade pip
              pip install -e .[test,yaml] pytest-timeout ${{ matrix.extra }}
          - run: python -m pytest -q
          - run: pip install codecov-cli
"""


def test_workflow_extras_apt_and_python(make_repo: MakeRepo, pythons: list[PythonInstall]) -> None:
    repo = make_repo(
        {
            "pyproject.toml": PYPROJECT,
            ".github/workflows/ci.yml": WORKFLOW,
            "tests/test_a.py": TEST,
        }
    )
    d = detect(repo, pythons=pythons)
    py = d.python
    assert py is not None and d.supported
    # The test job's install line: its extras are the project's extras in the recipe.
    assert py.extras == ["test", "yaml"]
    assert "pyyaml" in py.test_dependencies and "pytest-timeout" in py.test_dependencies
    assert "sphinx" not in py.test_dependencies and "ruff" not in py.test_dependencies
    assert "codecov-cli" not in py.test_dependencies  # after the tests: not needed for them
    assert [name for name, _ in py.apt_packages] == ["libxml2-dev", "graphviz"]
    assert py.apt_packages[0][1] == ".github/workflows/ci.yml:23"
    assert d.base_image == "python:3.11-slim"  # newest Python the CI tests
    recipe = make_recipe(repo, d)
    flat = _flat(recipe.dockerfile)
    assert "--no-build-isolation-package demo -e 'demo[test,yaml] @ file:///workspace'" in flat
    assert "# as the CI does: .github/workflows/ci.yml:26: pip install -e .[test,yaml]" in flat
    assert "# Debian packages the CI installs (.github/workflows/ci.yml:23)" in flat
    apt = next(ln for ln in flat.splitlines() if ln.startswith("RUN apt-get update"))
    assert "apt-get install -y --no-install-recommends libxml2-dev graphviz" in apt
    assert any("matrix.extra" in n and "could not read" in n for n in recipe.notes)
    assert any("Debian packages from the CI: libxml2-dev, graphviz" in n for n in recipe.notes)


def test_gitlab_ci_and_makefile_targets(make_repo: MakeRepo, pythons: list[PythonInstall]) -> None:
    repo = make_repo(
        {
            "pyproject.toml": PYPROJECT,
            ".gitlab-ci.yml": """
                image: python:3.10
                variables:
                  GIT_SUBMODULE_STRATEGY: recursive
                .base:
                  before_script:
                    - apt-get update && apt-get install -y gettext
                test:
                  extends: .base
                  script:
                    - make install-test
                    - make test
                docs:
                  script:
                    - pip install -e .[docs]
                    - sphinx-build docs out
            """,
            "Makefile": "PYTHON ?= python3\n.PHONY: test\n"
            "install-test:\n\t$(PYTHON) -m pip install -e '.[full]' -r requirements-ci.txt\n"
            "test: install-test\n\t$(PYTHON) -m pytest tests\n",
            "requirements-ci.txt": "hypothesis\n",
            "tests/test_a.py": TEST,
        }
    )
    facts = read_ci(repo)
    assert facts.job == ".gitlab-ci.yml job 'test'"
    assert facts.submodules == ".gitlab-ci.yml:3"
    assert facts.apt == [("gettext", ".gitlab-ci.yml:6")]
    assert [(s.where, s.extras, s.requirement_files) for s in facts.installs] == [
        ("Makefile:4", ["full"], ["requirements-ci.txt"])
    ]
    d = detect(repo, pythons=pythons)
    assert d.python is not None
    assert "full" in d.python.extras and "docs" not in d.python.extras
    assert "requirements-ci.txt" in d.python.requirement_files
    assert d.base_image == "python:3.10-slim"


def test_makefile_alone(tmp_path: Path) -> None:
    targets = read_makefile(
        "VENV := .venv\ninstall:\n\t@pip install -e .[dev]\n"
        "test: install  # run tests\n\t-$(PYTHON) -m pytest\n"
    )
    assert targets["test"].prereqs == ["install"]
    assert targets["test"].commands == [(5, "-python -m pytest")]
    (tmp_path / "Makefile").write_text(
        "install:\n\tpip install -e .[dev]\ntest: install\n\tpytest\n"
    )
    facts = read_ci(tmp_path)
    assert facts.job == "Makefile job 'test'"
    assert facts.installs[0].extras == ["dev"] and facts.installs[0].where == "Makefile:2"


def test_shell_commands_and_installs() -> None:
    script = (
        "pip install 'git+https://example.invalid/x.git#egg=x' ./plugins/p && echo ok # note\n"
        "uv sync --extra full --group test --no-dev\n"
        "poetry install --with test,docs -E yaml\n"
        "python3 -m pip install -r requirements/ci.txt --group lint -c c.txt -i https://i pkg\n"
    )
    commands = split_commands(script, 10)
    assert [line for line, _ in commands] == [10, 10, 11, 12, 13]
    first = parse_install(commands[0][1], "f:10")
    assert first is not None
    assert first.packages == ["git+https://example.invalid/x.git#egg=x"]
    assert first.local == ["plugins/p"] and not first.project
    assert parse_install(commands[1][1], "x") is None  # echo
    uv = parse_install(commands[2][1], "x")
    assert uv is not None and (uv.tool, uv.extras, uv.groups, uv.default_groups) == (
        "uv-sync",
        ["full"],
        ["test"],
        False,
    )
    poetry = parse_install(commands[3][1], "x")
    assert poetry is not None and (poetry.groups, poetry.extras) == (["test", "docs"], ["yaml"])
    pip = parse_install(commands[4][1], "x")
    assert pip is not None
    assert (pip.requirement_files, pip.groups, pip.packages) == (
        ["requirements/ci.txt"],
        ["lint"],
        ["pkg"],
    )
    assert apt_packages(
        ["sudo", "apt-get", "-qq", "install", "-y", "libffi-dev=3.4", "python3-dev"]
    ) == ["libffi-dev"]
    assert apt_packages(["apt-get", "update"]) is None
    for cmd in ("python -m pytest", "uv run pytest -x", "tox -e py", "make test", "nox -s tests"):
        assert is_test_command(cmd.split()), cmd
    assert not is_test_command(["pip", "install", "pytest"])


def test_editable_extras_in_requirements_are_kept(
    make_repo: MakeRepo, pythons: list[PythonInstall]
) -> None:
    # `-e .[full]` in a requirements file installs the project with its `full` extra.
    repo = make_repo(
        {
            "pyproject.toml": PYPROJECT,
            "requirements-test.txt": "-e .[full]\npytest>=7\n-e ./plugins/extra_plugin\n",
            "tests/test_a.py": TEST,
        }
    )
    d = detect(repo, pythons=pythons)
    py = d.python
    assert py is not None
    assert "full" in py.extras and "rich" in py.test_dependencies
    assert py.local_installs == [("plugins/extra_plugin", "requirements-test.txt")]
    flat = _flat(make_recipe(repo, d).dockerfile)
    assert "-e 'demo[test,full] @ file:///workspace'" in flat
    assert "-e ./plugins/extra_plugin" in flat
    assert local_target("'.[a, b]'") == ("", ["a", "b"])
    assert local_target("git+https://x/y") is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("py{310,311,312,313,314,py3}", ["py310", "py311", "py312", "py313", "py314", "pypy3"]),
        ("py{310,311}-{a,b}", ["py310-a", "py310-b", "py311-a", "py311-b"]),
        (
            "py3{9,10}-django{42,{50,51}}",
            ["py39-django42", "py39-django50", "py39-django51"]
            + ["py310-django42", "py310-django50", "py310-django51"],
        ),
        ("lint", ["lint"]),
    ],
)
def test_tox_brace_expansion(text: str, expected: list[str]) -> None:
    assert expand_braces(text) == expected


def test_tox_envlist_picks_the_newest_python(
    make_repo: MakeRepo, pythons: list[PythonInstall]
) -> None:
    tox = """
        [tox]
        envlist =
            py{310,311,312,313,314,py3}
            lint
        [testenv]
        extras = test
        dependency_groups = ci
        commands = pytest
    """
    pyproject = PYPROJECT + '\n[dependency-groups]\nci = ["freezegun"]\n'
    repo = make_repo({"pyproject.toml": pyproject, "tox.ini": tox, "tests/test_a.py": TEST})
    d = detect(repo, pythons=pythons)
    # The envlist reaches 3.14: nothing caps below the newest installed (3.13). The old parser
    # read only `py{310}` and capped at 3.10.
    assert d.base_image == "python:3.13-slim"
    assert d.python is not None and "freezegun" in d.python.test_dependencies
    narrow = tox.replace("py{310,311,312,313,314,py3}", "py{39,310}-{a,b}")
    repo = make_repo({"pyproject.toml": pyproject, "tox.ini": narrow, "tests/test_a.py": TEST})
    assert detect(repo, pythons=pythons).base_image == "python:3.10-slim"


NOXFILE = """
    import nox

    PYPROJECT = nox.project.load_toml("pyproject.toml")
    BASE = ["pytest", "pytest-mock"]

    @nox.session(python=["3.11", "3.12"])
    def tests(session: nox.Session) -> None:
        session.install(*nox.project.dependency_groups(PYPROJECT, "test"))
        session.install("-e", ".[yaml]", *BASE, f"coverage{session.python}")
        session.run("pytest", *session.posargs)

    @nox.session(name="docs")
    def build_docs(session):
        session.install("sphinx")
"""


def test_noxfile_with_nested_parentheses(make_repo: MakeRepo, pythons: list[PythonInstall]) -> None:
    pyproject = PYPROJECT + '\n[dependency-groups]\ntest = ["hypothesis", "respx"]\n'
    repo = make_repo({"pyproject.toml": pyproject, "noxfile.py": NOXFILE, "tests/test_a.py": TEST})
    sessions = read_noxfile((repo / "noxfile.py").read_text())
    assert [s.name for s in sessions] == ["tests", "docs"]
    assert sessions[0].runs_pytest
    installs = sessions[0].installs
    assert installs[0].groups == ["test"] and installs[0].packages == []
    assert installs[1].extras == ["yaml"] and installs[1].packages == ["pytest", "pytest-mock"]
    d = detect(repo, pythons=pythons)
    py = d.python
    assert py is not None
    deps = py.test_dependencies
    # The group's members are installed; no PyPI package called "test" is.
    assert "hypothesis" in deps and "respx" in deps and "pytest-mock" in deps
    assert "test" not in deps and "sphinx" not in deps
    assert "yaml" in py.extras


def test_conflicting_exact_pins_defer_to_the_requirement_file(
    make_repo: MakeRepo, pythons: list[PythonInstall]
) -> None:
    # setup.py's tests_require pins one version, the requirements file CI installs another:
    # both in one install cannot resolve; the file wins and the other pin is relaxed.
    repo = make_repo(
        {
            "setup.py": "from setuptools import setup\n"
            "setup(name='req', tests_require=['pytest-httpbin==0.0.7', 'pytest-mock'])\n",
            "requirements-dev.txt": "-e .[socks]\npytest-httpbin==1.0.0\npytest-mock==2.0.0\n",
            "tox.ini": "[testenv]\ndeps = -rrequirements-dev.txt\ncommands = pytest\n",
            "tests/test_r.py": TEST,
        }
    )
    py = detect(repo, pythons=pythons).python
    assert py is not None
    assert "pytest-httpbin==1.0.0" in py.dependencies and "pytest-mock==2.0.0" in py.dependencies
    assert "pytest-httpbin==0.0.7" not in py.test_dependencies + py.dependencies
    assert any("pytest-httpbin==0.0.7 relaxed to pytest-httpbin" in n for n in py.notes)


def test_uv_run_and_native_toml_tox(make_repo: MakeRepo, pythons: list[PythonInstall]) -> None:
    pyproject = PYPROJECT + (
        '\n[dependency-groups]\ndev = ["tox"]\ntests = ["pytest", "freezegun"]\n'
        'docs = ["sphinx"]\n'
        '\n[tool.tox]\nenv_list = ["py3.12", "py3.11", "style"]\n'
        '[tool.tox.env_run_base]\ndependency_groups = ["tests"]\n'
        'commands = [["pytest", "-v", {replace = "posargs", default = [], extend = true}]]\n'
    )
    workflow = """
        jobs:
          tests:
            steps:
              - run: uv run --locked --no-default-groups --group dev --with pytest-sugar tox run
    """
    repo = make_repo(
        {"pyproject.toml": pyproject, ".github/workflows/t.yml": workflow, "tests/test_a.py": TEST}
    )
    d = detect(repo, pythons=pythons)
    py = d.python
    assert py is not None
    assert "freezegun" in py.test_dependencies and "pytest-sugar" in py.test_dependencies
    assert "sphinx" not in py.test_dependencies and "tox" not in py.test_dependencies
    assert d.base_image == "python:3.12-slim"  # the newest env of the TOML env_list
    assert any(n == "CI: read the test job .github/workflows/t.yml job 'tests'" for n in d.notes)
    assert "UV_COMPILE_BYTECODE=1" in make_recipe(repo, d).dockerfile


def test_branch_urls_and_local_paths_in_tox_deps(
    make_repo: MakeRepo, pythons: list[PythonInstall]
) -> None:
    tox = """
        [tox]
        envlist = py{39,310}
        [testenv]
        deps =
            freezegun
            https://github.com/example/dep/archive/main.tar.gz
            git+https://example.invalid/other.git@v1.2#egg=other
            examples/tutorial[test]
        commands = pytest
    """
    repo = make_repo({"pyproject.toml": PYPROJECT, "tox.ini": tox, "tests/test_a.py": TEST})
    d = detect(repo, pythons=pythons)
    py = d.python
    assert py is not None
    deps = py.test_dependencies
    assert "freezegun" in deps and "git+https://example.invalid/other.git@v1.2#egg=other" in deps
    assert not any("archive/main" in r for r in deps)
    assert any("follows a branch" in n for n in d.notes)
    assert py.local_installs == [("examples/tutorial[test]", "tox.ini [testenv]")]
    assert "-e './examples/tutorial[test]'" in _flat(make_recipe(repo, d).dockerfile)
