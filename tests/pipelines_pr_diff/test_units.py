"""pr_diff building blocks without the sandbox: filters, the verifier's file walk and diff
(symlinks, binaries, caches, tests), its Python 3.8 standalone use, diffs that git applies,
judge answer parsing and [verifier.env] host templates."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repogym.cli import app
from repogym.pipelines.pr_diff import filter_reason, is_doc_path, verifier_module
from repogym.shipped import infra, testfiles
from repogym.shipped.diff_reward import file_diff, parse_judge_score, score_diff, tree_diff
from repogym.sources import FileChange, PullRequest
from repogym.sources.patches import is_test_path
from repogym.spec import PrDiffOptions
from repogym.taskdir.trust import expand_env

PY38 = Path("/root/.pyenv/versions/3.8.18/bin/python3.8")


def _pr(title: str = "Add a feature", body: str = "", files=None) -> PullRequest:
    return PullRequest(
        number=7,
        title=title,
        body=body,
        kind="squash",
        merge_sha="b" * 40,
        base_sha="a" * 40,
        head_sha="b" * 40,
        files=files if files is not None else [FileChange("src/app.py", "M", None, False, 4, 1)],
    )


class _DraftPR:
    """A remote source's PR record carries ``draft``."""

    def __init__(self, pr: PullRequest) -> None:
        self.__dict__.update({k: getattr(pr, k) for k in pr.__slots__})
        self.draft = True


@pytest.mark.parametrize(
    ("pr", "reason"),
    [
        (_pr(), None),
        (_pr("Draft: new parser"), "draft"),
        (_pr("[WIP] new parser"), "draft"),
        (_pr("wip: new parser"), "draft"),
        (_pr('Revert "Add a feature"'), "revert"),
        (_pr("Undo", "This reverts commit 0123456789abcdef."), "revert"),
        (_pr(files=[]), "empty change"),
        (_pr(files=[FileChange("tests/test_app.py", "M", None, False, 5, 0)]), "test-only"),
        (_pr(files=[FileChange("img/logo.png", "M", None, True)]), "binary-only"),
        (
            _pr(
                files=[
                    FileChange("README.md", "M", None, False, 3, 0),
                    FileChange("docs/api/index.html", "M", None, False, 3, 0),
                    FileChange("LICENSE", "M", None, False, 1, 1),
                ]
            ),
            "docs-only",
        ),
        (
            _pr(files=[FileChange(f"src/m{i}.py", "M", None, False, 2, 0) for i in range(21)]),
            "too many files",
        ),
        (_pr(files=[FileChange("src/app.py", "M", None, False, 900, 200)]), "too large"),
        (_pr(files=[FileChange("src/app.py", "M", None, False, 1, 1)]), "tiny diff"),
        # Test lines do not count towards the size of the change.
        (
            _pr(
                files=[
                    FileChange("src/app.py", "M", None, False, 1, 0),
                    FileChange("tests/test_app.py", "M", None, False, 50, 0),
                ]
            ),
            "tiny diff",
        ),
    ],
)
def test_filter_reasons(pr: PullRequest, reason: str | None) -> None:
    assert filter_reason(pr, PrDiffOptions()) == reason


def test_filters_follow_options_and_source_draft_flag() -> None:
    assert filter_reason(_DraftPR(_pr()), PrDiffOptions()) == "draft"  # type: ignore[arg-type]
    assert filter_reason(_pr("Draft: x y"), PrDiffOptions(include_drafts=True)) is None
    assert filter_reason(_pr('Revert "x"'), PrDiffOptions(include_reverts=True)) is None
    docs = _pr(files=[FileChange("docs/guide.rst", "M", None, False, 5, 0)])
    assert filter_reason(docs, PrDiffOptions(include_docs_only=True)) is None
    assert is_doc_path("CHANGELOG.md") and is_doc_path("doc/x.py") and not is_doc_path("src/a.py")


def test_verifier_test_rule_matches_the_pipeline() -> None:
    rule = verifier_module().is_test_path
    paths = [
        "tests/test_a.py",
        "src/test_b.py",
        "src/b_test.py",
        "conftest.py",
        "pkg/tests.py",
        "a/__tests__/x.js",
        "web/x.test.tsx",
        "web/x.spec.mjs",
        "go/x_test.go",
        "lib/x_spec.rb",
        "Foo.Tests/Bar.cs",
        "testdata/in.txt",
        "src/app.py",
        "src/testing_utils.py",
        "src/contest.py",
        "docs/testing.md",
        "web/latest.js",
    ]
    assert [rule(p) for p in paths] == [is_test_path(p) for p in paths]


def _tree(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def test_collect_changes_skips_what_is_not_an_answer(tmp_path: Path) -> None:
    vmod = verifier_module()
    base = _tree(
        tmp_path / "base",
        {"a.py": b"x = 1\n", "b.py": b"y = 2\n", "img.bin": b"\0\1", "tests/test_a.py": b"t\n"},
    )
    work = tmp_path / "work"
    shutil.copytree(base, work)
    _tree(
        work,
        {
            "a.py": b"x = 10\n",  # changed
            "new.py": b"z = 3\n",  # added
            "img.bin": b"\0\2",  # binary: skipped
            "tests/test_a.py": b"changed\n",  # tests: not part of the answer
            "__pycache__/a.cpython-312.pyc": b"junk",
            "node_modules/x/index.js": b"junk\n",
            "big.txt": b"a" * 1_000_001,
        },
    )
    (work / "b.py").unlink()
    (work / "b.py").symlink_to("/etc/passwd")  # never followed: reads as b.py deleted
    manifest = vmod.manifest_of(str(base))
    assert set(manifest) == {"a.py", "b.py", "img.bin"}
    changes, skipped, tampered = vmod.collect_changes(str(base), str(work), manifest)
    assert [c[0] for c in changes] == ["a.py", "b.py", "new.py"]
    assert dict((c[0], c[2]) for c in changes)["b.py"] is None
    assert sorted(skipped) == ["big.txt", "img.bin"] and tampered == []
    # A base copy that no longer matches the manifest is reported, not diffed.
    (base / "a.py").write_text("x = 10\n")
    _, _, tampered = vmod.collect_changes(str(base), str(work), manifest)
    assert tampered == ["a.py"]


@pytest.mark.skipif(not PY38.exists(), reason="CPython 3.8 not installed")
def test_verifier_runs_standalone_under_python38(tmp_path: Path) -> None:
    src = Path(verifier_module().__file__)
    tests = tmp_path / "tests"
    tests.mkdir()
    shutil.copy(src, tests / "verifier.py")
    shutil.copy(Path(score_diff.__code__.co_filename), tests / "diff_reward.py")
    shutil.copy(Path(infra.__file__), tests / "infra.py")  # as a task ships it
    shutil.copy(Path(testfiles.__file__), tests / "testfiles.py")  # the rule infra.py imports
    base = _tree(tmp_path / "base", {"m.py": b"def f():\n    return 1\n"})
    work = _tree(tmp_path / "work", {"m.py": b"def f():\n    return 2\n"})
    out = subprocess.run(
        [str(PY38), str(tests / "verifier.py"), "--make-diff", str(base), str(work)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out == file_diff("m.py", "def f():\n    return 1\n", "def f():\n    return 2\n")
    bad = subprocess.run([str(PY38), str(tests / "verifier.py"), "extra"], capture_output=True)
    assert bad.returncode == 2


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("a\nb\nc\n", "a\nB\nc\n"),
        ("a\nb", "a\nb\nc"),  # no newline at the end, on both sides
        (None, "fresh\nfile\n"),
        ("gone\n", None),
        ("x\r\ny\r\n", "x\r\nz\r\n"),
    ],
)
def test_file_diff_applies_with_git_and_scores_one(tmp_path: Path, old, new) -> None:
    work = tmp_path / "w"
    work.mkdir()
    if old is not None:
        (work / "f.txt").write_bytes(old.encode())
    diff = tree_diff([("f.txt", old, new)])
    assert score_diff(diff, diff, weights=None)["reward"] == 1.0
    (tmp_path / "p.diff").write_bytes(diff.encode())
    subprocess.run(["git", "apply", str(tmp_path / "p.diff")], cwd=work, check=True)
    if new is None:
        assert not (work / "f.txt").exists()
    else:
        assert (work / "f.txt").read_bytes() == new.encode()


def test_unchanged_file_gives_no_diff() -> None:
    assert file_diff("a", "same\n", "same\n") == "" and tree_diff([]) == ""
    assert score_diff("", "")["reward"] == 0.0  # an empty answer is not a diff


@pytest.mark.parametrize(
    ("text", "score"),
    [
        ('{"score": 0.25, "reason": "partly"}', 0.25),
        ('```json\n{"score": 1}\n```', 1.0),
        ("Score: 0.5", 0.5),
        ("0", 0.0),
        ('The verdict: {"score": 0.75}', 0.75),
    ],
)
def test_parse_judge_score(text: str, score: float) -> None:
    assert parse_judge_score(text) == score


@pytest.mark.parametrize("text", ["", "good", '{"score": 2}', '{"score": "high"}', "-1", "nan"])
def test_parse_judge_score_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_judge_score(text)


def test_verifier_env_templates_take_only_passed_host_variables() -> None:
    env = {
        "A": "${HOST_A}",
        "B": "${HOST_B:-fallback}",
        "C": "literal ${HOST_A} and ${SECRET}",
        "D": "${HOST_D:-}",
        "E": "${SECRET}",
    }
    passed = {"HOST_A": "from-host"}
    resolved, withheld = expand_env(env, passed)
    assert resolved == {
        "A": "from-host",
        "B": "fallback",
        "C": "literal from-host and ",
        "D": "",
        "E": "",
    }
    assert withheld == ["HOST_B", "SECRET", "HOST_D"]


def test_bad_options_exit_2(tmp_path: Path) -> None:
    cli = CliRunner()
    for opt in ("max_files=0", "include_drafts=maybe", "verifier_network=lan", "nope=1"):
        res = cli.invoke(
            app, ["generate", "--repo", str(tmp_path), "--pipeline", "pr_diff", "--opt", opt]
        )
        assert res.exit_code == 2, (opt, res.output)
        assert opt.split("=")[0] in res.output


class _RawServer:
    """A TCP server on 127.0.0.1 that answers every connection with fixed bytes (or nothing)."""

    def __init__(self, reply: bytes | None) -> None:
        import socket
        import threading

        self.reply = reply
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.conns: list = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            conn.recv(65536)
            if self.reply is not None:
                conn.sendall(self.reply)
                conn.close()

    def close(self) -> None:
        import socket

        # Wake the accept() first: closing alone leaves the thread blocked on a descriptor
        # number the next test's server may reuse, whose connections it would then swallow.
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.thread.join(timeout=10)
        self.sock.close()
        for c in self.conns:
            c.close()


@pytest.mark.parametrize(
    ("reply", "status"),
    [
        (b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"choi', "error: "),  # truncated body
        (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n[]", "error: unexpected response shape"),
        (b"garbage\r\n\r\n", "error: "),
        (None, "error: timeout"),
    ],
)
def test_call_judge_failures_never_raise(reply: bytes | None, status: str) -> None:
    server = _RawServer(reply)
    try:
        env = {
            "REPOGYM_JUDGE_URL": f"http://127.0.0.1:{server.port}/v1",
            "REPOGYM_JUDGE_API_KEY": "sk-never-shown-0000",
            "REPOGYM_JUDGE_TIMEOUT": "0.5",
        }
        text, got = verifier_module().call_judge([{"role": "user", "content": "x"}], env)
    finally:
        server.close()
    assert text is None and got.startswith(status), got
    assert "sk-never-shown" not in got


def test_call_judge_off_without_url() -> None:
    assert verifier_module().call_judge([], {}) == (None, "off")
