"""Java (Maven) fixes found by the bootstrap survey of public Maven repositories: each test
rebuilds, in a fixture, the layout that made a real repository fail."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from repogym.bootstrap.native import java

from .test_java import JDKS

MakeRepo = Callable[..., Path]


@pytest.fixture(autouse=True)
def fake_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """JDKs 17 and 25 and a reachable Maven Central, whatever the host has (unit tests)."""
    import repogym.sandbox

    monkeypatch.setattr(repogym.sandbox, "host_jdks", lambda: dict(JDKS))
    monkeypatch.setattr(java, "reachable", lambda host, port=443, timeout=3.0: True)


def test_reason_when_the_failed_goal_line_was_cut_off() -> None:
    """A long list of compiler errors pushes Maven's ``Failed to execute goal`` line out of the
    output tail: the first compiler error is the reason, not a bare ``[ERROR]`` line."""
    from repogym.bootstrap.check import _reason_from

    tail = (
        "[ERROR] /workspace/src/main/java/org/x/io/file/Visitor.java:[86,20] cannot find symbol\n"
        "[ERROR]   symbol:   method asThis()\n"
        "[ERROR] /workspace/src/main/java/org/x/io/file/Visitor.java:[97,20] cannot find symbol\n"
        "[ERROR] -> [Help 1]\n"
        "[ERROR] \n"
        "[ERROR] To see the full stack trace of the errors, re-run Maven with the -e switch.\n"
    )
    assert _reason_from(tail, "x") == (
        "mvn: compilation failed: src/main/java/org/x/io/file/Visitor.java:[86,20] cannot find"
        " symbol"
    )


def test_survey_detail_keeps_the_reason_after_a_long_mvn_step() -> None:
    from repogym.bootstrap import survey

    step = "build: RUN /opt/maven/bin/mvn -B -ntp " + "-Dx.skip=true " * 40 + "(exit 1; line 12)"
    reason = "mvn compile failed on project p: src/main/java/A.java:[1,2] cannot find symbol"
    detail = survey.failure_detail(step, reason)
    assert detail.startswith("build: RUN /opt/maven/bin/mvn") and detail.endswith(reason)
    assert len(detail) <= survey.DETAIL_LIMIT
