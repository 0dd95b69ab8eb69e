"""The environment variables repogym documents, checked before any command does work.

Each variable a user may set has one rule here (a URL, a folder, a file, a number, a name); the
root command checks every one that is set, so a garbage value is one line naming the variable
and exit 2 — never a traceback or a per-task "internal error" deep inside the work. Flags that
take the same kinds of value (``--llm-endpoint``) use the same rules.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from repogym.http import url_problem


class BadValue(ValueError):
    """A variable's or flag's value that cannot be used (the message names it)."""


def check_http_url(name: str, value: str) -> str:
    """``value`` if it is an absolute http(s) URL with a host (and a valid port), else
    :class:`BadValue` naming ``name``."""
    problem = url_problem(value)
    if problem:
        shown = repr(value) if len(value) <= 80 else repr(value[:77] + "...")
        raise BadValue(f"{name}: {shown} {problem}")
    return value


def check_folder(name: str, value: str) -> str:
    """``value`` if it is a folder, or a path whose nearest existing parent is a folder (it can
    be created), else :class:`BadValue`."""
    if "\0" in value or not value.strip():
        raise BadValue(f"{name}: {value!r} is not a path")
    path = Path(value).expanduser()
    probe = path
    while True:
        try:
            mode = os.stat(probe).st_mode
        except FileNotFoundError:
            if probe.parent == probe:
                raise BadValue(f"{name}: {value}: no existing parent folder") from None
            probe = probe.parent
            continue
        except OSError as exc:
            raise BadValue(f"{name}: {value}: {exc.strerror}") from None
        if not stat.S_ISDIR(mode):
            what = "names a file, not a folder" if probe == path else f"{probe} is not a folder"
            raise BadValue(f"{name}: {value}: {what}")
        return value


def check_file(name: str, value: str) -> str:
    """``value`` if it names a readable regular file, else :class:`BadValue`."""
    try:
        mode = os.stat(value).st_mode
    except OSError as exc:
        raise BadValue(f"{name}: {value}: {exc.strerror}") from None
    if not stat.S_ISREG(mode):
        raise BadValue(f"{name}: {value}: not a regular file")
    return value


def check_positive_int(name: str, value: str) -> str:
    if not value.strip().isdigit() or int(value) < 1:
        raise BadValue(f"{name}: {value!r} is not a positive whole number")
    return value


def _check_mirrors(name: str, value: str) -> str:
    from repogym.sandbox import registry_mirrors

    mirrors = registry_mirrors({name: value})
    if not mirrors:
        raise BadValue(f"{name}: {value!r} names no registry endpoint")
    for host, url in mirrors.items():
        check_http_url(f"{name} ({host})", url)
    return value


def _check_sandbox(name: str, value: str) -> str:
    from repogym.sandbox import backend_names

    if value not in backend_names():
        raise BadValue(
            f"{name}: unknown sandbox {value!r} (choose from {', '.join(backend_names())})"
        )
    return value


def _check_shared_cache(name: str, value: str) -> str:
    from repogym.sandbox.shared_cache import SharedCacheError, check_url

    try:
        check_url(value)
    except SharedCacheError as exc:
        raise BadValue(f"{name}: {exc}") from None
    return value


@dataclass(frozen=True)
class Variable:
    name: str
    check: Callable[[str, str], str]
    what: str


VARIABLES: tuple[Variable, ...] = (
    Variable("OPENAI_BASE_URL", check_http_url, "OpenAI-compatible endpoint"),
    Variable("ANTHROPIC_BASE_URL", check_http_url, "Anthropic endpoint"),
    Variable("HF_ENDPOINT", check_http_url, "Hugging Face Hub endpoint"),
    Variable("REPOGYM_GITHUB_API", check_http_url, "GitHub API base URL"),
    Variable("REPOGYM_GITLAB_URL", check_http_url, "GitLab base URL"),
    Variable("REPOGYM_OSV_URL", check_http_url, "OSV API base URL"),
    Variable("REPOGYM_PYPI_JSON", check_http_url, "PyPI JSON API base URL"),
    Variable("REPOGYM_JUDGE_URL", check_http_url, "LLM judge endpoint"),
    Variable("REPOGYM_AGENT_ENDPOINT", check_http_url, "endpoint handed to agents"),
    Variable("REPOGYM_REGISTRY_MIRROR", _check_mirrors, "container registry mirrors"),
    Variable("REPOGYM_CACHE", check_folder, "local cache folder"),
    Variable("REPOGYM_CLONE_CACHE", check_folder, "clone cache folder"),
    Variable("REPOGYM_HUB_CACHE", check_folder, "explorer Hub cache folder"),
    Variable("XDG_STATE_HOME", check_folder, "state folder (explorer runs)"),
    Variable("REPOGYM_CA_BUNDLE", check_file, "extra CA certificates (PEM)"),
    Variable("REPOGYM_LIMITS", check_file, "task limits file"),
    Variable("REPOGYM_MAX_SESSIONS", check_positive_int, "serve: concurrent sessions"),
    Variable("REPOGYM_SANDBOX", _check_sandbox, "serve: sandbox backend"),
    Variable("REPOGYM_SHARED_CACHE", _check_shared_cache, "shared cache URL"),
)
"""Every variable a user may set, with its rule (docs/cli.md lists the same)."""


def check_environment(environ: Mapping[str, str] | None = None) -> None:
    """Check every documented variable that is set (and not empty): :class:`BadValue` for the
    first that cannot be used."""
    env = os.environ if environ is None else environ
    for var in VARIABLES:
        value = env.get(var.name, "")
        if value.strip():
            var.check(var.name, value)
