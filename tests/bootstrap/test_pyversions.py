"""Interpreter discovery and requires-python matching."""

from __future__ import annotations

from pathlib import Path

import pytest

from repogym.bootstrap.python.versions import (
    SpecifierError,
    choose_python,
    installed_pythons,
    poetry_to_pep440,
    satisfies,
)

from .conftest import FAKE_PYTHONS


@pytest.mark.parametrize(
    ("version", "spec", "expected"),
    [
        ((3, 12, 1), ">=3.12", True),
        ((3, 11, 7), ">=3.12", False),
        ((3, 9, 18), "<3.10", True),
        ((3, 10, 13), "<3.10", False),
        ((3, 9, 18), ">=3.8, !=3.9.*", False),
        ((3, 10, 0), ">=3.8, !=3.9.*", True),
        ((3, 8, 18), "~=3.8", True),
        ((3, 13, 0), "~=3.8", True),
        ((3, 9, 1), "~=3.8.1", False),
        ((3, 8, 18), "==3.8.*", True),
        ((3, 12, 1), ">=3.8.1,<4.0", True),
        ((3, 11, 7), "^3.9", True),
        ((3, 8, 18), "^3.9", False),
        ((3, 9, 18), "~3.9", True),
        ((3, 10, 0), "~3.9", False),
        ((3, 11, 7), ">=3.8 <3.12", True),
        ((3, 12, 1), ">=3.8 <3.12", False),
        ((3, 7, 0), "^2.7 || ^3.7", True),
        ((3, 12, 1), "", True),
        ((3, 12, 1), "*", True),
        ((3, 12, 1), ">=3.12.0rc1", True),
    ],
)
def test_satisfies(version: tuple[int, int, int], spec: str, expected: bool) -> None:
    assert satisfies(version, spec) is expected


def test_unreadable_specifier_raises() -> None:
    with pytest.raises(SpecifierError):
        satisfies((3, 12, 0), ">=three")


@pytest.mark.parametrize(
    ("poetry", "pep440"),
    [
        ("^1.2.3", ">=1.2.3,<2"),
        ("^0.2.3", ">=0.2.3,<0.3"),
        ("^0.0.3", ">=0.0.3,<0.0.4"),
        ("~1.2", ">=1.2,<1.3"),
        ("~1", ">=1,<2"),
        ("*", ""),
        ("1.4", "==1.4"),
        (">=1,<2", ">=1,<2"),
        ("1.2.*", "==1.2.*"),
        ("^1 || ^2", None),
    ],
)
def test_poetry_to_pep440(poetry: str, pep440: str | None) -> None:
    assert poetry_to_pep440(poetry) == pep440


def test_installed_pythons_discovers_folders(tmp_path: Path) -> None:
    for name in ("3.7.16", "3.9.1", "3.9.18", "3.12.1", "3.13.0rc1", "pypy3.10", "3.11.2"):
        (tmp_path / name / "bin").mkdir(parents=True)
    for name, exe in (("3.7.16", "3.7"), ("3.9.1", "3.9"), ("3.9.18", "3.9"), ("3.12.1", "3.12")):
        (tmp_path / name / "bin" / f"python{exe}").touch()
    found = installed_pythons(tmp_path)
    # 3.7 is too old, 3.13.0rc1 is not final, 3.11.2 has no interpreter, newest 3.9 patch wins.
    assert [str(p) for p in found] == ["3.9.18", "3.12.1"]
    assert found[-1].image == "python:3.12-slim"


def test_installed_pythons_on_this_host() -> None:
    found = installed_pythons()
    if not found:
        pytest.skip("no pyenv interpreters on this host")
    assert all(p.version >= (3, 8, 0) for p in found)
    assert [p.version for p in found] == sorted(p.version for p in found)


@pytest.mark.parametrize(
    ("spec", "minor"),
    [
        (">=3.12", "3.13"),
        ("<3.10", "3.9"),
        (">=3.8,<3.12", "3.11"),
        (None, "3.13"),
        ("~=3.10.0", "3.10"),
    ],
)
def test_choose_newest_fitting(spec: str | None, minor: str) -> None:
    choice = choose_python(spec, FAKE_PYTHONS)
    assert choice.install is not None
    assert choice.install.minor == minor
    assert choice.notes


def test_choose_reports_when_nothing_fits() -> None:
    choice = choose_python(">=3.14", FAKE_PYTHONS)
    assert choice.install is None
    assert ">=3.14" in choice.reason and "3.13" in choice.reason


def test_choose_prefers_capped_version() -> None:
    choice = choose_python(">=3.8", FAKE_PYTHONS, prefer_at_most=(3, 10), prefer_reason="why")
    assert choice.install is not None and choice.install.minor == "3.10"
    assert any("why" in n for n in choice.notes)
    # The cap never overrides requires-python: the fitting interpreter closest to it is taken.
    choice = choose_python(">=3.12", FAKE_PYTHONS, prefer_at_most=(3, 10))
    assert choice.install is not None and choice.install.minor == "3.12"
    choice = choose_python(None, FAKE_PYTHONS, prefer_at_most=(3, 7), prefer_reason="old")
    assert choice.install is not None and choice.install.minor == "3.8"
    assert any("no fitting interpreter as old as 3.7 (old)" in n for n in choice.notes)


def test_choose_ignores_unreadable_spec() -> None:
    choice = choose_python(">=banana", FAKE_PYTHONS)
    assert choice.install is not None and choice.install.minor == "3.13"
    assert any("unreadable" in n for n in choice.notes)
