"""Cached virtual environments for tests that run another project's own code (Harbor, TRL,
OpenEnv, verifiers, swebench, atif) in an interpreter of its own.

Each venv lives under ``CACHE/<name>`` (``REPOGYM_TEST_CACHE``, default
``~/.cache/repogym-tests``) and is made once with ``uv``. A venv that installs this checkout
editable is keyed by the checkout's path too, so two clones never share one. When a venv cannot
be made (no ``uv``, no suitable Python, no package index) the test is skipped with the reason.
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT

CACHE = Path(os.environ.get("REPOGYM_TEST_CACHE", Path.home() / ".cache" / "repogym-tests"))


def python312() -> str | None:
    """A Python >= 3.12 interpreter (``REPOGYM_TEST_PYTHON312``, pyenv's, or on PATH)."""
    candidates = [os.environ.get("REPOGYM_TEST_PYTHON312", "")]
    candidates += sorted(glob.glob("/root/.pyenv/versions/3.12.*/bin/python"))
    candidates += [shutil.which(n) or "" for n in ("python3.12", "python3.13")]
    for cand in filter(None, candidates):
        probe = subprocess.run(
            [cand, "-c", "import sys; raise SystemExit(sys.version_info < (3, 12))"],
            capture_output=True,
        )
        if probe.returncode == 0:
            return cand
    return None


def cached_venv(
    name: str,
    steps: list[list[str]],
    *,
    probe: str,
    python: str | None = None,
    checkout: bool = False,
) -> Path:
    """The ``bin`` folder of the cached venv ``name``, made with ``uv pip install`` of each of
    ``steps`` (argument lists) and good when the code ``probe`` runs in it.

    ``python``: the interpreter (default a Python >= 3.12). ``checkout``: the steps install this
    checkout (editable); the venv is then keyed by its path, the steps run every time (cheap
    when satisfied, so a changed dependency is picked up) and the probe also checks that
    ``repogym`` is imported from here. Skips the test, with the reason, when it cannot be made.
    """
    uv, interpreter = shutil.which("uv"), python or python312()
    if uv is None or interpreter is None:
        pytest.skip(f"the {name} venv needs uv and a Python >= 3.12 interpreter")
    if checkout:
        name += "-" + hashlib.sha256(str(ROOT).encode()).hexdigest()[:8]
        probe += f"\nimport repogym\nassert repogym.__file__.startswith({str(ROOT)!r})"
    venv = CACHE / name
    exe = venv / "bin" / "python"

    def works() -> bool:
        return (
            exe.exists() and subprocess.run([exe, "-c", probe], capture_output=True).returncode == 0
        )

    if works() and not checkout:
        return venv / "bin"
    if not exe.exists():
        shutil.rmtree(venv, ignore_errors=True)
        venv.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([uv, "venv", "-q", "-p", interpreter, str(venv)], check=True)
    failed = ""
    for args in steps:
        done = subprocess.run(
            [uv, "pip", "install", "-q", "-p", str(exe), *args], capture_output=True, text=True
        )
        if done.returncode != 0:
            failed = (done.stderr.strip().splitlines() or ["no output"])[-1]
    if not works():
        if not checkout:
            shutil.rmtree(venv, ignore_errors=True)
        pytest.skip(f"cannot make the {name} venv (no package index?): {failed or 'probe failed'}")
    return venv / "bin"
