"""The verify gate's verdicts from oracle and nop outcomes (pure logic)."""

from __future__ import annotations

from repogym.run.gate import BROKEN, FLAKY, VERIFIED, judge
from repogym.run.models import TrialResult
from repogym.run.rewards import RewardReading
from repogym.run.trial import TrialOutcome


def outcome(reward: float | None, resolved: bool | None = None) -> TrialOutcome:
    details = None if resolved is None else {"resolved": resolved}
    reading = RewardReading(
        rewards=None if reward is None else {"reward": reward},
        reward=reward,
        error=None if reward is not None else "no reward",
        details=details,
    )
    exc = None if reward is not None else {"exception_type": "E", "exception_message": "no reward"}
    return TrialOutcome(record=TrialResult(exception_info=exc), reading=reading)


def test_verified() -> None:
    v = judge("t", [outcome(1.0, True)] * 3, outcome(0.0, False))
    assert v.status == VERIFIED and v.reasons == []


def test_flaky_when_reruns_disagree() -> None:
    v = judge("t", [outcome(1.0), outcome(0.5), outcome(1.0)], outcome(0.0))
    assert v.status == FLAKY and "disagree" in v.reasons[0]


def test_broken_when_oracle_fails_everywhere() -> None:
    assert judge("t", [outcome(0.0)] * 3, outcome(0.0)).status == BROKEN


def test_broken_when_nop_is_paid() -> None:
    v = judge("t", [outcome(1.0)] * 2, outcome(1.0))
    assert v.status == BROKEN and any("pays for nothing" in r for r in v.reasons)


def test_broken_when_resolved_false_or_no_reward() -> None:
    assert judge("t", [outcome(1.0, False)], outcome(0.0)).status == BROKEN
    assert judge("t", [outcome(None)], outcome(0.0)).status == BROKEN
    assert judge("t", [outcome(1.0)], outcome(None)).status == BROKEN
