"""A blocking handle on one OpenEnv episode, for callers without an event loop (``repogym
rollout``'s agent loop): a :class:`~.client.RemoteEpisode` run on a private event loop thread,
with the same rules (the server's origin only, no redirects, size caps, one-line errors).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from repogym.openenv_client.client import (
    REPLY_TIMEOUT_S,
    OpenEnvClientError,
    Origin,
    RemoteEpisode,
)

__all__ = ["EpisodeClient", "StepResult"]


@dataclass(frozen=True)
class StepResult:
    """One answer of the server to ``reset`` or ``step``."""

    observation: dict[str, Any]
    reward: float | None
    done: bool


def _result(data: dict[str, Any]) -> StepResult:
    obs = data.get("observation")
    reward = data.get("reward")
    return StepResult(
        obs if isinstance(obs, dict) else {},
        reward if isinstance(reward, int | float) and not isinstance(reward, bool) else None,
        bool(data.get("done")),
    )


class EpisodeClient:
    """``with EpisodeClient(url) as env:`` — one WebSocket episode, opened on entry and closed
    on exit; :meth:`reset` and :meth:`step` block until the server answers."""

    def __init__(self, url: str, *, reply_timeout_s: float = REPLY_TIMEOUT_S) -> None:
        self.episode = RemoteEpisode(Origin.parse(url), reply_timeout_s=reply_timeout_s)
        self._stack = contextlib.ExitStack()
        self._portal: Any = None

    def __enter__(self) -> EpisodeClient:
        from anyio.from_thread import start_blocking_portal

        self._portal = self._stack.enter_context(start_blocking_portal())
        try:
            self._portal.call(self.episode.open)
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self._portal is not None:
                self._portal.call(self.episode.close)
        finally:
            self._portal = None
            self._stack.close()

    def _send(self, message: dict[str, Any]) -> StepResult:
        if self._portal is None:
            raise OpenEnvClientError("no episode: use the client in a with block")
        data: dict[str, Any] = self._portal.call(self.episode.request, message)
        return _result(data)

    def reset(self, **kwargs: Any) -> StepResult:
        """Start an episode (``task_id=…``, ``seed=…``, ``index=…``)."""
        return self._send({"type": "reset", "data": kwargs})

    def step(self, action: dict[str, Any]) -> StepResult:
        """Send one action."""
        return self._send({"type": "step", "data": action})
