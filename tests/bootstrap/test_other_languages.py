"""Node, Rust and Go detection (toolchains faked where the host's would decide)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from repogym.bootstrap import UnsupportedRepo, detect, guess_language, make_recipe
from repogym.bootstrap.commit import CommitInfo
from repogym.bootstrap.native import go, rust
from repogym.bootstrap.node import project as node

MakeRepo = Callable[..., Path]


def pkg(**fields: object) -> str:
    return json.dumps({"name": "demo", "version": "1.0.0", **fields})


@pytest.fixture(autouse=True)
def fake_toolchains(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pin host toolchains and registry reachability so results do not depend on the host."""
    monkeypatch.setattr(node, "host_node", lambda: "20.11.1")
    monkeypatch.setattr(rust, "host_cargo", lambda: ("/fake/cargo", "1.80.1"))
    monkeypatch.setattr(go, "host_go", lambda: ("/fake/go", "1.19.8"))
    for module in (rust, go):  # each looks `reachable` up in its own namespace
        monkeypatch.setattr(module, "reachable", lambda host, port=443, timeout=3.0: False)


@pytest.mark.parametrize(
    ("fields", "runner"),
    [
        ({"scripts": {"test": "jest"}, "devDependencies": {"jest": "^29"}}, "jest"),
        ({"scripts": {"test": "vitest"}, "devDependencies": {"vitest": "^1"}}, "vitest"),
        ({"scripts": {"test": "mocha 'test/**/*.js'"}}, "mocha"),
        ({"scripts": {"test": "node --test test/"}}, "node"),
        ({"scripts": {"test": "react-scripts test"}}, "jest"),
        ({"devDependencies": {"vitest": "^1", "jest": "^29"}}, "vitest"),
        (
            {
                "scripts": {"test": 'echo "Error: no test specified" && exit 1'},
                "devDependencies": {"mocha": "^10"},
            },
            "mocha",
        ),
    ],
)
def test_node_runner(make_repo: MakeRepo, fields: dict, runner: str) -> None:
    repo = make_repo({"package.json": pkg(**fields)})
    d = detect(repo)
    assert (d.language, d.runner, d.base_image, d.supported) == (
        "node",
        runner,
        "node:20-slim",
        True,
    )


def test_node_npm_ci_and_layer_order(make_repo: MakeRepo) -> None:
    repo = make_repo(
        {
            "package.json": pkg(scripts={"test": "jest --runInBand --coverage"}),
            "package-lock.json": "{}",
            ".npmrc": "fund=false\n",
        }
    )
    recipe = make_recipe(repo)
    lines = recipe.dockerfile.splitlines()
    assert "COPY repo/package.json repo/.npmrc repo/package-lock.json ./" in lines
    assert lines.index("RUN npm ci") < lines.index("COPY repo/ /workspace/")
    assert recipe.test_command == "npx --no-install jest --ci --verbose --runInBand"
    assert recipe.collect_command == (
        "npx --no-install jest --ci --json --testNamePattern='(?!)' --runInBand"
    )
    assert recipe.test_command_for(["src/a.test.js > math > adds", "src/b.test.js > x"]) == (
        "npx --no-install jest --ci --verbose --runInBand src/a.test.js src/b.test.js"
        " -t '^(math adds|x)$'"
    )


def test_node_lockfiles(make_repo: MakeRepo) -> None:
    base = {"package.json": pkg(scripts={"test": "mocha"})}
    pnpm = make_repo({**base, "pnpm-lock.yaml": "lockfileVersion: '6.0'\n"})
    assert "npx --yes pnpm@8 install --frozen-lockfile" in make_recipe(pnpm).dockerfile
    yarn1 = make_repo({**base, "yarn.lock": "# yarn lockfile v1\n"})
    assert "npx --yes yarn@1 install --frozen-lockfile" in make_recipe(yarn1).dockerfile
    berry = make_repo({**base, "yarn.lock": "__metadata:\n  version: 6\n"})
    d = detect(berry)
    assert any("yarn ≥2 is not supported" in n for n in d.notes)
    assert "npm install --no-package-lock" in make_recipe(berry, d).dockerfile
    none = make_repo(base)
    assert "no lockfile" in " ".join(detect(none).notes)


def test_node_install_scripts_run_after_source(make_repo: MakeRepo) -> None:
    repo = make_repo(
        {
            "package.json": pkg(
                scripts={
                    "test": "vitest",
                    "postinstall": "node build.js",
                    "prepare": "husky install",
                }
            ),
            "package-lock.json": "{}",
        }
    )
    lines = make_recipe(repo).dockerfile.splitlines()
    assert "RUN npm ci --ignore-scripts" in lines
    assert lines.index("COPY repo/ /workspace/") < lines.index("RUN npm rebuild")
    assert "RUN npm run prepare" not in lines  # git hooks are skipped


def test_node_workspaces(make_repo: MakeRepo) -> None:
    repo = make_repo(
        {
            "package.json": pkg(workspaces=["packages/*"], scripts={"test": "vitest run"}),
            "package-lock.json": "{}",
            "packages/a/package.json": pkg(name="a"),
            "packages/b/package.json": pkg(name="b"),
        }
    )
    df = make_recipe(repo).dockerfile
    assert "COPY repo/packages/a/package.json ./packages/a/" in df
    assert "COPY repo/packages/b/package.json ./packages/b/" in df


def test_node_without_runner_is_unsupported(make_repo: MakeRepo) -> None:
    repo = make_repo({"package.json": pkg(scripts={"test": "ava"}, devDependencies={"ava": "6"})})
    d = detect(repo)
    assert not d.supported and "ava" in d.reason
    with pytest.raises(UnsupportedRepo):
        make_recipe(repo, d)


def test_node_missing_on_host(make_repo: MakeRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(node, "host_node", lambda: None)
    d = detect(make_repo({"package.json": pkg(scripts={"test": "jest"})}))
    assert not d.supported and "Node.js is not installed" in d.reason


def test_node_bad_package_json(make_repo: MakeRepo) -> None:
    d = detect(make_repo({"package.json": "{nope"}))
    assert not d.supported and "not valid JSON" in d.reason


CARGO = """
[package]
name = "demo"
version = "0.1.0"
edition = "2021"
"""


def test_rust_without_registry_crates(make_repo: MakeRepo) -> None:
    repo = make_repo(
        {
            "Cargo.toml": CARGO + '\n[dependencies]\nhelper = { path = "helper" }\n',
            "src/lib.rs": "",
        }
    )
    d = detect(repo)
    assert (d.language, d.runner, d.base_image, d.supported) == (
        "rust",
        "cargo",
        "rust:1.80-slim",
        True,
    )
    recipe = make_recipe(repo, d)
    assert recipe.collect_command == f"{rust.CARGO} test --offline -- --list"
    assert recipe.test_command_for(["demo:src/lib.rs::tests::it_works", "b::c"]) == (
        f"{rust.CARGO} test --offline --no-fail-fast -- --exact tests::it_works b::c"
    )


def test_rust_lints_capped_unless_the_repository_sets_rustflags(make_repo: MakeRepo) -> None:
    plain = make_repo({"Cargo.toml": CARGO, "src/lib.rs": ""})
    assert make_recipe(plain).env["RUSTFLAGS"] == "--cap-lints=warn"
    own = make_repo(
        {
            "Cargo.toml": CARGO,
            "src/lib.rs": "",
            ".cargo/config.toml": '[build]\nrustflags = ["--cfg", "tokio_unstable"]\n',
        }
    )
    assert "RUSTFLAGS" not in make_recipe(own).env


def test_rust_workspace_members_stay_inside(make_repo: MakeRepo) -> None:
    """``members = ["."]`` (the root package), globs, and entries leaving the repository."""
    workspace = '\n[workspace]\nmembers = [".", "./crates/*", "../outside", "/etc", ""]\n'
    repo = make_repo(
        {
            "Cargo.toml": CARGO + workspace + '\n[dependencies]\nhelper = { path = "crates/h" }\n',
            "crates/h/Cargo.toml": CARGO.replace("demo", "h") + '\n[dependencies]\nserde = "1"\n',
            "src/lib.rs": "",
        }
    )
    d = detect(repo)
    assert d.native is not None and d.native.external == ["serde"]


def test_rust_with_crates_offline(make_repo: MakeRepo) -> None:
    repo = make_repo({"Cargo.toml": CARGO + '\n[dependencies]\nserde = "1"\n', "src/lib.rs": ""})
    d = detect(repo)
    assert not d.supported
    assert "crates.io is not reachable" in d.reason and "serde" in d.reason


def test_rust_lockfile_decides(make_repo: MakeRepo) -> None:
    lock = (
        '[[package]]\nname = "demo"\nversion = "0.1.0"\n\n'
        '[[package]]\nname = "itoa"\nversion = "1.0.0"\n'
        'source = "registry+https://github.com/rust-lang/crates.io-index"\n'
    )
    repo = make_repo({"Cargo.toml": CARGO, "Cargo.lock": lock, "src/lib.rs": ""})
    d = detect(repo)
    assert d.native is not None and d.native.external == ["itoa"]
    assert not d.supported


def test_rust_vendored_is_supported(make_repo: MakeRepo) -> None:
    repo = make_repo(
        {
            "Cargo.toml": CARGO + '\n[dependencies]\nserde = "1"\n',
            ".cargo/config.toml": '[source.crates-io]\nreplace-with = "vendored"\n',
            "vendor/serde/Cargo.toml": "",
            "src/lib.rs": "",
        }
    )
    assert detect(repo).supported


@pytest.mark.parametrize(
    ("files", "problem", "note"),
    [
        (  # an older pinned release with a component: the host's stands for it
            {
                "rust-toolchain.toml": '[toolchain]\nchannel = "1.70.0"\n'
                'components = ["rust-src", "clippy"]\n'
            },
            "",
            "rust-toolchain.toml asks for Rust 1.70.0 with rust-src: the host's Rust 1.80.1",
        ),
        ({"rust-toolchain": "1.85.0\n"}, "rust-toolchain asks for Rust 1.85.0; the host", ""),
        (  # nightly without unstable features builds on stable
            {"rust-toolchain": "nightly-2023-01-01\n", "src/lib.rs": "pub fn f() {}\n"},
            "",
            "asks for Rust nightly-2023-01-01",
        ),
        (
            {
                "rust-toolchain.toml": '[toolchain]\nchannel = "nightly"\n',
                "src/lib.rs": "#![feature(test)]\npub fn f() {}\n",
            },
            "src/lib.rs enables unstable features",
            "",
        ),
    ],
)
def test_rust_toolchain_file(
    make_repo: MakeRepo, files: dict[str, str], problem: str, note: str
) -> None:
    repo = make_repo({"Cargo.toml": CARGO, **files})
    d = detect(repo)
    assert problem in d.reason and d.supported == (not problem)
    if note:
        assert any(note in n for n in d.notes), d.notes
        recipe = make_recipe(repo, d)
        assert recipe.env["RUSTUP_TOOLCHAIN"] == "1.80.1"


@pytest.mark.parametrize(
    ("channel", "installed"),
    [
        ("1.70.0", "1.70.0"),
        ("nightly-2023-01-01", "nightly-2023-01-01"),
        ("nightly", "nightly-2023-05-01"),  # floating nightly: as of the commit's day
        ("stable", None),
    ],
)
def test_rust_toolchain_installed_when_rustup_is_reachable(
    make_repo: MakeRepo, monkeypatch: pytest.MonkeyPatch, channel: str, installed: str | None
) -> None:
    monkeypatch.setattr(
        rust, "reachable", lambda host, port=443, timeout=3.0: host == rust.RUSTUP_HOST
    )
    toolchain = f'[toolchain]\nchannel = "{channel}"\ncomponents = ["rust-src"]\n'
    repo = make_repo({"Cargo.toml": CARGO, "rust-toolchain.toml": toolchain})
    d = detect(repo, commit=CommitInfo("2023-05-01T10:00:00Z"))
    assert d.supported, d.reason
    recipe = make_recipe(repo, d)
    if installed is None:
        assert recipe.env["RUSTUP_TOOLCHAIN"] == "1.80.1" and "rustup" not in recipe.dockerfile
        return
    assert recipe.env["RUSTUP_TOOLCHAIN"] == installed
    lines = recipe.dockerfile.splitlines()
    install = next(i for i, ln in enumerate(lines) if ln.startswith("RUN rustup toolchain"))
    assert f"install {installed} --profile minimal --component rust-src" in " ".join(
        lines[install : install + 2]
    )
    assert install < lines.index("COPY repo/ /workspace/")


def test_rust_version_above_host(make_repo: MakeRepo) -> None:
    d = detect(make_repo({"Cargo.toml": CARGO + 'rust-version = "1.82"\n'}))
    assert not d.supported and "needs Rust 1.82 (rust-version)" in d.reason


def test_rust_without_lockfile_resolves_as_of_the_commit(
    make_repo: MakeRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rust, "reachable", lambda host, port=443, timeout=3.0: True)
    repo = make_repo({"Cargo.toml": CARGO + '\n[dependencies]\nitoa = "1"\n', "src/lib.rs": ""})
    date = "2023-05-01T10:00:00Z"
    d = detect(repo, commit=CommitInfo(date))
    recipe = make_recipe(repo, d)
    lines = recipe.dockerfile.splitlines()
    pin = next(i for i, ln in enumerate(lines) if "generate-lockfile" in ln)
    step = " ".join(ln.rstrip("\\ ") for ln in lines[pin : pin + 3])
    assert re.search(rf"--publish-time +{date} +\|\| +cargo generate-lockfile", step), step
    assert pin < next(i for i, ln in enumerate(lines) if ln == "RUN cargo fetch")
    with_lock = make_repo(
        {"Cargo.toml": CARGO + '\n[dependencies]\nitoa = "1"\n', "Cargo.lock": "", "src/lib.rs": ""}
    )
    assert (
        "generate-lockfile"
        not in make_recipe(with_lock, detect(with_lock, commit=CommitInfo(date))).dockerfile
    )


def test_rust_toolchain_missing(make_repo: MakeRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rust, "host_cargo", lambda: None)
    d = detect(make_repo({"Cargo.toml": CARGO}))
    assert not d.supported and "no cargo" in d.reason


GOMOD = "module example.com/demo\n\ngo 1.19\n"


def test_go_stdlib_only(make_repo: MakeRepo) -> None:
    repo = make_repo({"go.mod": GOMOD, "demo_test.go": "package demo\n"})
    d = detect(repo)
    assert (d.language, d.runner, d.base_image, d.supported) == ("go", "go", "golang:1.19", True)
    recipe = make_recipe(repo, d)
    assert recipe.test_command == f"{go.GO} test -json -count=1 -vet=off ./..."
    assert recipe.env["GOCACHE"] == go.GOCACHE
    assert recipe.env["GOPROXY"] == "off"
    assert recipe.test_command_for(["TestA/sub", "example.com/demo/x::TestB"]) == (
        f"{go.GO} test -json -count=1 -vet=off -run '^(TestA|TestB)$' ./..."
    )


def test_go_ci_tags_and_toolchain_line(make_repo: MakeRepo) -> None:
    workflow = (
        "jobs:\n  test:\n    steps:\n      - run: go test -race -tags=integration,slow ./...\n"
    )
    repo = make_repo(
        {
            "go.mod": GOMOD + "\ntoolchain go1.21.4\n",
            ".github/workflows/ci.yml": workflow,
        }
    )
    d = detect(repo)
    assert d.supported and d.native is not None and d.native.tags == "integration,slow"
    assert any("toolchain go1.21.4" in n and "GOTOOLCHAIN=local" in n for n in d.notes)
    recipe = make_recipe(repo, d)
    assert recipe.test_command == (
        f"{go.GO} test -json -count=1 -vet=off -tags=integration,slow ./..."
    )
    assert "RUN go test -vet=off -tags=integration,slow -count=1 -run '^$' ./..." in (
        recipe.dockerfile
    )


def test_go_modules_offline(make_repo: MakeRepo) -> None:
    gomod = GOMOD + "\nrequire (\n\tgithub.com/pkg/errors v0.9.1\n\texample.com/local v0.0.0\n)\n"
    gomod += "replace example.com/local => ./local\n"
    d = detect(make_repo({"go.mod": gomod}))
    assert not d.supported
    assert "module proxy" in d.reason and "github.com/pkg/errors" in d.reason
    assert d.native is not None and d.native.external == ["github.com/pkg/errors"]


def test_go_too_new_for_host(make_repo: MakeRepo) -> None:
    d = detect(make_repo({"go.mod": "module x\n\ngo 1.22\n"}))
    assert not d.supported and "needs Go 1.22" in d.reason


def test_go_toolchain_missing(make_repo: MakeRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(go, "host_go", lambda: None)
    d = detect(make_repo({"go.mod": GOMOD}))
    assert not d.supported and "no go toolchain" in d.reason


def test_language_priority(make_repo: MakeRepo) -> None:
    assert guess_language(make_repo({"package.json": "{}", "setup.py": ""}))[0] == "python"
    assert guess_language(make_repo({"package.json": "{}", "requirements.txt": ""}))[0] == "node"
    assert guess_language(make_repo({"Cargo.toml": "", "go.mod": ""}))[0] == "rust"
    assert guess_language(make_repo({"lib/x.py": ""}))[0] == "python"
    assert guess_language(make_repo({"README": ""}))[0] is None
    d = detect(make_repo({"README": ""}))
    assert not d.supported and "no Python, Node, Rust, Go, Java or C/C++" in d.reason


def test_forced_language(make_repo: MakeRepo) -> None:
    repo = make_repo({"package.json": pkg(scripts={"test": "mocha"}), "setup.py": ""})
    assert detect(repo, language="node").language == "node"
    assert not detect(repo, language="cobol").supported
