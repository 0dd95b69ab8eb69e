"""Reading what a verifier wrote: rewards are forwarded, never synthesized.

``reward.json`` (a flat object of name → finite number) wins over ``reward.txt`` (one float).
A missing, empty, non-finite or unparseable reward yields ``None`` and an error message — never a
made-up 0.0 or 1.0.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RewardReading:
    rewards: dict[str, float] | None
    """All named rewards, or None when the verifier produced no usable reward."""
    reward: float | None
    """The primary reward: ``reward`` when named so, else the only value; None otherwise
    (then ``error`` says why, and ``rewards`` still holds every key)."""
    source: str | None = None
    """Which file the rewards came from (``reward.json`` / ``reward.txt``)."""
    error: str | None = None
    details: dict[str, Any] | None = None
    """``reward-details.json`` when present and a JSON object."""
    warnings: list[str] = field(default_factory=list)


def _finite_number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def parse_reward_json(data: bytes) -> tuple[dict[str, float] | None, str | None]:
    """(rewards, error) from the bytes of ``reward.json``."""
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"reward.json is not valid JSON ({exc})"
    if not isinstance(obj, dict) or not obj:
        return None, "reward.json must be a non-empty JSON object of name → number"
    out: dict[str, float] = {}
    for key, value in obj.items():
        number = _finite_number(value)
        if number is None:
            return None, f"reward.json: {key!r} is not a finite number ({value!r})"
        out[str(key)] = number
    return out, None


def parse_reward_txt(data: bytes) -> tuple[float | None, str | None]:
    """(reward, error) from the bytes of ``reward.txt``."""
    try:
        text = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        return None, "reward.txt is not UTF-8 text"
    if not text:
        return None, "reward.txt is empty"
    try:
        value = float(text)
    except ValueError:
        shown = text if len(text) <= 40 else text[:37] + "..."
        return None, f"reward.txt does not hold a number ({shown!r})"
    if not math.isfinite(value):
        return None, f"reward.txt holds a non-finite number ({text})"
    return value, None


def primary_reward(
    rewards: dict[str, float], where: str = "reward.json"
) -> tuple[float | None, str | None]:
    """The trial's one reward from named rewards, as Harbor's metrics take it: the ``reward``
    key, else the only value. Several keys and none named ``reward``: no single reward (Harbor's
    mean/min/max/sum refuse such a dict), so (None, why); every key stays in the result."""
    if "reward" in rewards:
        return rewards["reward"], None
    if len(rewards) == 1:
        return next(iter(rewards.values())), None
    keys = ", ".join(sorted(rewards)[:6]) + (", …" if len(rewards) > 6 else "")
    return None, (
        f"{where} has {len(rewards)} keys ({keys}) and none named 'reward': no single trial "
        "reward (Harbor's metrics take a one-key dict or its 'reward' key); all keys are kept "
        "in verifier_result.rewards"
    )


def read_rewards(files: dict[str, bytes | None]) -> RewardReading:
    """Decide the trial's reward from the verifier's files (name → bytes, None when absent)."""
    details = None
    warnings: list[str] = []
    raw_details = files.get("reward-details.json")
    if raw_details is not None:
        try:
            parsed = json.loads(raw_details.decode("utf-8"))
            details = parsed if isinstance(parsed, dict) else {"value": parsed}
        except (UnicodeDecodeError, json.JSONDecodeError):
            warnings.append("reward-details.json is not valid JSON (ignored)")
    raw_json, raw_txt = files.get("reward.json"), files.get("reward.txt")
    if raw_json is not None:
        rewards, error = parse_reward_json(raw_json)
        if error:
            return RewardReading(None, None, "reward.json", error, details, warnings)
        assert rewards is not None
        primary, error = primary_reward(rewards, "reward.json")
        return RewardReading(rewards, primary, "reward.json", error, details, warnings)
    if raw_txt is not None:
        value, error = parse_reward_txt(raw_txt)
        if error:
            return RewardReading(None, None, "reward.txt", error, details, warnings)
        return RewardReading({"reward": value}, value, "reward.txt", None, details, warnings)  # type: ignore[dict-item]
    why = "the verifier wrote no reward (neither reward.json nor reward.txt)"
    if details and details.get("parse_status") not in (None, "ok"):
        why += f"; reward-details.json says parse_status={details.get('parse_status')!r}"
    return RewardReading(None, None, None, why, details, warnings)


def step_rewards(
    steps: list[dict[str, float] | None], strategy: str | None
) -> tuple[dict[str, float] | None, str]:
    """A multi-step trial's rewards from its steps' (None: the step's verifier gave none),
    as Harbor rolls them up: ``final`` takes the last step run as it is; ``mean`` (the default)
    takes each key's mean over the steps that have rewards, a key a step lacks counting 0.
    Returns (rewards, how they were made)."""
    if strategy == "final":
        return (steps[-1] if steps else None), "final: the last step's rewards"
    valid = [r for r in steps if r is not None]
    keys = sorted({k for r in valid for k in r})
    if not keys:
        return None, "mean: no step produced rewards"
    mean = {k: math.fsum(r.get(k, 0.0) for r in valid) / len(valid) for k in keys}
    return mean, f"mean over {len(valid)} of {len(steps)} step(s) with rewards"
