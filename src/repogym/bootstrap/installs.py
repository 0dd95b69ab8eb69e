"""Shell commands of CI steps, Makefiles and nox sessions, and what their installs mean.

:func:`split_commands` cuts a script into simple commands (continuations joined, ``&&``,
``||``, ``;`` and pipes split, comments dropped), each with its line. :func:`parse_install`
reads one command of pip, ``uv pip``, ``uv sync``, poetry or pdm into an :class:`InstallSpec`:
the project's extras and dependency groups, requirement files, other packages, local paths.
:func:`apt_packages` reads ``apt-get install`` lines. Nothing is executed.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from repogym.bootstrap.python.requirements import is_local_ref, local_target, local_text, req_name

TOOLING = frozenset(
    {
        "pip",
        "uv",
        "tox",
        "nox",
        "pre-commit",
        "twine",
        "codecov",
        "coveralls",
        "virtualenv",
        "pipenv",
        "poetry",
        "pdm",
        "hatch",
        "build",
        "tox-gh-actions",
        "tox-uv",
        "nox-uv",
        "check-manifest",
    }
)
"""Packages CI installs to drive the build, not for the tests: never put in the environment."""

# pip / uv pip options that take a value (the value is not a requirement).
_VALUE_OPTS = frozenset(
    [
        "-i",
        "--index-url",
        "--extra-index-url",
        "-f",
        "--find-links",
        "--progress-bar",
        "--only-binary",
        "--no-binary",
        "--config-settings",
        "-C",
        "--python",
        "-p",
        "--target",
        "-t",
        "--prefix",
        "--root",
        "--src",
        "--platform",
        "--python-version",
        "--implementation",
        "--abi",
        "--resolution",
        "--prerelease",
        "--index-strategy",
        "--keyring-provider",
        "--exclude-newer",
        "--upgrade-package",
        "-P",
        "--reinstall-package",
        "--python-platform",
        "--cache-dir",
        "--log",
        "--trusted-host",
        "--retries",
        "--timeout",
        "--proxy",
        "--cert",
        "--client-cert",
        "--global-option",
        "--install-option",
        "--uploaded-prior-to",
        "--report",
        "--build-constraint",
        "-b",
        "--override",
        "--torch-backend",
        "--link-mode",
        "--refresh-package",
    ]
)
_SHELL_SEPARATORS = frozenset({"&&", "||", ";", "|", "(", ")", "&", ";;"})
_DEBIAN_NAME = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")


@dataclass
class InstallSpec:
    """What one install command asks for."""

    where: str
    """``file:line`` of the command."""
    command: str
    tool: str
    """``pip``, ``uv-sync``, ``poetry`` or ``pdm``."""
    project: bool = False
    """The repository itself is installed (``.``, ``-e .[x]``, ``uv sync``, …)."""
    extras: list[str] = field(default_factory=list)
    all_extras: bool = False
    groups: list[str] = field(default_factory=list)
    all_groups: bool = False
    default_groups: bool = False
    """The tool adds the project's default groups (``uv sync``: dev; poetry: non-optional)."""
    requirement_files: list[str] = field(default_factory=list)
    packages: list[str] = field(default_factory=list)
    local: list[str] = field(default_factory=list)
    """Other local paths installed (``-e ./plugins/x``), relative to the repository."""
    unknown: list[str] = field(default_factory=list)
    """Arguments that could not be read (``${{ matrix.deps }}``, f-strings)."""


def _strip_comment(line: str) -> str:
    """``line`` without a shell comment (a ``#`` that starts a word, outside quotes)."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def _words(text: str) -> list[str]:
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:  # unbalanced quotes: plain whitespace split
        return text.split()


def split_commands(script: str, first_line: int = 1) -> list[tuple[int, list[str]]]:
    """``(line, words)`` of each simple command in a shell script."""
    out: list[tuple[int, list[str]]] = []
    lines = script.splitlines()
    i = 0
    while i < len(lines):
        start = i
        text = _strip_comment(lines[i])
        while text.rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            text = text.rstrip()[:-1] + " " + _strip_comment(lines[i])
        i += 1
        # GitHub expressions are one word: ``${{ matrix.deps }}`` → ``${{matrix.deps}}``.
        text = re.sub(r"\$\{\{(.*?)\}\}", lambda m: "${{" + re.sub(r"\s+", "", m[1]) + "}}", text)
        current: list[str] = []
        for word in _words(text):
            if word in _SHELL_SEPARATORS:
                if current:
                    out.append((first_line + start, current))
                current = []
            else:
                current.append(word)
        if current:
            out.append((first_line + start, current))
    return out


def strip_prefix(words: list[str]) -> list[str]:
    """The command without ``sudo``, ``env``, ``time``, ``VAR=value`` and ``@``/``-`` (make)."""
    words = list(words)
    if words:
        words[0] = words[0].lstrip("@-+") or words[0]
    while words and (
        words[0] in ("sudo", "env", "time", "command", "exec", "xargs")
        or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0])
        or (words[0].startswith("-") and words[0] != "-")
    ):
        words = words[1:]
    return words


def _pip_args(words: list[str]) -> list[str] | None:
    """The arguments after ``install`` of a pip-like command (None: not one)."""
    w = strip_prefix(words)
    if not w:
        return None
    head = w[0].rsplit("/", 1)[-1]
    if re.fullmatch(r"python[0-9.]*|py|pypy3?", head) and w[1:3] == ["-m", "pip"]:
        w = w[2:]
        head = "pip"
    elif re.fullmatch(r"python[0-9.]*", head) and w[1:3] == ["-m", "uv"]:
        w = w[2:]
        head = "uv"
    if head == "uv" and len(w) > 1 and w[1] == "pip":
        w = w[1:]
        head = "pip"
    if re.fullmatch(r"pip[0-9.]*", head) and len(w) > 1 and w[1] == "install":
        return w[2:]
    return None


def _add_project(spec: InstallSpec, target: tuple[str, list[str]]) -> None:
    path, extras = target
    if path:
        spec.local.append(local_text(path, extras))
    else:
        spec.project = True
        spec.extras += [e for e in extras if e not in spec.extras]


def _parse_pip(args: list[str], spec: InstallSpec) -> None:
    i = 0
    while i < len(args):
        arg = args[i]
        value = args[i + 1] if i + 1 < len(args) else ""
        if "${{" in arg or "$(" in arg or re.search(r"\$\{?\w", arg):
            spec.unknown.append(arg)
        elif arg in ("-e", "--editable") or arg.startswith("--editable="):
            target = arg.split("=", 1)[1] if "=" in arg else value
            i += 0 if "=" in arg else 1
            local = local_target(target)
            if local is not None:
                _add_project(spec, local)
            elif "${{" in target or "$" in target:
                spec.unknown.append(target)
            else:
                spec.packages.append(f"-e {target}")
        elif arg in ("-r", "--requirement"):
            spec.requirement_files.append(value)
            i += 1
        elif arg.startswith(("--requirement=", "-r")):
            spec.requirement_files.append(re.sub(r"^(--requirement=|-r)", "", arg))
        elif arg in ("--group",) or arg.startswith("--group="):
            group = arg.split("=", 1)[1] if "=" in arg else value
            i += 0 if "=" in arg else 1
            spec.groups.append(group.rsplit(":", 1)[-1])
        elif arg in ("-c", "--constraint") or arg in _VALUE_OPTS:
            i += 1
        elif arg.startswith("-"):
            pass
        elif is_local_ref(arg) or ("/" in arg and "://" not in arg and "@" not in arg):
            local = local_target(arg)
            if local is not None:
                _add_project(spec, local)
            else:
                spec.unknown.append(arg)
        elif req_name(arg) or "://" in arg:
            spec.packages.append(arg)
        i += 1


def _split_names(value: str) -> list[str]:
    return [v for v in re.split(r"[,\s]+", value) if v]


def _parse_tool(tool: str, args: list[str], spec: InstallSpec) -> None:
    """``uv sync`` / ``poetry install`` / ``pdm install|sync`` options."""
    i = 0
    while i < len(args):
        arg = args[i]
        name, _, inline = arg.partition("=")
        value = inline if inline else (args[i + 1] if i + 1 < len(args) else "")
        takes = not inline
        if name in ("--extra", "-E", "--extras"):
            spec.extras += _split_names(value)
            i += takes
        elif name in ("--group", "--only-group", "--only", "-G") or (
            name == "--with" and tool == "poetry"
        ):
            for group in _split_names(value):
                if group == ":all":
                    spec.all_groups = True
                else:
                    spec.groups.append(group)
            if name in ("--only-group", "--only"):
                spec.default_groups = False
            i += takes
        elif name in ("--all-extras",):
            spec.all_extras = True
        elif name in ("--all-groups",):
            spec.all_groups = True
        elif name in ("--no-dev", "--no-default-groups", "--prod", "--production"):
            spec.default_groups = False
        elif name in ("-d", "--dev") and tool == "pdm":
            spec.default_groups = True
        elif name in ("--no-root", "--no-self", "--no-install-project", "--only-deps"):
            spec.project = False
        elif name in ("--without", "--no-group", "--no-extra") or name in _UV_RUN_VALUE_OPTS:
            i += takes
        i += 1


_UV_RUN_VALUE_OPTS = frozenset(
    {
        "--group",
        "--only-group",
        "--extra",
        "--with",
        "--with-editable",
        "--with-requirements",
        "--python",
        "-p",
        "--package",
        "--directory",
        "--project",
        "--env-file",
        "--index",
        "--default-index",
        "--exclude-newer",
        "--no-group",
        "--no-extra",
    }
)


def uv_run_split(args: list[str]) -> tuple[list[str], list[str]]:
    """``uv run`` arguments as ``(uv's options, the command it runs)``."""
    i = 0
    while i < len(args) and args[i].startswith("-"):
        name = args[i].split("=", 1)[0]
        i += 2 if name in _UV_RUN_VALUE_OPTS and "=" not in args[i] else 1
    return args[:i], args[i:]


def _parse_uv_run(options: list[str], spec: InstallSpec) -> None:
    """``uv run`` syncs the project first (unless ``--no-sync``); ``--with`` adds packages."""
    _parse_tool("uv", options, spec)
    for i, arg in enumerate(options):
        name, _, inline = arg.partition("=")
        value = inline or (options[i + 1] if i + 1 < len(options) else "")
        if name == "--with":
            spec.packages += _split_names(value)
        elif name == "--with-requirements":
            spec.requirement_files.append(value)
        elif name == "--no-project":
            spec.project = False
            spec.default_groups = False


def parse_install(words: list[str], where: str) -> InstallSpec | None:
    """What an install command installs (None: not an install command)."""
    command = " ".join(words)[:200]
    args = _pip_args(words)
    if args is not None:
        spec = InstallSpec(where, command, "pip")
        _parse_pip(args, spec)
        return spec
    w = strip_prefix(words)
    head = w[0].rsplit("/", 1)[-1] if w else ""
    if head == "uv" and w[1:2] == ["run"]:
        options, _ = uv_run_split(w[2:])
        if "--no-sync" in options or "--frozen" in options and "--no-project" in options:
            return None
        spec = InstallSpec(where, command, "uv-sync", project=True, default_groups=True)
        _parse_uv_run(options, spec)
    elif head == "uv" and w[1:2] == ["sync"]:
        spec = InstallSpec(where, command, "uv-sync", project=True, default_groups=True)
        _parse_tool("uv", w[2:], spec)
    elif head == "poetry" and w[1:2] == ["install"]:
        spec = InstallSpec(where, command, "poetry", project=True, default_groups=True)
        _parse_tool("poetry", w[2:], spec)
    elif head == "pdm" and w[1:2] in (["install"], ["sync"]):
        spec = InstallSpec(where, command, "pdm", project=True, default_groups=True)
        _parse_tool("pdm", w[2:], spec)
    else:
        return None
    return spec


def apt_packages(words: list[str]) -> list[str] | None:
    """Debian packages of an ``apt-get install`` / ``apt install`` command (None: not one)."""
    w = strip_prefix(words)
    if not w or w[0].rsplit("/", 1)[-1] not in ("apt-get", "apt", "aptitude"):
        return None
    rest = [a for a in w[1:] if not a.startswith("-")]
    if not rest or rest[0] != "install":
        return None
    packages = []
    for arg in rest[1:]:
        name = arg.split("=", 1)[0]
        if _DEBIAN_NAME.match(name) and not name.startswith("python"):
            packages.append(name)
    return packages


_TEST_RUNNERS = re.compile(
    r"^(py\.?test|tox|nox|hatch|coverage|unittest|green|stestr|trial|zope-testrunner)$"
)


def is_test_command(words: list[str]) -> bool:
    """Whether a command runs the test suite (pytest, unittest, tox, nox, ``make test``…)."""
    w = strip_prefix(words)
    if not w:
        return False
    head = w[0].rsplit("/", 1)[-1]
    if head == "uv" and w[1:2] == ["run"]:
        return is_test_command(uv_run_split(w[2:])[1])
    if head in ("poetry", "pdm", "pipenv", "hatch") and len(w) > 2 and w[1] == "run":
        return is_test_command(w[2:])
    if head in ("uv", "uvx", "pipx") and len(w) > 1 and w[1] in ("tool",):
        return False
    if head == "hatch":
        return "test" in w[1:3]
    if head == "make":
        return any(re.fullmatch(r"(unit-?)?tests?|check|ci|test-\w+", a) for a in w[1:])
    if re.fullmatch(r"python[0-9.]*|py", head):
        module = w[w.index("-m") + 1] if "-m" in w[:-1] else ""
        if module in ("pytest", "py.test", "unittest", "tox", "nox"):
            return True
        if module == "coverage":
            return "pytest" in w or "unittest" in w
        script = w[1] if len(w) > 1 else ""
        return w[1:3] == ["setup.py", "test"] or (script.endswith(".py") and "test" in script)
    if head == "coverage":
        return "run" in w[1:2] and "pytest" in w
    if re.fullmatch(r"[\w.-]*test[\w.-]*\.sh", head):  # ./ci/run_tests.sh, scripts/test.sh
        return True
    return bool(_TEST_RUNNERS.match(head)) and head not in ("hatch", "coverage")
