"""Foreign C/C++ task images on the local sandbox: ``FROM gcc:<ver>`` and ``FROM ubuntu``/``debian``
with ``apt-get install build-essential cmake`` map onto the host base and its toolchain, and a
CMake + CTest project builds and runs its tests there (the apt step reaches Debian's archive)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from repogym.sandbox import EnvironmentSpec, _toolchains
from repogym.sandbox.local import LocalSandbox
from tests.sandbox.conftest import make_context

PROJECT = {
    "src/CMakeLists.txt": (
        "cmake_minimum_required(VERSION 3.16)\nproject(hello CXX)\nenable_testing()\n"
        "add_executable(hello hello.cpp)\nadd_test(NAME hello COMMAND hello)\n"
    ),
    "src/hello.cpp": '#include <iostream>\nint main() { std::cout << "hi\\n"; return 0; }\n',
}


@pytest.mark.parametrize(
    ("image", "install"),
    [
        ("gcc:13", "apt-get update && apt-get install -y --no-install-recommends cmake"),
        (
            "ubuntu:22.04",
            "apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y "
            "build-essential cmake",
        ),
        ("debian:bookworm-slim", "apt-get update && apt-get install -y g++ make cmake"),
    ],
)
@pytest.mark.skipif(
    not (shutil.which("cmake") and Path("/usr/bin/g++").exists()),
    reason="needs the host's g++ and cmake",
)
def test_cpp_images_build_a_cmake_project(
    sandbox: LocalSandbox, tmp_path: Path, image: str, install: str
) -> None:
    ctx = make_context(
        tmp_path / "ctx",
        f"""\
        FROM {image}
        RUN {install}
        WORKDIR /src
        COPY src/ /src/
        RUN cmake -S . -B build && cmake --build build
        """,
        PROJECT,
    )
    spec = EnvironmentSpec(context_dir=ctx, network_mode="no-network")
    built = sandbox.build(spec)
    assert built.base_mapping["from"] == image
    assert built.base_mapping["host"].startswith("host base")
    if image.startswith("gcc:"):
        have = _toolchains._tool_version(["/usr/bin/gcc", "-dumpfullversion"])
        assert built.base_mapping["host"].endswith(f"with GCC {have}")
        if not have.startswith("13."):
            assert "gcc:13 stands for GCC 13" in built.base_mapping["note"]
    with sandbox.start(built, spec) as session:
        run = session.exec("ctest --test-dir build", timeout_s=120, cwd="/src", network=False)
    assert run.exit_code == 0, run.stdout + run.stderr
    assert "100% tests passed, 0 tests failed out of 1" in run.stdout
