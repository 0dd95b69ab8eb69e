"""Detection of Python layouts: what gets installed, which interpreter and runner."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from repogym.bootstrap import UnsupportedRepo, detect, make_recipe
from repogym.bootstrap.python.project import parse_requirement_lines, parse_setup_py
from repogym.bootstrap.python.versions import PythonInstall

MakeRepo = Callable[..., Path]

PYTEST_TEST = """
import pytest

def test_a():
    assert True
"""
UNITTEST_TEST = """
import unittest

class T(unittest.TestCase):
    def test_a(self):
        self.assertTrue(True)
"""


def test_pep621_with_test_extra(make_repo: MakeRepo, pythons: list[PythonInstall]) -> None:
    repo = make_repo(
        {
            "pyproject.toml": """
                [build-system]
                requires = ["hatchling"]
                build-backend = "hatchling.build"

                [project]
                name = "demo-pkg"
                version = "1.0"
                requires-python = ">=3.10"
                dependencies = ["requests>=2", "attrs"]

                [project.optional-dependencies]
                test = ["pytest>=7", "demo-pkg[extra]"]
                extra = ["rich"]
                docs = ["sphinx"]

                [tool.pytest.ini_options]
                addopts = "--cov=demo -n auto"
                testpaths = ["tests"]
            """,
            "src/demo_pkg/__init__.py": "",
            "tests/test_a.py": PYTEST_TEST,
        }
    )
    d = detect(repo, pythons=pythons)
    assert (d.language, d.runner, d.base_image, d.supported) == (
        "python",
        "pytest",
        "python:3.13-slim",
        True,
    )
    py = d.python
    assert py is not None
    assert py.dependencies == ["requests>=2", "attrs"]
    # The self-reference demo-pkg[extra] expands to the extra's requirements.
    assert py.test_dependencies[:2] == ["pytest>=7", "rich"]
    assert "pytest-cov" in py.test_dependencies and "pytest-xdist" in py.test_dependencies
    assert "sphinx" not in py.test_dependencies
    assert py.installable and py.backend == "hatchling.build"
    # hatchling builds editable wheels with `editables`; without build isolation it comes first.
    assert py.build_requires == ["hatchling", "editables"]
    assert py.extras == ["test"]
    assert py.src_layout
    recipe = make_recipe(repo, d)
    flat = recipe.dockerfile.replace(" \\\n    ", " ")
    # Built without isolation (its build requirements are installed), named so that only it is.
    assert "--no-build-isolation-package demo-pkg -e 'demo-pkg[test] @ file:///workspace'" in flat
    assert recipe.test_command.startswith("python -m pytest -rA")


def test_setup_cfg_project(make_repo: MakeRepo, pythons: list[PythonInstall]) -> None:
    repo = make_repo(
        {
            "setup.cfg": """
                [metadata]
                name = cfgpkg
                classifiers =
                    Programming Language :: Python :: 3.9
                    Programming Language :: Python :: 3.10

                [options]
                python_requires = >=3.8
                install_requires =
                    six>=1.0  # comment
                    click

                [options.extras_require]
                testing =
                    pytest
                    mock

                [tool:pytest]
                testpaths = tests
            """,
            "setup.py": "from setuptools import setup\nsetup()\n",
            "tests/test_x.py": PYTEST_TEST,
        }
    )
    d = detect(repo, pythons=pythons)
    py = d.python
    assert py is not None and d.runner == "pytest"
    assert py.dependencies == ["six>=1.0", "click"]
    assert py.test_dependencies == ["pytest", "mock"]
    assert py.extras == ["testing"]
    # Classifiers stop at 3.10: the newest tested version is preferred over 3.13.
    assert d.base_image == "python:3.10-slim"
    assert py.build_requires == ["setuptools", "wheel"]


def test_setup_py_only(make_repo: MakeRepo, pythons: list[PythonInstall]) -> None:
    repo = make_repo(
        {
            "setup.py": """
                from distutils.core import setup
                REQUIRES = ["numpy<2", "scipy"]
                setup(
                    name="oldpkg",
                    install_requires=REQUIRES,
                    tests_require=["nose", "pytest"],
                    python_requires=">=3.6",
                    extras_require={"test": ["hypothesis"]},
                )
            """,
            "oldpkg/__init__.py": "",
            "oldpkg/tests/test_old.py": UNITTEST_TEST,
        }
    )
    d = detect(repo, pythons=pythons)
    py = d.python
    assert py is not None
    assert py.name == "oldpkg" and py.installable
    assert py.dependencies == ["numpy<2", "scipy"]
    assert set(py.test_dependencies) == {"hypothesis", "nose", "pytest"}
    # distutils is gone from 3.12: 3.11 is chosen.
    assert d.base_image == "python:3.11-slim"
    assert d.runner == "pytest"  # pytest is a declared test requirement
    assert any("distutils" in n for n in d.notes)


def test_requirements_files(make_repo: MakeRepo, pythons: list[PythonInstall]) -> None:
    repo = make_repo(
        {
            "requirements.txt": "requests==2.31.0\n-c constraints.txt\n",
            "constraints.txt": "urllib3<3\n",
            "requirements-test.txt": "-r requirements.txt\npytest==8.0.0\n",
            "requirements-dev.txt": "black\n",
            "app.py": "",
            "tests/test_app.py": PYTEST_TEST,
        }
    )
    d = detect(repo, pythons=pythons)
    py = d.python
    assert py is not None and d.runner == "pytest"
    assert py.requirement_files == ["requirements.txt", "requirements-test.txt"]
    assert py.copy_files == ["constraints.txt", "requirements-test.txt", "requirements.txt"]
    assert not py.installable
    assert "black" not in py.test_dependencies
    assert "pytest" not in py.test_dependencies  # already in requirements-test.txt
    recipe = make_recipe(repo, d)
    assert "COPY repo/constraints.txt repo/requirements-test.txt repo/requirements.txt ./" in (
        recipe.dockerfile
    )
    flat = recipe.dockerfile.replace(" \\\n    ", " ")
    assert "-r requirements.txt -r requirements-test.txt" in flat
    assert recipe.env["PYTHONPATH"] == "/workspace"
    assert recipe.test_command.endswith(" tests")


def test_requirements_in_subfolder(make_repo: MakeRepo, pythons: list[PythonInstall]) -> None:
    repo = make_repo(
        {
            "requirements/base.txt": "attrs\n",
            "requirements/test.txt": "-r base.txt\npytest\n",
            "pyproject.toml": '[project]\nname = "x"\nversion = "1"\n',
            "tests/test_x.py": PYTEST_TEST,
        }
    )
    d = detect(repo, pythons=pythons)
    assert d.python is not None
    assert d.python.requirement_files == ["requirements/base.txt", "requirements/test.txt"]
    recipe = make_recipe(repo, d)
    assert "COPY repo/requirements/base.txt repo/requirements/test.txt ./requirements/" in (
        recipe.dockerfile
    )


def test_requirements_naming_the_repo_are_inlined(
    make_repo: MakeRepo, pythons: list[PythonInstall]
) -> None:
    repo = make_repo(
        {
            "setup.py": "from setuptools import setup\nsetup(name='me')\n",
            "test-requirements.txt": "-e .\npytest>=7 --hash=sha256:abc\nfreezegun\n",
            "tests/test_me.py": PYTEST_TEST,
        }
    )
    d = detect(repo, pythons=pythons)
    py = d.python
    assert py is not None
    assert py.requirement_files == []
    assert py.dependencies == ["pytest>=7", "freezegun"]
    assert any("name the repository itself" in n for n in d.notes)


def test_tox_deps_and_commands(make_repo: MakeRepo, pythons: list[PythonInstall]) -> None:
    repo = make_repo(
        {
            "tox.ini": """
                [tox]
                envlist = py{38,39,310}, lint

                [testenv]
                deps =
                    -r{toxinidir}/requirements-ci.txt
                    py38: importlib-metadata
                    {[base]deps}
                    freezegun
                commands = pytest {posargs}

                [testenv:lint]
                deps = flake8
                commands = flake8
            """,
            "requirements-ci.txt": "responses\n",
            "lib.py": "",
            "test_lib.py": "def test_x():\n    pass\n",
        }
    )
    d = detect(repo, pythons=pythons)
    py = d.python
    assert py is not None and d.runner == "pytest"
    assert "freezegun" in py.test_dependencies
    assert "importlib-metadata" not in py.test_dependencies
    assert "flake8" not in py.test_dependencies
    assert "pytest" in py.test_dependencies
    assert py.requirement_files == ["requirements-ci.txt"]
    assert d.base_image == "python:3.10-slim"  # newest python of the envlist


def test_poetry_project(make_repo: MakeRepo, pythons: list[PythonInstall]) -> None:
    repo = make_repo(
        {
            "pyproject.toml": """
                [tool.poetry]
                name = "poetic"
                version = "0.1.0"

                [tool.poetry.dependencies]
                python = "^3.9,<3.12"
                httpx = "^0.24.1"
                pydantic = {version = "~2.4", extras = ["email"]}
                local-lib = {path = "../local-lib"}
                optional-thing = {version = "*", optional = true}

                [tool.poetry.group.test.dependencies]
                pytest = "^7.4"

                [tool.poetry.group.dev.dependencies]
                mypy = "*"

                [build-system]
                requires = ["poetry-core>=1.0.0"]
                build-backend = "poetry.core.masonry.api"
            """,
            "poetic/__init__.py": "",
            "tests/test_p.py": PYTEST_TEST,
        }
    )
    d = detect(repo, pythons=pythons)
    py = d.python
    assert py is not None
    assert d.base_image == "python:3.11-slim"
    assert py.dependencies == ["httpx>=0.24.1,<0.25", "pydantic[email]>=2.4,<2.5"]
    assert py.test_dependencies == ["pytest>=7.4,<8"]
    assert py.backend == "poetry.core.masonry.api"
    assert any("local-lib (path dependency)" in n for n in d.notes)


def test_poetry_without_build_system_is_not_installed(
    make_repo: MakeRepo, pythons: list[PythonInstall]
) -> None:
    repo = make_repo(
        {
            "pyproject.toml": '[tool.poetry]\nname = "x"\n[tool.poetry.dev-dependencies]\n'
            'pytest = "*"\n',
            "test_x.py": PYTEST_TEST,
        }
    )
    d = detect(repo, pythons=pythons)
    assert d.python is not None and not d.python.installable
    assert d.python.test_dependencies == ["pytest"]
    assert any("no test-specific" in n for n in d.notes)


def test_dependency_groups_and_hatch(make_repo: MakeRepo, pythons: list[PythonInstall]) -> None:
    repo = make_repo(
        {
            "pyproject.toml": """
                [project]
                name = "grp"
                version = "1"
                dependencies = []

                [dependency-groups]
                base-test = ["coverage"]
                test = ["pytest", {include-group = "base-test"}]
                lint = ["ruff"]

                [tool.hatch.envs.hatch-test]
                extra-dependencies = ["pytest-mock"]
            """,
            "tests/test_g.py": PYTEST_TEST,
        }
    )
    d = detect(repo, pythons=pythons)
    py = d.python
    assert py is not None
    assert set(py.test_dependencies) == {"pytest", "coverage", "pytest-mock"}
    assert "ruff" not in py.test_dependencies


def test_unittest_fallback(make_repo: MakeRepo, pythons: list[PythonInstall]) -> None:
    repo = make_repo({"calc.py": "", "tests/__init__.py": "", "tests/test_calc.py": UNITTEST_TEST})
    d = detect(repo, pythons=pythons)
    assert d.runner == "unittest"
    py = d.python
    assert py is not None
    assert (py.unittest_start, py.unittest_top) == ("tests", ".")
    recipe = make_recipe(repo, d)
    assert "pip install" not in recipe.dockerfile  # nothing to install
    assert recipe.test_command == "python -m unittest discover -v -s tests -t . -p 'test*.py'"
    assert recipe.test_command_for(["tests.test_calc.T.test_a"]) == (
        "python -m unittest -v tests.test_calc.T.test_a"
    )


def test_unittest_tests_folder_without_init(
    make_repo: MakeRepo, pythons: list[PythonInstall]
) -> None:
    repo = make_repo({"calc.py": "", "tests/test_calc.py": UNITTEST_TEST})
    recipe = make_recipe(repo, detect(repo, pythons=pythons))
    assert "-s tests -t tests" in recipe.test_command
    assert recipe.test_command_for(["test_calc.T.test_a"]).startswith('PYTHONPATH="tests')


def test_conftest_means_pytest(make_repo: MakeRepo, pythons: list[PythonInstall]) -> None:
    repo = make_repo({"conftest.py": "", "tests/test_u.py": UNITTEST_TEST})
    d = detect(repo, pythons=pythons)
    assert d.runner == "pytest"
    assert d.python is not None and "pytest" in d.python.test_dependencies


def test_noxfile_pytest(make_repo: MakeRepo, pythons: list[PythonInstall]) -> None:
    repo = make_repo(
        {
            "noxfile.py": """
                import nox

                @nox.session
                def tests(session):
                    session.install("-r", "reqs-test.txt")
                    session.install("pytest", "respx", ".")
                    session.run("pytest")

                @nox.session
                def lint(session):
                    session.install("flake8")
            """,
            "reqs-test.txt": "anyio\n",
            "tests/test_n.py": UNITTEST_TEST,
        }
    )
    d = detect(repo, pythons=pythons)
    py = d.python
    assert py is not None and d.runner == "pytest"
    assert py.test_dependencies == ["pytest", "respx"]
    assert py.requirement_files == ["reqs-test.txt"]


def test_scm_versioning(make_repo: MakeRepo, pythons: list[PythonInstall]) -> None:
    repo = make_repo(
        {
            "pyproject.toml": """
                [build-system]
                requires = ["setuptools>=64", "setuptools-scm>=8"]
                build-backend = "setuptools.build_meta"
                [project]
                name = "scm"
                dynamic = ["version"]
            """,
            "test_s.py": PYTEST_TEST,
        }
    )
    recipe = make_recipe(repo, detect(repo, pythons=pythons))
    assert recipe.env["SETUPTOOLS_SCM_PRETEND_VERSION"] == "0.0.0"
    assert "SETUPTOOLS_SCM_PRETEND_VERSION=0.0.0" in recipe.dockerfile


def test_scm_table_without_the_build_requirement(
    make_repo: MakeRepo, pythons: list[PythonInstall]
) -> None:
    # setuptools-scm comes from the CI's install list, not from build-system.requires: once
    # installed it still takes the version over because of the [tool.setuptools_scm] table.
    repo = make_repo(
        {
            "pyproject.toml": """
                [build-system]
                requires = ["setuptools>=61"]
                build-backend = "setuptools.build_meta"
                [project]
                name = "scmtable"
                dynamic = ["version"]
                [tool.setuptools_scm]
                version_scheme = "post-release"
            """,
            "test_s.py": PYTEST_TEST,
        }
    )
    recipe = make_recipe(repo, detect(repo, pythons=pythons))
    assert recipe.env["SETUPTOOLS_SCM_PRETEND_VERSION"] == "0.0.0"
    plain = make_repo(
        {
            "pyproject.toml": """
                [build-system]
                requires = ["setuptools>=61"]
                build-backend = "setuptools.build_meta"
                [project]
                name = "plain"
                version = "1.0"
            """,
            "test_s.py": PYTEST_TEST,
        }
    )
    assert "SETUPTOOLS_SCM_PRETEND_VERSION" not in make_recipe(plain, detect(plain)).env


def test_setuptools_dynamic_dependencies(make_repo: MakeRepo, pythons: list[PythonInstall]) -> None:
    repo = make_repo(
        {
            "pyproject.toml": """
                [project]
                name = "dyn"
                version = "1"
                dynamic = ["dependencies", "optional-dependencies"]
                [tool.setuptools.dynamic]
                dependencies = {file = ["deps/runtime.txt"]}
                optional-dependencies.test = {file = ["deps/test.txt"]}
            """,
            "deps/runtime.txt": "idna\n",
            "deps/test.txt": "pytest\n",
            "tests/test_d.py": PYTEST_TEST,
        }
    )
    d = detect(repo, pythons=pythons)
    assert d.python is not None
    assert d.python.requirement_files == ["deps/runtime.txt", "deps/test.txt"]


def test_requires_python_nothing_fits(make_repo: MakeRepo, pythons: list[PythonInstall]) -> None:
    repo = make_repo({"pyproject.toml": '[project]\nname = "f"\nrequires-python = ">=3.99"\n'})
    d = detect(repo, pythons=pythons)
    assert not d.supported and ">=3.99" in d.reason
    with pytest.raises(UnsupportedRepo, match="3.99"):
        make_recipe(repo, d)


def test_requires_python_upper_bound(make_repo: MakeRepo, pythons: list[PythonInstall]) -> None:
    repo = make_repo({"setup.py": "from setuptools import setup\nsetup(python_requires='<3.10')\n"})
    assert detect(repo, pythons=pythons).base_image == "python:3.9-slim"


def test_invalid_pyproject_is_noted(make_repo: MakeRepo, pythons: list[PythonInstall]) -> None:
    repo = make_repo({"pyproject.toml": "[project\nname=", "test_x.py": PYTEST_TEST})
    d = detect(repo, pythons=pythons)
    assert d.supported
    assert any("invalid TOML" in n for n in d.notes)


def test_parse_requirement_lines() -> None:
    rf = parse_requirement_lines(
        "# comment\n"
        "requests>=2 ; python_version < '3.12'  # trailing\n"
        "-r other.txt\n"
        "--constraint=c/cons.txt\n"
        "--index-url https://example.invalid/simple\n"
        "-e .[test]\n"
        "-e git+https://example.invalid/x.git#egg=x\n"
        "./vendored/pkg\n"
        "long-\\\nname==1\n",
        "sub/reqs.txt",
    )
    assert rf.requirements == [
        "requests>=2 ; python_version < '3.12'",
        "-e git+https://example.invalid/x.git#egg=x",
        "long-name==1",
    ]
    assert rf.includes == ["sub/other.txt"]
    assert rf.constraints == ["sub/c/cons.txt"]
    assert rf.local == ["-e .[test]", "./vendored/pkg"]


def test_parse_setup_py_tolerates_dynamic_code() -> None:
    parsed = parse_setup_py(
        "import os\nfrom setuptools import setup\n"
        "reqs = open('requirements.txt').read().splitlines()\n"
        "setup(name='d', install_requires=reqs, version=os.environ['V'], **extra)\n"
    )
    assert parsed.kwargs == {"name": "d"}
    assert parsed.requirement_files == ["requirements.txt"]
    assert not parsed.uses_distutils
    assert parse_setup_py("def broken(:\n").kwargs == {}


def test_random_order_plugin_is_disabled(make_repo: MakeRepo, pythons: list[PythonInstall]) -> None:
    repo = make_repo(
        {
            "requirements-test.txt": "pytest\npytest-randomly\n",
            "tests/test_r.py": PYTEST_TEST,
        }
    )
    recipe = make_recipe(repo, detect(repo, pythons=pythons))
    assert "-p no:randomly" in recipe.test_command
    assert "'-p', 'no:randomly'" in recipe.collect_command
    assert recipe.test_command_for(["tests/test_r.py::test_a"]).startswith(
        "python -m pytest -rA --tb=short -p no:cacheprovider -p no:randomly "
    )
