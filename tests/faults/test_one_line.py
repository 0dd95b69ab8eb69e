"""One error path: usage errors, garbage in documented variables, OS errors and bugs are each
one line on stderr with the documented exit code; ``--debug`` shows the traceback instead.

Driven through the real CLI (typer's runner calls the same root command as the console script).
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repogym.cli import app
from repogym.cli.envvars import VARIABLES, check_environment
from tests.conftest import EXAMPLES, snapshot

cli = CliRunner()


def one_line(res: object, code: int, *fragments: str) -> str:
    out = res.output  # type: ignore[attr-defined]
    assert res.exit_code == code, out  # type: ignore[attr-defined]
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1, out
    assert "Traceback" not in out
    for fragment in fragments:
        assert fragment in out, out
    return out


# ------------------------------------------------------------------------------ usage errors


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["run", str(EXAMPLES), "--bogus"], "No such option: --bogus"),
        (["bogus"], "No such command 'bogus'"),
        (["--bogus"], "No such option: --bogus"),
        (["run", str(EXAMPLES), "--attempts", "many"], "--attempts"),
        (["dataset"], "Missing command"),
        (["pull"], "Missing argument"),
    ],
)
def test_usage_errors_are_one_line_with_a_hint(argv: list[str], fragment: str) -> None:
    one_line(cli.invoke(app, argv), 2, fragment, "--help")


# ----------------------------------------------------------------- documented variables

GARBAGE = {
    "check_http_url": ":::",
    "check_folder": "/dev/null/x",
    "check_file": "/nonexistent/ca.pem",
    "check_positive_int": "-3",
    "_check_mirrors": "docker.io=:::",
    "_check_sandbox": "bogus",
    "_check_shared_cache": "nosuchscheme://x",
}


@pytest.mark.parametrize("var", VARIABLES, ids=lambda v: v.name)
def test_every_documented_variable_is_checked_before_any_work(var: object, tmp_path: Path) -> None:
    name, check = var.name, var.check  # type: ignore[attr-defined]
    before = snapshot(EXAMPLES)
    res = cli.invoke(app, ["dataset", "index", str(EXAMPLES)], env={name: GARBAGE[check.__name__]})
    one_line(res, 2, name)
    assert snapshot(EXAMPLES) == before


@pytest.mark.parametrize(
    ("env", "argv"),
    [
        ({"OPENAI_BASE_URL": ":::"}, ["auth", "check", "--no-probe"]),
        ({"ANTHROPIC_BASE_URL": "http://[::1"}, ["auth", "check", "--no-probe"]),
        ({"REPOGYM_GITHUB_API": ":::"}, ["generate", "--repo", "acme/x"]),
        ({"REPOGYM_OSV_URL": ":::"}, ["generate", "--repo", "acme/x", "--pipeline", "cve_patches"]),
        ({"REPOGYM_CACHE": "/etc/hostname"}, ["run", str(EXAMPLES)]),
        ({"REPOGYM_CACHE": "/dev/null/x"}, ["validate", str(EXAMPLES), "--runnable"]),
        ({"REPOGYM_REGISTRY_MIRROR": "http://"}, ["run", str(EXAMPLES)]),
        ({"REPOGYM_SHARED_CACHE": "nosuchscheme://x"}, ["run", str(EXAMPLES)]),
        ({"HF_ENDPOINT": "ftp://hub"}, ["pull", "acme/x", "dest"]),
    ],
    ids=lambda v: "-".join(v) if isinstance(v, list) else next(iter(v)),
)
def test_the_named_garbage_values_stop_the_named_commands(
    env: dict[str, str], argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    one_line(cli.invoke(app, argv, env=env), 2, next(iter(env)))
    assert list(tmp_path.iterdir()) == []


def test_help_works_whatever_the_environment() -> None:
    res = cli.invoke(app, ["run", "--help"], env={"REPOGYM_CACHE": "/dev/null/x"})
    assert res.exit_code == 0 and "--attempts" in res.output


def test_good_values_pass(tmp_path: Path) -> None:
    check_environment(
        {
            "OPENAI_BASE_URL": "http://127.0.0.1:8000/v1",
            "HF_ENDPOINT": "https://hub.example",
            "REPOGYM_CACHE": str(tmp_path / "not-yet" / "cache"),
            "REPOGYM_REGISTRY_MIRROR": "docker.io=http://127.0.0.1:5000,ghcr.io=https://m.example",
            "REPOGYM_MAX_SESSIONS": "4",
            "REPOGYM_SANDBOX": "local",
        }
    )


# ----------------------------------------------------------------------- OS errors and bugs


def _raise(exc: BaseException):  # type: ignore[no-untyped-def]
    def boom(*_a: object, **_k: object) -> None:
        raise exc

    return boom


def test_an_os_error_names_its_path(monkeypatch: pytest.MonkeyPatch) -> None:
    import repogym.taskdir.dataset as dataset

    full = OSError(errno.ENOSPC, "No space left on device", "/data/ds/registry.json")
    monkeypatch.setattr(dataset, "write_dataset_index", _raise(full))
    monkeypatch.setattr("repogym.cli.dataset.write_dataset_index", _raise(full), raising=False)
    res = cli.invoke(app, ["dataset", "index", str(EXAMPLES)])
    one_line(res, 2, "/data/ds/registry.json", "no space left")


def test_a_bug_is_one_line_and_debug_shows_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import repogym.taskdir.dataset as dataset

    bug = ZeroDivisionError("division by zero")
    monkeypatch.setattr(dataset, "write_dataset_index", _raise(bug))
    monkeypatch.setattr("repogym.cli.dataset.write_dataset_index", _raise(bug), raising=False)
    res = cli.invoke(app, ["dataset", "index", str(EXAMPLES)])
    one_line(res, 1, "internal error: ZeroDivisionError", "--debug")
    res = cli.invoke(app, ["--debug", "dataset", "index", str(EXAMPLES)])
    assert isinstance(res.exception, ZeroDivisionError)
    res = cli.invoke(app, ["dataset", "index", str(EXAMPLES)], env={"REPOGYM_DEBUG": "1"})
    assert isinstance(res.exception, ZeroDivisionError)
