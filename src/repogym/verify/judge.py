"""The diff LLM judge on the host: the same prompt and answer parsing as a ``pr_diff`` task's
verifier (both come from :mod:`repogym.shipped.diff_reward`), over :class:`repogym.llm.LLM`.

    from repogym.llm import LLM
    from repogym.shipped.diff_reward import score_diff
    from repogym.verify.judge import judge_diff

    j = judge_diff(predicted, gold, instruction, LLM("openai/gpt-4o-mini"))
    result = score_diff(predicted, gold, judge=j)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from repogym.errors import RepogymError
from repogym.shipped.diff_reward import judge_messages, parse_judge_score

if TYPE_CHECKING:
    from repogym.llm import LLM

__all__ = ["JudgeError", "judge_diff"]


class JudgeError(RepogymError, ValueError):
    """The judge answered, but with no usable score."""


def judge_diff(predicted: str, gold: str, instruction: str, llm: LLM) -> float:
    """Ask ``llm`` how well ``predicted`` matches ``gold`` for ``instruction``: a score in [0, 1].

    Raises :class:`repogym.llm.LLMError` when the call fails and :class:`JudgeError` when the
    answer holds no score in [0, 1].
    """
    reply = llm.chat(judge_messages(predicted, gold, instruction), max_tokens=300)
    try:
        return parse_judge_score(reply.text)
    except ValueError as exc:
        raise JudgeError(f"{llm.provider}/{llm.model}: {exc}") from None
