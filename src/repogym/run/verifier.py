"""Running a task's verifier in a session and reading what it wrote.

A :class:`VerifierPhase` says how: the time limit, user, environment and network, and which
host folder to copy to ``/tests`` (None for a separate verifier, whose image holds its tests).

An image may put files in ``/tests`` itself (reference data a Dockerfile copies or builds there).
Harbor copies the task's tests into that folder, so both are seen; repogym copies in a folder
holding the image's own ``/tests`` **as built** with the task's tests over it (same names: the
task's win). "As built" is read from a fresh session of the environment, never from the
agent's: what an agent planted in ``/tests`` does not reach the verifier.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repogym.run.rewards import RewardReading, read_rewards
from repogym.sandbox import SandboxError
from repogym.taskdir import Task
from repogym.taskdir.trust import expand_env

VERIFIER_LOGS = "/logs/verifier"
REWARD_FILES = ("reward.json", "reward.txt", "reward-details.json")


def phase_network(task: Task, phase: str) -> bool:
    """Whether a phase (``agent``/``verifier``) may use the network, per the task's config."""
    override = getattr(task.config, phase).network_mode
    mode = override or task.config.environment.network_mode
    if task.runs_offline:  # compose: `main` with network_mode none
        return False
    if mode == "allowlist":
        raise SandboxError(
            f"network_mode 'allowlist' ({phase} phase) is not supported by repogym's sandboxes yet"
        )
    return mode == "public"


@dataclass
class VerifierPhase:
    """How one verifier run goes."""

    timeout_s: float
    user: str | None
    env: dict[str, str] = field(default_factory=dict)
    network: bool = False
    tests: Path | None = None
    """Host folder copied to ``/tests``; None: the session already has them."""
    image_tests: Path | None = None
    """The image's own ``/tests`` as built (host copy), shown beneath ``tests``; None: none."""

    @classmethod
    def for_task(cls, task: Task) -> VerifierPhase:
        """The task's ``[verifier]`` in the agent's environment, ``tests/`` copied in."""
        v = task.config.verifier
        return cls(
            timeout_s=v.timeout_sec,
            user=v.user,
            # Host variables only when the user passed them (--pass-env); else nothing.
            env=expand_env(v.env, task.host_env)[0],
            network=phase_network(task, "verifier"),
            tests=task.tests_dir,
        )


def run_verifier(
    session: Any,
    task: Task,
    workdir: str,
    *,
    timeout_s: float | None = None,
    phase: VerifierPhase | None = None,
) -> tuple[str, int | None, RewardReading]:
    """Run the verifier in a session: fresh /logs/verifier, /tests copied in (unless the phase
    says the session has them), rewards read strictly. Returns (output, exit code, reading).
    Callers kill_all() first.

    ``timeout_s`` shortens the phase's own verifier timeout (never lengthens it)."""
    phase = phase or VerifierPhase.for_task(task)
    limit = phase.timeout_s if timeout_s is None else min(phase.timeout_s, timeout_s)
    # A fresh, empty /logs/verifier right before the verifier: nothing planted survives.
    session.exec(
        f"rm -rf {VERIFIER_LOGS} && mkdir -p {VERIFIER_LOGS} && chmod 777 {VERIFIER_LOGS}",
        timeout_s=60,
        user="root",
        network=False,
    )
    staged: Path | None = None
    if phase.tests is not None:
        shown = phase.tests
        if phase.image_tests is not None:
            staged = Path(tempfile.mkdtemp(prefix="repogym-tests-"))
            shown = stack_folders((phase.image_tests, phase.tests), staged / "tests")
        # Copied in, replacing whatever is there, as Harbor does: a verifier may write beside
        # its tests (a score file, a cache). A fresh copy each run, inside the session and its
        # storage limit; root-owned, so the tests' own user cannot change it. The docker
        # backend keeps /tests a read-only volume. An agent that filled its disk in place
        # leaves no room for the copy: the trial ends with that error, never a reward.
        session.upload(shown, "/tests")
    try:
        res = session.exec(
            ["bash", "/tests/test.sh"],
            timeout_s=limit,
            cwd=workdir,
            user=phase.user,
            env=phase.env,
            network=phase.network,
        )
        files: dict[str, bytes | None] = {}
        for name in REWARD_FILES:
            try:
                # Never through a link leading out of the folder: the files are the
                # verifier's, written there, not found elsewhere.
                files[name] = session.read(f"{VERIFIER_LOGS}/{name}", beneath=VERIFIER_LOGS)
            except OSError:
                files[name] = None
    finally:
        if phase.tests is not None and task.is_multi_step:
            session.remove("/tests")  # the next step gets its own
        if staged is not None:
            shutil.rmtree(staged, ignore_errors=True)
    stdout = res.stdout + (("\n--- stderr ---\n" + res.stderr) if res.stderr else "")
    reading = read_rewards(files)
    last_err = [line for line in res.stderr.splitlines() if line.strip()][-1:]
    if reading.error and last_err:
        reading.error += f" (verifier's last stderr line: {last_err[0].strip()[:200]})"
    if res.timed_out and reading.error:
        reading.error = f"verifier did not finish within {limit:g} s; " + reading.error
    return stdout, res.exit_code, reading


def stack_folders(sources: Iterable[Path], into: Path) -> Path:
    """Copy ``sources`` into the new folder ``into``, each over the ones before it (same
    names: the later one wins). Links are copied as links, never followed."""
    into.mkdir(parents=True)
    for source in sources:
        if source.is_dir():
            shutil.copytree(source, into, symlinks=True, dirs_exist_ok=True)
    return into


def copy_image_tests(session: Any, into: Path) -> Path | None:
    """The session's ``/tests`` copied to ``into`` when it is a folder with entries; None when
    there is none. Only call it on a session nobody has worked in yet (it is then as built)."""
    try:
        if not session.listdir("/tests"):
            return None
        session.download("/tests", into)
    except (OSError, SandboxError):
        return None
    return into if into.is_dir() and not into.is_symlink() else None


def image_tests(backend: Any, built: Any, spec: Any, agent: Any, into: Path) -> Path | None:
    """The image's own ``/tests`` as built, copied to ``into`` (None when it has none).

    The agent's session only says whether there may be any (an agent that emptied the folder
    loses the image's files, as it would on Harbor); the files come from a fresh session of
    ``built``, so nothing the agent wrote there is taken."""
    try:
        if not agent.listdir("/tests"):
            return None
    except (OSError, SandboxError):
        return None
    fresh = backend.start(built, spec)
    try:
        return copy_image_tests(fresh, into)
    finally:
        fresh.close()
