"""The built-in agent loop's own cost, and many concurrent rollouts.

Run: ``.venv/bin/python benchmarks/agent_loop.py [--steps 200] [--rollouts 16]``.

1. **Per-step overhead** against a stub model on 127.0.0.1 that answers at once (the scripted
   tool calls cycle through bash, read_file, str_replace and write_file) on a real local-sandbox
   session of ``examples/tasks/textstats-word-count``. Each step's wall time is split into the
   model call (HTTP round trip to the stub and the SDK's request/response handling), the tool
   (the sandbox doing the work) and the loop's own share (the rest: building the request,
   reading the reply, truncation, the ATIF record). Target: loop < 20 ms per step.
2. **Concurrent rollouts**: ``--rollouts`` trials of the same task at once through
   ``run_job`` (``--jobs`` = ``--rollouts``), each solved by the scripted model; prints wall
   time, errors and rewards (every reward must be 1.0, no error).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._calibrate import python_loop_ms  # noqa: E402
from repogym.llm import LLM  # noqa: E402
from repogym.run.agent_tools import SessionWorkspace  # noqa: E402
from repogym.run.agents import AgentContext  # noqa: E402
from repogym.run.job import run_job  # noqa: E402
from repogym.run.llm_agent import LLMAgentOptions, run_loop  # noqa: E402
from repogym.run.trajectory import TrajectoryRecorder  # noqa: E402
from repogym.run.trial import TrialRunner, environment_spec  # noqa: E402
from repogym.sandbox import get_backend  # noqa: E402
from repogym.taskdir import load_task  # noqa: E402
from tests.llm.stub_servers import by_turn, openai_stub, openai_tools  # noqa: E402

TASK = ROOT / "examples" / "tasks" / "textstats-word-count"
BUGGY = '    if not text:\n        return 0\n    return len(text.split(" "))'
FIXED = "    return len(text.split())"


class Timed:
    """Wraps a callable and adds its wall time to a shared list."""

    def __init__(self, fn, sink: list[float]) -> None:  # type: ignore[no-untyped-def]
        self.fn, self.sink = fn, sink

    def __call__(self, *a, **k):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        try:
            return self.fn(*a, **k)
        finally:
            self.sink.append(time.perf_counter() - t0)


def per_step(steps: int) -> None:
    cycle = [
        openai_tools([("bash", {"command": "echo step"})]),
        openai_tools([("read_file", {"path": "textstats/counts.py"})]),
        openai_tools([("write_file", {"path": "notes.txt", "content": "x = 1\n"})]),
        openai_tools(
            [("str_replace", {"path": "notes.txt", "old_str": "x = 1", "new_str": "x = 2"})]
        ),
        openai_tools(
            [("str_replace", {"path": "notes.txt", "old_str": "x = 2", "new_str": "x = 1"})]
        ),
    ]
    script = [cycle[i % len(cycle)] for i in range(steps)]
    task = load_task(TASK)
    runner = TrialRunner(get_backend("local"))
    built = runner.build(task)
    spec = environment_spec(task)
    model_s: list[float] = []
    tool_s: list[float] = []
    with openai_stub(by_turn(*script)) as stub, runner.backend.start(built, spec) as session:
        ctx = AgentContext(
            workdir="/workspace", timeout_s=3600, user=None, network=False, instruction="bench"
        )
        ws = SessionWorkspace(session, ctx)
        for name in ("bash", "read_text", "write_text"):
            setattr(ws, name, Timed(getattr(ws, name), tool_s))
        llm = LLM("vllm/stub", endpoint=stub.base_url + "/v1")
        llm.tool_turn = Timed(llm.tool_turn, model_s)  # type: ignore[method-assign]
        recorder = TrajectoryRecorder(session_id="b", agent_name="bench", model_name="m", tools=[])
        t0 = time.perf_counter()
        result = run_loop(
            llm,
            ws,
            "bench",
            LLMAgentOptions(max_steps=steps, token_ids=False, logprobs=False),
            time_limit_s=3600,
            recorder=recorder,
            network=False,
        )
        wall = time.perf_counter() - t0
    n = result.model_calls
    model, tool = sum(model_s), sum(tool_s)
    loop = wall - model - tool
    print(f"per-step overhead over {n} steps ({result.stop_reason}):")
    print(f"  wall per step          {1000 * wall / n:7.2f} ms")
    p50 = 1000 * statistics.median(model_s)
    print(f"  model call (stub HTTP) {1000 * model / n:7.2f} ms  (p50 {p50:.2f})")
    print(f"  tool in the sandbox    {1000 * tool / n:7.2f} ms")
    print(f"  loop's own share       {1000 * loop / n:7.2f} ms  (target < 20 ms)")
    print(f"  loop + tool            {1000 * (loop + tool) / n:7.2f} ms")


def concurrent(rollouts: int) -> None:
    solve = by_turn(
        openai_tools([("bash", {"command": "cat textstats/counts.py"})]),
        openai_tools(
            [("str_replace", {"path": "textstats/counts.py", "old_str": BUGGY, "new_str": FIXED})]
        ),
        openai_tools([("bash", {"command": "python -m unittest -q tests.test_counts"})]),
        openai_tools([("finish", {"summary": "fixed"})]),
    )
    task = load_task(TASK)
    with openai_stub(solve) as stub, tempfile.TemporaryDirectory() as tmp:
        # build once outside the timing, as a warm cache would
        TrialRunner(get_backend("local")).build(task)
        t0 = time.perf_counter()
        outcomes, summary, _ = run_job(
            [task],
            "llm:vllm/stub",
            agent_options={"endpoint": stub.base_url + "/v1"},
            attempts=rollouts,
            jobs=rollouts,
            out_dir=Path(tmp) / "job",
        )
        wall = time.perf_counter() - t0
        calls = len(stub.requests)
    rewards = [o.reward for o in outcomes]
    print(
        f"{rollouts} concurrent rollouts: wall {wall:.1f} s, {calls} model calls, "
        f"errors {summary.errors}, rewards 1.0: {rewards.count(1.0)}/{len(rewards)}"
    )
    if summary.errors or rewards.count(1.0) != len(rewards):
        for o in outcomes:
            if o.error or o.reward != 1.0:
                print(f"  {o.result['trial_name']}: reward {o.reward} error {o.error}")
        raise SystemExit(1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--rollouts", type=int, default=16)
    args = ap.parse_args()
    print(f"python loop calibration: {python_loop_ms()} ms")
    per_step(args.steps)
    concurrent(args.rollouts)


if __name__ == "__main__":
    main()
