"""An interrupted run (Ctrl-C, or SIGTERM through the command line) does not wait for the
commands its work units are running in sandboxes: the executor closes the live sandboxes, the
units end at once, and sandboxes start again afterwards."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from repogym.executors import LocalExecutor, Work
from repogym.sandbox import BuiltEnvironment, EnvironmentSpec, SandboxError
from repogym.sandbox.local import LocalSandbox

pytestmark = pytest.mark.timeout(300)  # a run that waited for the command would take 600 s

Env = tuple[BuiltEnvironment, EnvironmentSpec]


def test_an_interrupt_closes_the_running_sandboxes(sandbox: LocalSandbox, py_env: Env) -> None:
    built, spec = py_env
    started = threading.Event()
    ended: list[str] = []

    def unit(_n: int) -> str:
        with sandbox.start(built, spec) as session:
            started.set()
            try:
                res = session.exec(["sleep", "600"], timeout_s=900)
                ended.append(f"exit {res.exit_code}")
            except Exception as exc:  # noqa: BLE001 - what the unit saw, for the assertion
                ended.append(type(exc).__name__)
            return "done"

    def interrupt_when_running() -> None:
        started.wait(120)
        time.sleep(1)
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C (the CLI turns SIGTERM into the same)

    # Ctrl-C as Python delivers it, whatever the suite was started from: a shell that starts a
    # job in the background ('cmd &') has it ignore SIGINT, and Python then installs no handler.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=interrupt_when_running, daemon=True).start()
        began = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            for _ in LocalExecutor(jobs=1).map([Work("a", unit, (1,))]):
                pass
        waited = time.monotonic() - began
    finally:
        signal.signal(signal.SIGINT, previous)
    assert ended, "the unit was still running when map returned"
    assert ended[0] != "exit 0", ended  # the sleep did not run to its end
    assert waited < 300, waited

    # Afterwards sandboxes start again (the interruption is over).
    with sandbox.start(built, spec) as session:
        assert session.exec(["true"]).exit_code == 0


def test_no_sandbox_starts_while_interrupted(sandbox: LocalSandbox, py_env: Env) -> None:
    from repogym.sandbox import interrupt_sandboxes, resume_sandboxes

    built, spec = py_env
    interrupt_sandboxes()
    try:
        with pytest.raises(SandboxError, match="interrupted"), sandbox.start(built, spec):
            pass
    finally:
        resume_sandboxes()
    with sandbox.start(built, spec) as session:
        assert session.exec(["true"]).exit_code == 0


def test_a_command_read_ends_when_its_sandbox_closes_even_if_its_pipes_stay_open() -> None:
    """Whatever still holds a command's pipes (a process the close could not reach, or a
    request that crossed the close), the reader leaves once the sandbox is closed."""
    from repogym.sandbox._runtime import _ExecPipes

    fds = [os.pipe() for _ in range(3)]
    closed = threading.Event()
    try:
        os.write(fds[0][1], b"partial output")
        run = _ExecPipes(fds[0][0], fds[1][0], fds[2][0], 1 << 20, None)
        threading.Timer(0.3, closed.set).start()
        reader = threading.Thread(target=run.pump, args=(None, lambda: None, closed.is_set))
        reader.start()
        reader.join(60)
        assert not reader.is_alive(), "the reader waited for pipes a closed sandbox still held"
        assert run.status is None  # no status came: the caller reports the session ended
        assert bytes(run.out) == b"partial output"
    finally:
        for r, w in fds:
            os.close(r)
            os.close(w)
