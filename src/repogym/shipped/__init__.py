"""Every file repogym copies into the tasks it generates (and into the sandboxes it generates
them in), in one folder.

What lives here runs where repogym is not installed: under the repository's own interpreter
(Python 3.6 or later, whatever the image has), from a task's ``tests/``, ``solution/`` or
``environment/`` folder. So every file here imports only the standard library and its siblings,
and a change to one changes the bytes of every task generated afterwards (refresh the examples:
``scripts/refresh_examples.py``).

* the modules the verifiers load beside them, also imported on the host as
  ``repogym.shipped.<name>``: ``parsers`` (``parsers/__init__.py``, shipped as ``parsers.py``,
  with its ``_log_*.py``), ``reports.py``, ``tamper.py`` with ``_tamper_*.py``, ``js_lex.py``,
  ``infra.py``, ``testfiles.py``, ``rust_tests.py``, ``diff_reward.py``;
* ``scripts/``: files that only ever run as scripts there (never imported by repogym): the
  verifiers and their ``test.sh``, the test runner's helpers (``tests/runner/``), the build-time
  recorder, the oracle's ``solve.sh`` and patch applier, the tracer and recorder the synthesis
  pipelines run in their sandboxes.

A task holds them under the same file names (``tests/parsers.py``, ``tests/_log_go.py``,
``tests/runner/repogym_boot.py``, …); :func:`read` gives the bytes of one by that name.
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import PurePosixPath

GRADED: tuple[str, ...] = (
    # the verifier's own modules, beside it (it loads them from its folder)
    "parsers.py",
    "_log_cargo.py",
    "_log_common.py",
    "_log_ctest.py",
    "_log_go.py",
    "_log_jest.py",
    "_log_js.py",
    "_log_mocha.py",
    "_log_nextest.py",
    "_log_node.py",
    "_log_pytest.py",
    "_log_surefire.py",
    "_log_unittest.py",
    "_log_vitest.py",
    "reports.py",
    "tamper.py",
    "_tamper_strings.py",
    "_tamper_python.py",
    "_tamper_js.py",
    "infra.py",
    "js_lex.py",
    "testfiles.py",
    "rust_tests.py",
    # what the tests' own interpreter loads (a copy of the folder is handed to the tests)
    "runner/repogym_boot.py",
    "runner/repogym_pytest_report.py",
    "runner/repogym_unittest.py",
    "runner/repogym_report_file.py",
    "runner/repogym_node_boot.js",
    "runner/repogym_exit_guard.c",
)
"""What a graded runtime task's ``tests/`` folder holds of this package besides ``test.sh`` and
the verifier itself (``verifier.py``, and ``verifier.mjs`` for JavaScript runners), by its path
there."""


def locate(name: str) -> Traversable:
    """The file of this package shipped as ``name`` (a file name as a task holds it):
    ``parsers.py`` is the ``parsers`` package's ``__init__.py``, ``_log_*.py`` its modules,
    a module of this folder is itself, anything else is in ``scripts/``."""
    here = resources.files(__name__)
    name = PurePosixPath(name).name
    if name == "parsers.py":
        return here.joinpath("parsers", "__init__.py")
    if name.startswith("_log_"):
        return here.joinpath("parsers", name)
    if here.joinpath(name).is_file() and name != "__init__.py":
        return here.joinpath(name)
    return here.joinpath("scripts", name)


def read(name: str) -> bytes:
    """The bytes a task receives as ``name`` (see :func:`locate`)."""
    return locate(name).read_bytes()
