"""Rewards are forwarded, never synthesized: every malformed reward is None with an error."""

from __future__ import annotations

import pytest

from repogym.run.rewards import read_rewards


def reading(**files: bytes | None):
    names = {
        "reward_json": "reward.json",
        "reward_txt": "reward.txt",
        "details": "reward-details.json",
    }
    return read_rewards({names[k]: v for k, v in files.items()})


def test_reward_txt() -> None:
    r = reading(reward_txt=b"0.75\n")
    assert (r.reward, r.rewards, r.source, r.error) == (0.75, {"reward": 0.75}, "reward.txt", None)


def test_reward_json_wins_over_txt() -> None:
    r = reading(reward_json=b'{"reward": 0.5, "style": 1}', reward_txt=b"1.0")
    assert r.reward == 0.5 and r.rewards == {"reward": 0.5, "style": 1.0}
    assert r.source == "reward.json"


def test_single_named_value_is_primary() -> None:
    assert reading(reward_json=b'{"score": 0.25}').reward == 0.25


def test_several_unnamed_values_have_no_primary() -> None:
    # Harbor's metrics take a one-key dict or its 'reward' key; with neither there is no
    # single reward: None with an explicit error, every key kept.
    r = reading(reward_json=b'{"a": 1, "b": 0}')
    assert r.reward is None and r.rewards == {"a": 1.0, "b": 0.0}
    assert r.error and "none named 'reward'" in r.error and "a, b" in r.error


def test_step_rewards_mean_and_final() -> None:
    from repogym.run.rewards import step_rewards

    steps = [{"reward": 1.0, "lint": 1.0}, None, {"reward": 0.0}]
    mean, how = step_rewards(steps, None)
    assert mean == {"lint": 0.5, "reward": 0.5} and "2 of 3" in how
    assert step_rewards(steps, "final")[0] == {"reward": 0.0}
    assert step_rewards([{"a": 1.0}, None], "final")[0] is None
    assert step_rewards([None, None], "mean")[0] is None


@pytest.mark.parametrize(
    ("files", "fragment"),
    [
        ({}, "wrote no reward"),
        ({"reward_txt": b""}, "empty"),
        ({"reward_txt": b"  \n"}, "empty"),
        ({"reward_txt": b"nan"}, "non-finite"),
        ({"reward_txt": b"inf"}, "non-finite"),
        ({"reward_txt": b"passed"}, "does not hold a number"),
        ({"reward_txt": b"\xff\xfe"}, "not UTF-8"),
        ({"reward_json": b"{"}, "not valid JSON"),
        ({"reward_json": b"[1]"}, "JSON object"),
        ({"reward_json": b"{}"}, "JSON object"),
        ({"reward_json": b'{"reward": "1"}'}, "not a finite number"),
        ({"reward_json": b'{"reward": true}'}, "not a finite number"),
        ({"reward_json": b'{"reward": NaN}'}, "not a finite number"),
        ({"reward_json": b'{"reward": {"x": 1}}'}, "not a finite number"),
    ],
)
def test_bad_rewards_are_none_with_error(files: dict[str, bytes], fragment: str) -> None:
    r = reading(**files)
    assert r.reward is None and r.rewards is None
    assert r.error and fragment in r.error


def test_bad_json_does_not_fall_back_to_txt() -> None:
    # A verifier that wrote a broken reward.json has a bug: report it, never use another file.
    r = reading(reward_json=b"{oops", reward_txt=b"1")
    assert r.reward is None and r.error


def test_details_kept_and_parse_status_explained() -> None:
    r = reading(details=b'{"parse_status": "unparsed", "runner": "pytest"}')
    assert r.reward is None
    assert r.details == {"parse_status": "unparsed", "runner": "pytest"}
    assert "parse_status='unparsed'" in (r.error or "")
