"""The recipe of a Python project: Dockerfile, test command, collect command.

Layer order (dependency layers before the source snapshot, so tasks of one repository share
them): base image → environment → Debian packages the CI installs → the installer (uv) → the
repository's own pins → requirement files → one dependency install → the snapshot → the
project itself (editable) and other local packages → pre-test steps. Every install is
``uv pip install --system --exclude-newer <commit date>`` (see :mod:`repogym.bootstrap.installer`),
with ``-c`` on the lock's pins (see :mod:`repogym.bootstrap.pin`). Comments name the file and
line each decision came from.
"""

from __future__ import annotations

import re
import shlex
from pathlib import PurePosixPath

from repogym.bootstrap.installer import (
    INSTALLER_STEP,
    LEGACY_EDITABLE,
    PROJECT_REQUIREMENTS,
    UV_ENV,
    UV_VERSION,
    EditableFloor,
    editable_floor,
    install_words,
    project_requirements_step,
)
from repogym.bootstrap.model import COLLECT_MARK, WORKDIR, DockerfileWriter, Recipe, shell_words
from repogym.bootstrap.pin import LOCK_CONSTRAINTS_PATH, lock_constraints_step
from repogym.bootstrap.python.project import PythonProject

PY_ENV = {
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    "PIP_NO_CACHE_DIR": "1",
    "PIP_ROOT_USER_ACTION": "ignore",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
}

_UNITTEST_COLLECT = """\
import sys, unittest
def walk(suite):
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            yield from walk(item)
        else:
            yield item
loader = unittest.TestLoader()
ids = [t.id() for t in walk(loader.discover({start!r}, pattern={pattern!r}, top_level_dir={top!r}))]
broken = [i for i in ids if i.startswith("unittest.loader._FailedTest.")]
for i in ids:
    print(("IMPORT ERROR " + i.rsplit(".", 1)[-1]) if i in broken else i)
for err in loader.errors:
    print(err, file=sys.stderr)
print(len(ids) - len(broken), "tests collected,", len(broken), "import errors")
sys.exit(1 if broken else 0)
"""

# pytest collection counted by a plugin, not from the printed list: the project's ``addopts``
# (``-v``, ``-q``, ``--co``…) change what pytest prints, never what this plugin sees. The last
# line is ``<COLLECT_MARK> {"collected": N, "errors": [...], "pytest": "x.y"}``.
_PYTEST_COLLECT = """\
import json, re, sys
import pytest

def first_error(text):
    lines = [ln.rstrip() for ln in (text or "").splitlines() if ln.strip()]
    exc = re.compile(r"^[\\w.]*(Error|Exception|Warning|Exit|Failed)\\b")
    marked = [ln[1:].strip() for ln in lines if ln.startswith("E ")]
    for ln in marked + lines[::-1]:
        if exc.match(ln):
            return ln[:300]
    return (marked or lines[-1:] or [""])[0][:300]

class RepogymCollect:
    def __init__(self):
        self.ids, self.errors = [], []
    def pytest_collectreport(self, report):
        if report.failed:
            self.errors.append({{"nodeid": report.nodeid,
                                "message": first_error(report.longreprtext)}})
    def pytest_collection_finish(self, session):
        self.ids = [item.nodeid for item in session.items]

plugin = RepogymCollect()
try:
    code = int(pytest.main({args!r}, plugins=[plugin]))
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else 1
sys.stdout.flush()
for nodeid in plugin.ids[:20]:
    print({mark!r} + "-ID " + nodeid)
print({mark!r}, json.dumps({{"collected": len(plugin.ids), "errors": plugin.errors[:20],
                             "exit": code, "pytest": pytest.__version__}}))
sys.exit(code)
"""


def _heredoc(script: str) -> str:
    return f"python - <<'REPOGYM_COLLECT'\n{script}REPOGYM_COLLECT"


def _legacy_editable(project: PythonProject) -> bool:
    """A ``setup.py`` project on setuptools, older than PEP 660 support (see installer)."""
    backend, date = LEGACY_EDITABLE
    return bool(
        project.installable
        and (project.backend or "").startswith(backend)
        and "setup.py" in project.manifests
        and project.name
        and project.resolve_date
        and project.resolve_date < date
    )


def _floor_step_needed(project: PythonProject, floor: EditableFloor) -> bool:
    if _legacy_editable(project):
        return False
    return bool(project.resolve_date and project.resolve_date < floor.date)


def _floor_step(project: PythonProject, df: DockerfileWriter) -> None:
    """A backend that builds editable wheels, for a commit older than one (see installer)."""
    floor = editable_floor(project.backend) if project.installable else None
    if floor is None or not _floor_step_needed(project, floor):
        return
    df.comment(
        f"{floor.requirement} builds editable wheels (PEP 660): capped at {floor.date[:10]}"
        " instead of the commit date"
    )
    words = install_words(project.resolve_date, floor=floor) + [floor.requirement]
    df.run(shell_words(words) + UV_SCRATCH)


UV_SCRATCH = ["&&", "rm", "-f", "/tmp/uv-*.lock"]
"""Appended to a ``uv pip install``: the lock files uv leaves in ``/tmp`` while it builds
sdists (random names) would make every build's layer different."""

UNSTAMP = [
    "&&",
    "for",
    "f",
    "in",
    "$(python",
    "-c",
    '"import glob,sysconfig;'
    "print(*glob.glob(sysconfig.get_paths()['purelib']+'/*.dist-info/uv_cache.json'))\");",
    "do",
    'rm -f "$f"',
    "&&",
    "sed",
    "-i",
    shlex.quote(r"/uv_cache\.json,/d"),
    '"${f%/*}/RECORD";',
    "done",
    *UV_SCRATCH,
]
"""Appended to an editable ``uv pip install``: uv writes ``uv_cache.json`` (the sources' inode
change times) into the project's ``.dist-info``; removed with its ``RECORD`` line, the layer is
the same on every build, so a published image's digest can be rebuilt (``images check``)."""


def _editable_step(project: PythonProject, install: list[str]) -> list[str]:
    """The project, editable, built without isolation (its build requirements are installed);
    named, so its dependencies' source builds keep their isolation as in the project's CI."""
    extras = f"[{','.join(project.extras)}]" if project.extras else ""
    if project.name and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", project.name):
        target = f"{project.name}{extras} @ file://{WORKDIR}"
        named = ["--no-build-isolation-package", project.name, "-e", shlex.quote(target)]
        return [*install, *named, *UNSTAMP]
    return [*install, "--no-build-isolation", "-e", shlex.quote(f".{extras}"), *UNSTAMP]


def _dependency_steps(project: PythonProject, df: DockerfileWriter, constraints: list[str]) -> None:
    """Requirement files and one ``uv pip install`` of everything the source is not needed for."""
    if project.copy_files:
        by_dir: dict[str, list[str]] = {}
        for rel in project.copy_files:
            parent = str(PurePosixPath(rel).parent)
            by_dir.setdefault(parent, []).append(f"repo/{rel}")
        for parent, sources in sorted(by_dir.items()):
            df.copy(sources, "./" if parent == "." else f"./{parent}/")
    args: list[str] = []
    for rel in project.requirement_files:
        args += ["-r", rel]
    for rel in project.constraint_files:
        args += ["-c", rel]
    build = list(project.build_requires) if project.installable else []
    floor = editable_floor(project.backend) if project.installable else None
    legacy = _legacy_editable(project)
    if floor is not None and not legacy and not _floor_step_needed(project, floor):
        build.append(floor.requirement)
    packages = list(dict.fromkeys(project.dependencies + project.test_dependencies + build))
    if args or packages:
        for source in project.install_sources[:12]:
            df.comment(f"as the CI does: {source}")
        install = install_words(project.resolve_date, constraints)
        df.run(shell_words(install) + shell_words(args + packages) + UV_SCRATCH)


def python_recipe(project: PythonProject) -> Recipe:
    """The Dockerfile and test commands for a detected Python project."""
    if project.install is None:
        raise ValueError(project.problem or "no interpreter chosen")
    notes = list(project.notes)
    image = project.install.image
    env = {**PY_ENV, **UV_ENV}
    if project.scm_version:
        env["SETUPTOOLS_SCM_PRETEND_VERSION"] = project.scm_pretend
        env["PDM_BUILD_SCM_VERSION"] = project.scm_pretend
    if not project.installable:
        path = f"{WORKDIR}/src:{WORKDIR}" if project.src_layout else WORKDIR
        env["PYTHONPATH"] = path
        notes.append(f"not an installable package: PYTHONPATH={path} makes its modules importable")
    date = project.commit_date
    cap = project.resolve_date
    if cap and cap != date:
        as_of = f"resolved as of {cap} (the interpreter's; the commit is of {date})"
    elif cap:
        as_of = f"resolved as of the commit date {cap}"
    else:
        as_of = "not date-capped (no commit date)"
    df = DockerfileWriter(
        f"repogym bootstrap recipe: python {project.install.minor}, {project.runner}.\n"
        "Dependency layers come before the source snapshot so tasks of one repository share them."
        f"\nInstalls: uv {UV_VERSION}, {as_of}."
    )
    notes.append(
        f"installs use uv {UV_VERSION} (uv pip install --system): "
        + (f"--exclude-newer {cap}" if cap else "no commit date, uncapped")
    )
    df.from_(image)
    df.workdir(WORKDIR)
    df.env(env)
    _apt_step(project, df, notes)
    installs = bool(
        project.installable
        or project.local_installs
        or project.requirement_files
        or project.dependencies
        or project.test_dependencies
    )
    if installs:
        df.comment("the installer: pip cannot cap versions by date (repogym.bootstrap.installer)")
        df.run(shell_words(INSTALLER_STEP))
    _floor_step(project, df)
    constraints: list[str] = []
    if project.lock_constraints:
        df.comment(
            f"the repository's own pins: {len(project.lock_constraints)} exact versions"
            f" from {project.lock_source}"
        )
        df.run(lock_constraints_step(project.lock_constraints))
        constraints = [LOCK_CONSTRAINTS_PATH]
    _dependency_steps(project, df, constraints)
    df.copy(["repo/"], f"{WORKDIR}/")
    install = shell_words(install_words(cap, constraints))
    _project_steps(project, df, install, notes)

    test_cmd, collect, select = _test_commands(project, notes)
    return Recipe(
        language="python",
        runner=project.runner,
        base_image=image,
        dockerfile=df.render(),
        test_command=test_cmd,
        collect_command=collect,
        select_command=select,
        workdir=WORKDIR,
        env=env,
        commit_date=date or "",
        notes=notes,
    )


def _apt_step(project: PythonProject, df: DockerfileWriter, notes: list[str]) -> None:
    """The Debian packages the CI installs (each one alone when the whole list fails)."""
    if not project.apt_packages:
        return
    names = list(dict.fromkeys(name for name, _ in project.apt_packages))
    for where in dict.fromkeys(w for _, w in project.apt_packages):
        df.comment(f"Debian packages the CI installs ({where})")
    pkgs = shell_words(names)
    install = ["apt-get", "install", "-y", "--no-install-recommends"]
    df.run(
        ["apt-get", "update", "&&", "(", *install, *pkgs, "||", "for", "p", "in", *pkgs]
        + [";", "do", *install, '"$p"', "||", "echo", "'repogym: Debian package'", '"$p"']
        + ["'not installed';", "done", ")", "&&", "rm", "-rf", "/var/lib/apt/lists/*"]
    )
    notes.append(f"Debian packages from the CI: {', '.join(names)}")


def _project_steps(
    project: PythonProject, df: DockerfileWriter, install: list[str], notes: list[str]
) -> None:
    """After the source snapshot: the project itself, its local packages, the CI's pre-test
    commands."""
    if _legacy_editable(project):
        extras = f"[{','.join(project.extras)}]" if project.extras else ""
        df.comment(
            f"setup.py develop, as pip ran it before setuptools 64 ({LEGACY_EDITABLE[1][:10]});"
            " then the project's own requirements, with uv"
        )
        pip = ["python", "-m", "pip", "install", "--no-build-isolation", "--no-deps", "-e"]
        df.run([*pip, shlex.quote(f".{extras}")])
        df.run(project_requirements_step(project.name or "", project.extras))
        df.run([*install, "-r", PROJECT_REQUIREMENTS])
        notes.append(
            "commit older than PEP 660 editable installs: setup.py develop through pip, then"
            " the project's requirements through uv"
        )
    elif project.installable:
        df.run(_editable_step(project, install))
        notes.append(
            "build requirements are installed in the dependency layer and the project is built"
            " without build isolation (dependencies built from source keep theirs)"
        )
    for path, where in project.local_installs:
        df.comment(f"a local package the repository installs ({where})")
        if project.resolve_date and project.resolve_date < LEGACY_EDITABLE[1]:
            # of its time too: pip, which runs setup.py develop where PEP 660 is missing
            df.run(["python", "-m", "pip", "install", "-e", shlex.quote(f"./{path}")])
        else:
            df.run([*install, "-e", shlex.quote(f"./{path}"), *UNSTAMP])
    for command, where in project.pre_test:
        df.comment(f"before the tests, as the CI does ({where})")
        df.run([command])


def _test_commands(project: PythonProject, notes: list[str]) -> tuple[str, str, str]:
    """(test command, collect command, select command) for the project's runner."""
    if project.runner == "pytest":
        opts = ["-p", "no:cacheprovider", *project.pytest_options]
        base = f"python -m pytest -rA --tb=short {' '.join(opts)}"
        paths = " ".join(shlex.quote(p) for p in project.pytest_args)
        test_cmd = f"{base} {paths}".strip()
        args = ["--collect-only", "-q", *opts, *project.pytest_args]
        collect = _heredoc(_PYTEST_COLLECT.format(args=args, mark=COLLECT_MARK))
        select = base
    else:
        start, top, pattern = project.unittest_start, project.unittest_top, project.unittest_pattern
        prefix = ""
        if top != ".":
            prefix = f'PYTHONPATH="{top}${{PYTHONPATH:+:$PYTHONPATH}}" '
            notes.append(f"{top}/ is not a package: unittest ids are relative to it")
        test_cmd = (
            f"python -m unittest discover -v -s {shlex.quote(start)} -t {shlex.quote(top)}"
            f" -p {shlex.quote(pattern)}"
        )
        collect = _heredoc(_UNITTEST_COLLECT.format(start=start, top=top, pattern=pattern))
        select = f"{prefix}python -m unittest -v"
    return test_cmd, collect, select
