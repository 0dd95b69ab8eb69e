"""Running a task's verifier in a session and reading what it wrote.

A :class:`VerifierPhase` says how: the time limit, user, environment and network, and which
host folder to mount at ``/tests`` (None for a separate verifier, whose image holds its tests).
"""

from __future__ import annotations

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
    """Host folder mounted read-only at ``/tests``; None: the session already has them."""

    @classmethod
    def for_task(cls, task: Task) -> VerifierPhase:
        """The task's ``[verifier]`` in the agent's environment, ``tests/`` mounted."""
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
    """Run the verifier in a session: fresh /logs/verifier, /tests mounted (unless the phase
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
    if phase.tests is not None:
        # Mounted, not copied where the backend can: an agent that filled its disk cannot
        # keep the verifier's files out.
        session.mount(phase.tests, "/tests", read_only=True)
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
            session.unmount("/tests")  # the next step mounts its own
    stdout = res.stdout + (("\n--- stderr ---\n" + res.stderr) if res.stderr else "")
    reading = read_rewards(files)
    last_err = [line for line in res.stderr.splitlines() if line.strip()][-1:]
    if reading.error and last_err:
        reading.error += f" (verifier's last stderr line: {last_err[0].strip()[:200]})"
    if res.timed_out and reading.error:
        reading.error = f"verifier did not finish within {limit:g} s; " + reading.error
    return stdout, res.exit_code, reading
