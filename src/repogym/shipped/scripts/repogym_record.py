#!/usr/bin/env python3
# ruff: noqa: UP006, UP007, UP031, UP032, UP035, UP045  (runs under the task's Python, maybe 3.6)
"""Record, at build time, the files a repogym verifier trusts (standard library, Python 3.6+).

The last step of a repogym task's Dockerfile runs ``python3 repogym_record.py --record KEY
WORKDIR RUNNER``. It writes ``/usr/lib/repogym/record.txt`` in ``sha256sum`` format:

* the interpreters (``python3``, ``python`` and the running one, symlinks resolved), ``bash``
  and ``sha256sum``; the standard library and ``libpython``;
* every file of the test runner (``pytest``, ``_pytest``, ``pluggy``, ``iniconfig``, ``py``)
  and of the pytest plugins installed (``pytest11`` entry points);
* every ``.pth`` file and ``sitecustomize.py``/``usercustomize.py`` on the import path;
* for JavaScript runners, the runners under ``WORKDIR/node_modules`` (jest, vitest, mocha) and
  ``node``;

plus comment lines (``# kind JSON``): ``python`` (the interpreter a verifier should run), ``env``
(the build's environment: the tests run with it, not with whatever a shell profile adds), and
per import-path folder the start-up entries it held (``site``: ``.pth``, ``*.dist-info``,
``*.egg-info``, ``*.egg-link``; ``hooks``: ``sitecustomize.py``/``usercustomize.py``), so a
verifier can tell new ones apart; ``nopreload`` when the image had no ``/etc/ld.so.preload``
(the dynamic loader's list of libraries forced into every program). Next to
it, ``record.mac`` holds ``sha256(KEY + record + KEY)``: KEY is in the Dockerfile's ``RUN``
line and in the task's hidden ``tests/``, never in the image's files, so an agent that edits the
record cannot make the MAC match.

``--plugins`` prints the ``pytest11`` plugins as JSON ``[[entry point name, module], ...]``: the
verifier disables plugin autoloading and loads exactly these with ``-p``.
"""

import contextlib
import hashlib
import json
import os
import shutil
import site
import sys
import sysconfig

RECORD_DIR = "/usr/lib/repogym"
RUNNER_MODULES = ("pytest", "_pytest", "pluggy", "iniconfig", "py")
NODE_PACKAGES = (
    "jest",
    "jest-cli",
    "jest-circus",
    "jest-runner",
    "jest-runtime",
    "jest-jasmine2",
    "@jest",
    "expect",
    "vitest",
    "@vitest",
    "mocha",
)
CODE_EXT = (".py", ".js", ".cjs", ".mjs", ".json", ".so", ".node")
START_UP = (".pth", ".dist-info", ".egg-info", ".egg-link")
BUILD_ONLY_ENV = ("PWD", "OLDPWD", "SHLVL", "_", "HOSTNAME")
PRELOAD = "/etc/ld.so.preload"


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while True:
            chunk = fh.read(1 << 20)
            if not chunk:
                break
            h.update(chunk)
    return h.hexdigest()


def site_dirs():
    """Folders Python reads ``.pth`` files from, plus the standard library's path entries."""
    out = []
    with contextlib.suppress(AttributeError):  # virtualenvs of old Pythons lack these
        out += list(site.getsitepackages())
    with contextlib.suppress(AttributeError):
        out.append(site.getusersitepackages())
    for key in ("purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            out.append(path)
    seen = []
    for path in out:
        real = os.path.realpath(path)
        if os.path.isdir(real) and real not in seen:
            seen.append(real)
    return seen


def path_dirs(workdir):
    """Import-path folders outside the working tree (where sitecustomize may be found)."""
    out = []
    work = os.path.realpath(workdir) if workdir else None
    for entry in sys.path:
        if not entry:
            continue
        real = os.path.realpath(entry)
        if work and (real == work or real.startswith(work + os.sep)):
            continue
        if os.path.isdir(real) and real not in out:
            out.append(real)
    return out


def entry_points(group):
    """``[(name, module)]`` of an entry-point group, read from the metadata files directly."""
    found = []
    for folder in site_dirs():
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        metas = [os.path.join(folder, n) for n in names if n.endswith((".dist-info", ".egg-info"))]
        for name in names:
            if name.endswith(".egg-link"):  # old editable installs point at their egg-info
                try:
                    with open(os.path.join(folder, name)) as fh:
                        target = fh.readline().strip()
                    metas += [
                        os.path.join(target, n)
                        for n in os.listdir(target)
                        if n.endswith(".egg-info")
                    ]
                except OSError:
                    pass
        for meta in metas:
            path = os.path.join(meta, "entry_points.txt")
            try:
                with open(path, encoding="utf-8", errors="replace") as fh:
                    text = fh.read()
            except OSError:
                continue
            section = None
            for line in text.splitlines():
                line = line.strip()
                if line.startswith("[") and line.endswith("]"):
                    section = line[1:-1].strip()
                elif section == group and "=" in line and not line.startswith("#"):
                    name, value = line.split("=", 1)
                    module = value.strip().split(":", 1)[0].split("[", 1)[0].strip()
                    if module and (name.strip(), module) not in found:
                        found.append((name.strip(), module))
    return found


def module_files(name):
    """Files of an importable top-level module or package (empty when it is absent)."""
    for folder in site_dirs() + path_dirs(None):
        pkg = os.path.join(folder, name)
        if os.path.isdir(pkg) and os.path.isfile(os.path.join(pkg, "__init__.py")):
            out = []
            for root, dirs, files in os.walk(pkg):
                dirs[:] = sorted(d for d in dirs if d != "__pycache__")
                out += [os.path.join(root, f) for f in sorted(files) if f.endswith(CODE_EXT)]
            return out
        for ext in (".py",):
            single = os.path.join(folder, name + ext)
            if os.path.isfile(single):
                return [single]
    return []


STDLIB_SKIP = (
    "test",
    "tests",
    "idlelib",
    "tkinter",
    "turtledemo",
    "ensurepip",
    "lib2to3",
    "site-packages",
    "dist-packages",
    "__pycache__",
)


def stdlib_files():
    """The standard library's code and the shared libpython the interpreter loads."""
    out = []
    paths = sysconfig.get_paths()
    for key in ("stdlib", "platstdlib"):
        top = paths.get(key)
        if not top or not os.path.isdir(top):
            continue
        for root, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d not in STDLIB_SKIP)
            out += [os.path.join(root, f) for f in sorted(files) if f.endswith((".py", ".so"))]
    libdir, lib = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("LDLIBRARY")
    if libdir and lib and lib.endswith(".so") or ".so." in (lib or ""):
        out.append(os.path.realpath(os.path.join(libdir, lib)))
    return out


def node_files(workdir):
    out = []
    modules = os.path.join(workdir, "node_modules")
    for name in NODE_PACKAGES:
        top = os.path.join(modules, name)
        if not os.path.isdir(top):
            continue
        for root, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d != "node_modules" or root == top)
            out += [os.path.join(root, f) for f in sorted(files) if f.endswith(CODE_EXT)]
    return out


def record_lines(workdir, runner=None):
    files = []
    names = []
    tools = ["python3", "python", "bash", "sha256sum"]
    if runner not in ("pytest", "unittest"):
        tools.append("node")
    for tool in tools:
        found = shutil.which(tool)
        if found:
            files.append(os.path.realpath(found))
    files.append(os.path.realpath(sys.executable))
    names.append("# python %s" % (os.path.realpath(shutil.which("python3") or sys.executable)))
    env = dict((k, v) for k, v in os.environ.items() if k not in BUILD_ONLY_ENV)
    names.append("# env " + json.dumps(env, sort_keys=True))
    files += stdlib_files()
    for module in RUNNER_MODULES:
        files += module_files(module)
    for _name, module in entry_points("pytest11"):
        files += module_files(module.split(".", 1)[0])
    for folder in site_dirs():
        try:
            entries = sorted(n for n in os.listdir(folder) if n.endswith(START_UP))
        except OSError:
            continue
        names.append("# site " + json.dumps({"dir": folder, "names": entries}))
        files += [os.path.join(folder, n) for n in entries if n.endswith(".pth")]
    for folder in path_dirs(workdir):
        hooks = [
            n for n in ("sitecustomize.py", "usercustomize.py") if os.path.isfile(folder + "/" + n)
        ]
        names.append("# hooks " + json.dumps({"dir": folder, "names": hooks}))
        files += [os.path.join(folder, n) for n in hooks]
    if workdir and runner not in ("pytest", "unittest"):
        files += node_files(workdir)
    if os.path.exists(PRELOAD):
        files.append(PRELOAD)
    else:
        names.append("# nopreload")
    lines = ["# repogym integrity record 1"] + names
    seen = set()
    for path in files:
        if path in seen or not os.path.isfile(path) or "\n" in path:
            continue
        seen.add(path)
        lines.append("%s  %s" % (sha256(path), path))
    return lines


def mac(key, data):
    return hashlib.sha256(key.encode() + data + key.encode()).hexdigest()


def main(argv):
    if len(argv) >= 2 and argv[1] == "--plugins":
        print(json.dumps(entry_points("pytest11")))
        return 0
    if len(argv) >= 3 and argv[1] == "--record":
        key = argv[2]
        workdir = argv[3] if len(argv) > 3 else ""
        runner = argv[4] if len(argv) > 4 else None
        lines = record_lines(workdir, runner)
        data = ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape")
        if not os.path.isdir(RECORD_DIR):
            os.makedirs(RECORD_DIR)
        with open(os.path.join(RECORD_DIR, "record.txt"), "wb") as fh:
            fh.write(data)
        with open(os.path.join(RECORD_DIR, "record.mac"), "w") as fh:
            fh.write(mac(key, data) + "\n")
        return 0
    sys.stderr.write("usage: repogym_record.py --record KEY [WORKDIR [RUNNER]] | --plugins\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
