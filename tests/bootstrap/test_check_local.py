"""Recipes built for real in the local sandbox: tests collected, or the failing step named.

Network use is PyPI/npm only and small: pytest (pip) and mocha (npm). Each test builds in a
private layer cache, so a run never depends on (or pollutes) the user's cache.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from repogym.bootstrap import check_recipe, detect, make_recipe
from repogym.bootstrap.native import go, rust

from .conftest import local_backend_with_private_cache

MakeRepo = Callable[..., Path]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def local_backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Skip without the local backend; give the module a private sandbox cache."""
    yield from local_backend_with_private_cache(tmp_path_factory, "bootstrap-sandbox-cache")


PYTEST_PROJECT = {
    "pyproject.toml": """
        [build-system]
        requires = ["setuptools>=61", "wheel"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "tinycalc"
        version = "0.1.0"
        requires-python = ">=3.8,<3.12"

        [project.optional-dependencies]
        test = ["pytest"]

        [tool.pytest.ini_options]
        testpaths = ["tests"]
    """,
    "src/tinycalc/__init__.py": "def add(a, b):\n    return a + b\n",
    "tests/test_calc.py": """
        import pytest
        from tinycalc import add

        def test_add():
            assert add(1, 2) == 3

        @pytest.mark.parametrize("n", [0, 1, 2])
        def test_identity(n):
            assert add(n, 0) == n
    """,
}

UNITTEST_PROJECT = {
    "calc.py": "def mul(a, b):\n    return a * b\n",
    "tests/__init__.py": "",
    "tests/test_calc.py": """
        import unittest
        from calc import mul

        class TestMul(unittest.TestCase):
            def test_mul(self):
                self.assertEqual(mul(2, 3), 6)

            def test_zero(self):
                self.assertEqual(mul(0, 5), 0)
    """,
}


def test_pytest_project_builds_and_collects(make_repo: MakeRepo) -> None:
    repo = make_repo(PYTEST_PROJECT)
    recipe = make_recipe(repo, detect(repo))
    assert recipe.runner == "pytest" and recipe.base_image == "python:3.11-slim"
    result = check_recipe(repo, recipe)
    assert result.ok, (result.failed_step, result.reason, result.log_tail)
    assert result.tests_collected == 4
    assert "tests/test_calc.py::test_identity[0]" in result.sample_ids
    assert result.base_mapping.get("python", "").startswith("3.11")
    assert {"build_s", "collect_s", "total_s"} <= set(result.timings)


def test_unittest_project_builds_and_collects(make_repo: MakeRepo) -> None:
    repo = make_repo(UNITTEST_PROJECT)
    recipe = make_recipe(repo, detect(repo))
    assert recipe.runner == "unittest"
    result = check_recipe(repo, recipe)
    assert result.ok, (result.failed_step, result.reason, result.log_tail)
    assert result.tests_collected == 2
    assert result.sample_ids == [
        "tests.test_calc.TestMul.test_mul",
        "tests.test_calc.TestMul.test_zero",
    ]


def test_failing_build_names_the_step(make_repo: MakeRepo) -> None:
    # An unparseable requirement makes the installer fail without touching the index.
    repo = make_repo({**UNITTEST_PROJECT, "requirements.txt": "not a valid requirement !!\n"})
    recipe = make_recipe(repo, detect(repo))
    result = check_recipe(repo, recipe)
    assert not result.ok
    assert result.failed_step.startswith("build: RUN uv pip install --system -r requirements.txt")
    assert "exit 2" in result.failed_step
    assert "parse requirement" in result.reason
    assert result.log_tail
    assert result.tests_collected == 0


def test_import_error_fails_the_collect_step(make_repo: MakeRepo) -> None:
    files = dict(UNITTEST_PROJECT)
    files["tests/test_broken.py"] = "import not_installed_anywhere\n"
    repo = make_repo(files)
    result = check_recipe(repo, make_recipe(repo, detect(repo)))
    assert not result.ok
    assert result.failed_step == "collect: exit 1 (2 tests collected)"
    assert "not_installed_anywhere" in result.reason


def test_no_tests_is_reported(make_repo: MakeRepo) -> None:
    repo = make_repo({"calc.py": "x = 1\n"})
    result = check_recipe(repo, make_recipe(repo, detect(repo)))
    assert not result.ok and result.failed_step == "collect: no tests collected"


@pytest.mark.skipif(shutil.which("node") is None, reason="no node on this host")
def test_node_mocha_project(make_repo: MakeRepo) -> None:
    repo = make_repo(
        {
            "package.json": """
                {"name": "m", "version": "1.0.0", "private": true,
                 "scripts": {"test": "mocha"},
                 "devDependencies": {"mocha": "^10.0.0"}}
            """,
            "test/math.test.js": """
                const assert = require('assert');
                describe('math', () => {
                  it('adds', () => assert.strictEqual(1 + 1, 2));
                  it('multiplies', () => assert.strictEqual(2 * 3, 6));
                });
            """,
        }
    )
    recipe = make_recipe(repo, detect(repo))
    assert recipe.runner == "mocha"
    result = check_recipe(repo, recipe)
    assert result.ok, (result.failed_step, result.reason, result.log_tail)
    assert result.tests_collected == 2


@pytest.mark.skipif(go.host_go() is None, reason="no go toolchain on this host")
def test_go_module_without_dependencies(make_repo: MakeRepo) -> None:
    repo = make_repo(
        {
            "go.mod": "module example.com/demo\n\ngo 1.19\n",
            "demo.go": "package demo\n\nfunc Add(a, b int) int { return a + b }\n",
            "demo_test.go": """
                package demo

                import "testing"

                func TestAdd(t *testing.T) {
                    if Add(1, 2) != 3 {
                        t.Fatal("bad")
                    }
                }

                func TestZero(t *testing.T) {}
            """,
        }
    )
    result = check_recipe(repo, make_recipe(repo, detect(repo)))
    assert result.ok, (result.failed_step, result.reason, result.log_tail)
    assert result.tests_collected == 2 and result.sample_ids == ["TestAdd", "TestZero"]


@pytest.mark.skipif(rust.host_cargo() is None, reason="no Rust toolchain on this host")
def test_rust_crate_without_dependencies(make_repo: MakeRepo) -> None:
    repo = make_repo(
        {
            "Cargo.toml": '[package]\nname = "demo"\nversion = "0.1.0"\nedition = "2021"\n',
            "src/lib.rs": """
                pub fn add(a: i32, b: i32) -> i32 { a + b }

                #[cfg(test)]
                mod tests {
                    #[test]
                    fn adds() { assert_eq!(super::add(1, 2), 3); }
                }
            """,
        }
    )
    result = check_recipe(repo, make_recipe(repo, detect(repo)))
    assert result.ok, (result.failed_step, result.reason, result.log_tail)
    assert result.tests_collected == 1 and result.sample_ids == ["tests::adds"]


@pytest.mark.skipif(rust.host_cargo() is None, reason="no Rust toolchain on this host")
def test_rust_toolchain_file_is_stood_for_by_the_host(
    make_repo: MakeRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pinned older release with a component rustup would have to install, and rustup's
    server out of reach: the host's toolchain runs the tests instead (rustup never tries)."""
    monkeypatch.setattr(rust, "reachable", lambda host, port=443, timeout=3.0: False)
    repo = make_repo(
        {
            "Cargo.toml": '[package]\nname = "demo"\nversion = "0.1.0"\nedition = "2021"\n',
            "rust-toolchain.toml": '[toolchain]\nchannel = "1.70.0"\ncomponents = ["rust-src"]\n',
            "src/lib.rs": """
                pub fn add(a: i32, b: i32) -> i32 { a + b }

                #[cfg(test)]
                mod tests {
                    #[test]
                    fn adds() { assert_eq!(super::add(1, 2), 3); }
                }
            """,
        }
    )
    recipe = make_recipe(repo, detect(repo))
    assert recipe.env["RUSTUP_TOOLCHAIN"] == rust.host_cargo()[1]  # type: ignore[index]
    result = check_recipe(repo, recipe)
    assert result.ok, (result.failed_step, result.reason, result.log_tail)
    assert result.sample_ids == ["tests::adds"]
