"""Dockerfile parsing, word expansion, .dockerignore and FROM mapping (no sandbox needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from repogym import dockerfile as _dockerfile
from repogym.dockerfile import expand, parse, parse_key_values
from repogym.sandbox import _context, _toolchains


def test_continuations_comments_and_forms() -> None:
    df = parse(
        "# syntax=docker/dockerfile:1\n"
        "FROM python:3.11-slim AS base\n"
        "\n"
        "# a comment\n"
        "RUN apt-get update && \\\n"
        "    # comment inside a continuation\n"
        "\n"
        "    apt-get install -y git\n"
        'CMD ["python", "-m", "http.server"]\n'
        "ENTRYPOINT echo hi\n"
        "run echo lower\n"
    )
    assert df.directives == {"syntax": "docker/dockerfile:1"}
    kws = [(i.lineno, i.keyword) for i in df.instructions]
    assert kws == [(2, "FROM"), (5, "RUN"), (9, "CMD"), (10, "ENTRYPOINT"), (11, "RUN")]
    run = df.instructions[1]
    assert run.args == "apt-get update &&     apt-get install -y git"
    assert run.json is None
    assert df.instructions[2].json == ["python", "-m", "http.server"]
    assert df.instructions[3].json is None


def test_escape_directive_and_flags() -> None:
    df = parse("# escape=`\nFROM debian\nCOPY --chown=app:app --chmod=755 a `\n  b /dst/\n")
    assert df.escape == "`"
    copy = df.instructions[1]
    assert copy.flags == {"chown": "app:app", "chmod": "755"}
    assert copy.args == "a   b /dst/"


def test_invalid_json_falls_back_to_shell_form() -> None:
    ins = parse('FROM x\nRUN ["echo", oops]\n').instructions[1]
    assert ins.json is None
    assert ins.args == '["echo", oops]'


def test_heredocs() -> None:
    df = parse(
        "FROM debian\n"
        "RUN <<EOF\n"
        "echo one\n"
        "echo two\n"
        "EOF\n"
        "COPY <<-'CFG' /etc/app.conf\n"
        "\tkey=$HOME\n"
        "\tCFG\n"
        "RUN echo after\n"
    )
    run, copy, after = df.instructions[1:]
    assert run.heredocs[0].name == "EOF"
    assert run.heredocs[0].body == "echo one\necho two\n"
    assert copy.heredocs[0].body == "key=$HOME\n"
    assert copy.heredocs[0].expand is False
    assert after.lineno == 9


def test_expansion_forms() -> None:
    env = {"A": "x", "EMPTY": "", "PATHV": "/usr/local/bin:/usr/bin", "F": "archive.tar.gz"}
    assert expand("$A-${A}-${UNSET:-dflt}-${A:+alt}-${EMPTY:-e}-${EMPTY-e}", env) == (
        "x-x-dflt-alt-e-"
    )
    assert expand(r"\$A '$A' \"$A\"", env) == '$A $A "x"'
    assert expand('"a b $A"', env) == "a b x"
    assert expand("${F%.gz}|${F%%.*}|${F#*.}|${F##*.}", env) == ("archive.tar|archive|tar.gz|gz")
    assert expand("${PATHV/usr/opt}", env) == "/opt/local/bin:/usr/bin"
    assert expand("${PATHV//usr/opt}", env) == "/opt/local/bin:/opt/bin"
    with pytest.raises(_dockerfile.DockerfileError):
        expand("${NOPE:?must be set}", env)


def test_env_and_arg_forms() -> None:
    df = parse(
        "FROM debian\n"
        'ENV A=1 B="two words" C=$A\n'
        "ENV LEGACY some value with spaces\n"
        "ARG VERSION=1.2 OTHER\n"
    )
    env_new, env_legacy, arg = df.instructions[1:]
    assert parse_key_values(env_new, {"A": "old"}, "\\") == [
        ("A", "1"),
        ("B", "two words"),
        ("C", "old"),  # same-instruction references see the previous value, like Docker
    ]
    assert parse_key_values(env_legacy, {}, "\\") == [("LEGACY", "some value with spaces")]
    assert parse_key_values(arg, {}, "\\", allow_bare=True) == [("VERSION", "1.2"), ("OTHER", None)]


def test_dockerignore(tmp_path: Path) -> None:
    (tmp_path / ".dockerignore").write_text(
        "# comment\n*.pyc\n/build\n**/node_modules\ndocs\n!docs/keep.md\n"
    )
    rules = _context.IgnoreRules.load(tmp_path)
    assert rules.ignored("a.pyc")
    assert not rules.ignored("src/a.pyc")  # `*.pyc` only matches at the top, like Docker
    assert rules.ignored("build/out.o")
    assert rules.ignored("web/app/node_modules/x.js")
    assert rules.ignored("docs/other.md")
    assert not rules.ignored("docs/keep.md")
    assert not rules.ignored("src/main.py")


def test_copy_sources_and_hash(tmp_path: Path) -> None:
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "a.py").write_text("a")
    (tmp_path / "src" / "skip.pyc").write_text("x")
    (tmp_path / "req.txt").write_text("r")
    (tmp_path / ".dockerignore").write_text("**/*.pyc\n")
    rules = _context.IgnoreRules.load(tmp_path)
    [src] = _context.resolve_sources(tmp_path, ["src"], rules)
    assert src.is_dir and src.include == {"pkg/", "pkg/a.py"}
    globbed = _context.resolve_sources(tmp_path, ["*.txt"], rules)
    assert [s.rel for s in globbed] == ["req.txt"]
    with pytest.raises(_context.ContextError, match="outside the build context"):
        _context.resolve_sources(tmp_path, ["../etc/passwd"], rules)
    with pytest.raises(_context.ContextError, match="not found"):
        _context.resolve_sources(tmp_path, ["missing.txt"], rules)
    before = _context.hash_sources([src])
    (tmp_path / "src" / "skip.pyc").write_text("changed but ignored")
    assert _context.hash_sources(_context.resolve_sources(tmp_path, ["src"], rules)) == before
    (tmp_path / "src" / "pkg" / "a.py").write_text("b")
    assert _context.hash_sources(_context.resolve_sources(tmp_path, ["src"], rules)) != before


def test_from_mapping() -> None:
    installed = _toolchains.python_installs()
    if not any(v.startswith("3.11.") for v in installed):
        pytest.skip("CPython 3.11 is not installed here")
    base = _toolchains.resolve("docker.io/library/python:3.11-slim-bookworm")
    assert base.kind == "python"
    assert base.mapping["python"].startswith("3.11.")
    assert base.env["PATH"].startswith("/usr/local/bin:")
    assert _toolchains.resolve("debian:bookworm").kind == "host"
    assert _toolchains.resolve("buildpack-deps:jammy").kind == "host"
    with pytest.raises(_toolchains.UnsupportedBase, match="not installed"):
        _toolchains.resolve("python:3.99")
    with pytest.raises(_toolchains.UnsupportedBase, match="cannot map"):
        _toolchains.resolve("alpine:3.19")
