"""What the MCP tests share: the answers of the bundled example task that no tool output may
hold, and a flattening of tool results to text."""

from __future__ import annotations

import json
from typing import Any

from tests.explorer.web_fixtures import EXAMPLES

TASK = "textstats-word-count"
TASK_DIR = EXAMPLES / TASK
WITHHELD_FILES = (
    "solution/patch.diff",
    "solution/solve.sh",
    "tests/files/tests/test_counts.py",
)
# by hand, so the test does not only trust the computed list below
KNOWN_SECRETS = (
    "+    return len(text.split())",
    "patch -p1 --forward --no-backup-if-mismatch",
    'word_count("  one   two\\tthree\\n"), 3)',
    'self.assertEqual(word_count("   "), 0)',
)


def secrets() -> list[str]:
    """Every line of the task's withheld files that no visible file of the examples holds."""
    hidden = {TASK_DIR / rel for rel in WITHHELD_FILES}
    visible = "\n".join(
        p.read_text(errors="replace")
        for p in EXAMPLES.rglob("*")
        if p.is_file() and p not in hidden
    )
    found = set(KNOWN_SECRETS)
    for rel in WITHHELD_FILES:
        for line in (TASK_DIR / rel).read_text().splitlines():
            if len(line.strip()) >= 12 and line.strip() not in visible:
                found.add(line.strip())
    return sorted(found)


def flatten(result: Any) -> str:
    """A tool result's text blocks and structured content as one string."""
    parts = [getattr(c, "text", "") for c in result.content]
    if result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


def assert_no_secret(text: str, where: str = "") -> None:
    for secret in secrets():
        assert secret not in text, f"withheld text {secret!r} leaked {where}"
