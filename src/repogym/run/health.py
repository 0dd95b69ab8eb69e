"""Healthchecks with Docker's rules, for compose services, ``[environment.healthcheck]`` (run
after the environment starts, before the agent) and ``[steps.healthcheck]`` (after a step's
``setup.sh``, before its agent).

A check runs until it passes; failures during ``start_period`` do not count (checks then come
every ``start_interval``), ``retries`` failures in a row after it fail the check. The first
check runs at once rather than one interval after the start.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from repogym.errors import RepogymError
from repogym.sandbox import Session
from repogym.taskdir.compose import Healthcheck, task_healthcheck

__all__ = ["HealthcheckError", "task_healthcheck", "wait_healthy"]


class HealthcheckError(RepogymError):
    """A healthcheck that never passed; the message is one line."""


def wait_healthy(
    session: Session,
    check: Healthcheck,
    *,
    label: str,
    started: float | None = None,
    user: str | None = None,
    gone: Callable[[], str | None] | None = None,
) -> float:
    """Run ``check`` in ``session`` until it passes; returns the seconds since ``started``
    (default: now). ``gone`` tells why the checked process can no longer become healthy
    (e.g. it exited), or None. Raises :class:`HealthcheckError`."""
    start = time.monotonic() if started is None else started
    failures = 0
    while True:
        why_gone = gone() if gone is not None else None
        if why_gone:
            raise HealthcheckError(f"{label} {why_gone} before it became healthy")
        res = session.exec(check.argv(), timeout_s=check.timeout_s or None, user=user)
        if res.exit_code == 0:
            return time.monotonic() - start
        grace = time.monotonic() - start < check.start_period_s
        failures += 0 if grace else 1
        why = "timed out" if res.timed_out else f"exit {res.exit_code}"
        text = " ".join((res.stderr or res.stdout).split())[:120] or "no output"
        if failures >= check.retries:
            raise HealthcheckError(
                f"{label} never became healthy: its healthcheck failed {failures} times in a"
                f" row ({why}: {text})"
            )
        time.sleep(check.start_interval_s if grace else check.interval_s)
