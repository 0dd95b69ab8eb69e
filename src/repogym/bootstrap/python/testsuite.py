"""Where a Python project's tests are, whether they use pytest or unittest, and its pytest
configuration (the plugins that configuration needs)."""

from __future__ import annotations

import configparser
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repogym.bootstrap._files import read_text, walk_files

# pytest options / ini keys that need a plugin, and the plugin's PyPI name.
PYTEST_PLUGIN_HINTS = (
    (re.compile(r"(^|\s)--cov\b"), "pytest-cov"),
    (re.compile(r"(^|\s)(-n\s*\S+|--numprocesses)\b"), "pytest-xdist"),
    (re.compile(r"(^|\s)--timeout\b"), "pytest-timeout"),
    (re.compile(r"(^|\s)--reruns\b"), "pytest-rerunfailures"),
    (re.compile(r"(^|\s)--benchmark-"), "pytest-benchmark"),
    (re.compile(r"(^|\s)--doctest-plus\b"), "pytest-doctestplus"),
    (re.compile(r"(^|\s)--asyncio-mode\b"), "pytest-asyncio"),
    (re.compile(r"(^|\s)--mypy\b"), "pytest-mypy"),
    (re.compile(r"(^|\s)--flake8\b"), "pytest-flake8"),
    (re.compile(r"(^|\s)--mpl\b"), "pytest-mpl"),
)
PYTEST_INI_PLUGINS = {
    "asyncio_mode": "pytest-asyncio",
    "timeout": "pytest-timeout",
    "env": "pytest-env",
    "django_settings_module": "pytest-django",
    "mypy": "pytest-mypy",
}


def ini(text: str | None) -> configparser.ConfigParser | None:
    """An INI file (``setup.cfg``, ``tox.ini``, ``pytest.ini``); None when absent or invalid."""
    if text is None:
        return None
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text)
    except configparser.Error:
        return None
    return parser


def plugins_for(opts: dict[str, Any]) -> list[str]:
    """pytest plugins that the ini options ask for."""
    out: list[str] = []
    addopts = opts.get("addopts", "")
    addopts = " ".join(addopts) if isinstance(addopts, list) else str(addopts)
    for pattern, plugin in PYTEST_PLUGIN_HINTS:
        if pattern.search(addopts):
            out.append(plugin)
    for key, plugin in PYTEST_INI_PLUGINS.items():
        if key in opts:
            out.append(plugin)
    required = opts.get("required_plugins", "")
    if isinstance(required, str):
        required = required.split()
    out += [str(r) for r in required]
    return out


def pytest_config(repo: Path, tool: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Where pytest is configured (label) and the ini options found there."""
    pt = tool.get("pytest")
    if isinstance(pt, dict):
        opts = pt.get("ini_options", pt)
        return "pyproject.toml [tool.pytest]", opts if isinstance(opts, dict) else {}
    for name, section in (("pytest.ini", "pytest"), ("setup.cfg", "tool:pytest")):
        parser = ini(read_text(repo / name))
        if parser is not None and parser.has_section(section):
            return f"{name} [{section}]", dict(parser.items(section))
    return "", {}


@dataclass
class TestScan:
    """Test files found and what they use."""

    files: int = 0
    pytest_signals: list[str] = field(default_factory=list)
    unittest_signals: list[str] = field(default_factory=list)
    unittest_start: str | None = None
    unittest_top: str | None = None
    unittest_pattern: str | None = None
    pytest_args: list[str] = field(default_factory=list)


def scan_tests(repo: Path) -> TestScan:
    """Find test files and conftest.py; see whether tests use pytest or unittest."""
    scan = TestScan()
    test_files: list[Path] = []
    for rel in walk_files(repo):
        name = rel.name
        if name == "conftest.py":
            scan.pytest_signals.append(str(rel))
        elif name.endswith(".py") and (
            name.startswith("test_") or name.endswith("_test.py") or name == "tests.py"
        ):
            test_files.append(rel)
    scan.files = len(test_files)
    uses_pytest = uses_unittest = 0
    for rel in test_files[:300]:
        text = read_text(repo / rel, 200_000) or ""
        # pytest imports, or bare module-level test functions (which unittest ignores).
        if re.search(r"^\s*(import pytest|from pytest\b)|@pytest\.|^def test", text, re.M):
            uses_pytest += 1
        if re.search(r"\bunittest\b", text):
            uses_unittest += 1
    if uses_pytest:
        scan.pytest_signals.append(f"{uses_pytest} test file(s) use pytest")
    if uses_unittest:
        scan.unittest_signals.append(f"{uses_unittest} test file(s) use unittest")
    tops = {rel.parts[0] for rel in test_files if len(rel.parts) > 1}
    for cand in ("tests", "test", "testing"):
        if cand in tops:
            scan.unittest_start = cand
            scan.unittest_top = "." if (repo / cand / "__init__.py").is_file() else cand
            break
    if test_files and not any(f.name.startswith("test") for f in test_files):
        scan.unittest_pattern = "*_test.py"
    # Name test folders for pytest only when every test file lives in one.
    folders = {rel.parts[0] for rel in test_files}
    nested = test_files and all(len(rel.parts) > 1 for rel in test_files)
    if nested and folders <= {"tests", "test", "testing"}:
        scan.pytest_args = sorted(folders)
    return scan
