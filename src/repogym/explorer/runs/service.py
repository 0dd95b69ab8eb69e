"""Rollouts started from the explorer: limits, the trial on the local sandbox, live events.

:class:`RunService` checks a :class:`~repogym.explorer.runs.requests.RunRequest` against the
operator's :class:`RunLimits`, finds the task among the folders the explorer may run
(:class:`~repogym.explorer.runs.locate.TaskLocator`) and runs it with the same trial code as
``repogym run`` (:class:`repogym.run.trial.TrialRunner`: clean-room verification included) in a
thread pool of ``max_concurrent`` workers. Each event of the trial (phases, the agent's model and
tool calls with their output, the verifier's output, the reward) is masked
(:class:`~repogym.explorer.runs.mask.AnswerMask`), numbered and handed to whoever follows the run
(:class:`LiveRun`, read by the SSE route); when the run ends, the record and its timeline go to
the :class:`~repogym.explorer.runs.store.RunStore`.

Who may see what: the visitor who started a run sees it from the start (events included); other
visitors see a run only when it has finished with a reward the verifier wrote, and only when the
operator's ``visibility`` is ``public``. No page or answer says who started a run.

Secrets: a visitor's API key lives in the request object handed to the worker and in the agent's
HTTP client, for the run only; it is not stored, logged or put in an event (the built-in agent
never gives it to the sandbox).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import hashlib
import ipaddress
import logging
import os
import secrets
import shutil
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from repogym.explorer.runs.locate import Located, TaskLocator
from repogym.explorer.runs.mask import AnswerMask
from repogym.explorer.runs.requests import RunRequest, check_endpoint
from repogym.explorer.runs.store import FINAL, RunRecord, RunStore

__all__ = ["LiveRun", "RunLimits", "RunRefused", "RunService"]

log = logging.getLogger("repogym.explorer.runs")

MAX_EVENT_TEXT = 20_000
"""Characters of one event's text kept (head and tail)."""
ADDRESS_FACTOR = 4
"""Runs per hour from one network address, in visitors' allowances."""
ORACLE_OUTPUT = "(the oracle's output is not shown: it may hold the answer)"
MAX_EVENTS = 2_000
"""Events kept per run; later ones are counted, not kept."""


@dataclass
class RunLimits:
    """What the operator allows (``repogym explore --runs…`` options)."""

    enabled: bool = True
    max_concurrent: int = 2
    max_queued: int = 8
    per_visitor_per_hour: int = 20
    time_limit_s: float = 900.0
    """Cap of a run's agent phase (the task's own timeout when lower)."""
    budget_usd: float = 1.0
    """Cap of an LLM run's cost (for priced models)."""
    max_steps: int = 50
    """Cap of an LLM run's model calls."""
    allow_command: bool = False
    allow_llm: bool = True
    allow_internal_endpoints: bool = False
    """Whether visitors' model endpoints may be addresses of the explorer's own network."""
    visibility: Literal["public", "owner"] = "public"
    """``public``: finished graded runs are listed to every visitor; ``owner``: to their
    starter only."""

    def agents(self) -> list[str]:
        out = ["oracle", "nop"]
        if self.allow_command:
            out.append("command")
        if self.allow_llm:
            out.append("llm")
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "enabled": self.enabled,
            "agents": self.agents(),
            "max_concurrent": self.max_concurrent,
            "per_visitor_per_hour": self.per_visitor_per_hour,
            "time_limit_s": self.time_limit_s,
            "budget_usd": self.budget_usd,
            "max_steps": self.max_steps,
            "visibility": self.visibility,
        }


def plan_refusal(task_dir: Path, backend: str) -> str | None:
    """Why the task's run plan refuses ``backend`` (:func:`repogym.run.plan.plan_task`: its
    reproducibility mode asks for what the backend cannot do), or None; a task that cannot be
    read is left to the trial to report."""
    from repogym.run.plan import plan_task
    from repogym.taskdir import TaskError, load_task

    try:
        return plan_task(load_task(task_dir), backend).refusal
    except (TaskError, OSError, ValueError):
        return None


class RunRefused(Exception):
    """A run that may not start: an HTTP status and one line for the visitor."""

    def __init__(self, status: int, message: str, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.retry_after = retry_after


def _clip(text: str, limit: int = MAX_EVENT_TEXT) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n… {len(text) - limit} characters left out …\n{text[-half:]}"


def _clip_data(value: Any, depth: int = 0) -> Any:
    if isinstance(value, str):
        return _clip(value)
    if depth > 8:
        return None
    if isinstance(value, dict):
        return {str(k): _clip_data(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clip_data(v, depth + 1) for v in value[:200]]
    if isinstance(value, float | int | bool) or value is None:
        return value
    return str(value)


def _loopback(client: str) -> bool:
    try:
        return not client or ipaddress.ip_address(client).is_loopback
    except ValueError:
        return False


class RunStopped(Exception):
    """A rollout ended on request (the message says why)."""


class LiveRun:
    """A run in progress: its record, its events so far, and the SSE readers waiting."""

    def __init__(self, record: RunRecord, mask: AnswerMask) -> None:
        self.record = record
        self.mask = mask
        self.events: list[dict[str, Any]] = []
        self.dropped = 0
        self.done = False
        self._lock = threading.Lock()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self._t0 = time.time()

    def emit(self, kind: str, data: dict[str, Any]) -> None:
        """Add one event (masked, clipped) and wake the readers."""
        if kind == "agent_output" and self.record.agent == "oracle" and data.get("text"):
            data = dict(data, text=ORACLE_OUTPUT)  # the reference solution's own words
        safe = self.mask.data(_clip_data(data))
        with self._lock:
            if len(self.events) >= MAX_EVENTS and kind not in ("reward", "status", "error"):
                self.dropped += 1
                return
            seq = len(self.events) + 1
            self.events.append({"seq": seq, "t": round(time.time(), 3), "kind": kind, "data": safe})
            waiters, self._waiters = self._waiters, []
        for loop, ev in waiters:
            loop.call_soon_threadsafe(ev.set)

    def finish(self) -> None:
        with self._lock:
            self.done = True
            waiters, self._waiters = self._waiters, []
        for loop, ev in waiters:
            loop.call_soon_threadsafe(ev.set)

    def since(self, seq: int) -> tuple[list[dict[str, Any]], bool]:
        """Events after ``seq`` and whether the run has ended."""
        with self._lock:
            return self.events[seq:], self.done

    async def wait(self, seq: int, timeout: float) -> None:
        """Return when there is an event after ``seq``, the run ended, or ``timeout`` passed."""
        loop = asyncio.get_running_loop()
        ev = asyncio.Event()
        with self._lock:
            if len(self.events) > seq or self.done:
                return
            self._waiters.append((loop, ev))
        try:
            await asyncio.wait_for(ev.wait(), timeout)
        except TimeoutError:
            with self._lock:
                if (loop, ev) in self._waiters:
                    self._waiters.remove((loop, ev))


@dataclass
class _Work:
    live: LiveRun
    request: RunRequest
    located: Located
    client: str
    cleanup: list[Path] = field(default_factory=list)


class RunService:
    """Starts, runs, follows and lists the explorer's rollouts."""

    def __init__(
        self,
        store: Any,
        locator: TaskLocator,
        folder: Path,
        limits: RunLimits | None = None,
        *,
        sandbox: str = "local",
    ) -> None:
        self.docs = store
        self.locator = locator
        self.limits = limits or RunLimits()
        self.records = RunStore(folder)
        self.folder = folder
        self.sandbox = sandbox
        salt_file = folder / "visitor-salt"
        if not salt_file.is_file():
            fd = os.open(salt_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(secrets.token_hex(32))
        self._salt = salt_file.read_text().strip().encode()
        self._live: dict[str, LiveRun] = {}
        self._stops: dict[str, str] = {}  # run id -> why it was asked to stop
        self._lock = threading.Lock()
        self._build_locks: dict[str, threading.Lock] = collections.defaultdict(threading.Lock)
        self._by_client: dict[str, collections.deque[float]] = {}
        self._pool = ThreadPoolExecutor(
            max_workers=max(1, self.limits.max_concurrent), thread_name_prefix="explorer-run"
        )
        self._runner: Any = None

    # -- identity

    def owner_of(self, visitor_token: str | None) -> str:
        """The salted hash a visitor's runs are stored under ("" for no token)."""
        if not visitor_token:
            return ""
        return hashlib.sha256(self._salt + visitor_token.encode("utf-8", "replace")).hexdigest()

    # -- starting

    @property
    def enabled(self) -> bool:
        return self.limits.enabled and self.locator.enabled

    def why_disabled(self) -> str | None:
        if not self.limits.enabled:
            return "runs are turned off on this explorer"
        if not self.locator.enabled:
            return "this explorer has no task folders it may run"
        return None

    def start(self, req: RunRequest, owner: str, client: str = "") -> RunRecord:
        """Queue a run; raises :class:`RunRefused` with the reason it may not start."""
        why = self.why_disabled()
        if why:
            raise RunRefused(503, why)
        if not owner:
            raise RunRefused(403, "no visitor session: load the task page first")
        if req.agent not in self.limits.agents():
            raise RunRefused(403, f"the {req.agent} agent is not enabled on this explorer")
        if req.agent == "llm":
            assert req.endpoint is not None
            problem = check_endpoint(
                req.endpoint, allow_internal=self.limits.allow_internal_endpoints
            )
            if problem:
                raise RunRefused(400, problem)
        doc = self.docs.task(req.env, req.task)
        if doc is None:
            raise RunRefused(404, "no such task")
        if not doc.get("sections") and not doc.get("files"):  # listed, not indexed yet
            raise RunRefused(503, "the explorer is still indexing this task: try again soon", 5)
        if not doc.get("runnable"):
            raise RunRefused(409, f"this task cannot run on the {self.sandbox} sandbox")
        located = self.locator.locate(req.env, req.task)
        if located is None:
            raise RunRefused(404, "this explorer may not run this task (not in its task folders)")
        aliases = [a for a in doc.get("aliases") or [] if str(a).startswith("sha256:")]
        if aliases and located.key not in aliases:
            raise RunRefused(409, "the task changed since it was indexed: reload the page")
        refusal = plan_refusal(located.path, self.sandbox)
        if refusal:
            raise RunRefused(409, refusal)
        now = time.time()
        hour = self.limits.per_visitor_per_hour
        with self._lock:
            if self.records.count_since(owner, now - 3600) >= hour:
                raise RunRefused(429, f"at most {hour} runs per hour per visitor", 600)
            # New cookies do not make a new visitor: one address gets a few visitors' worth.
            # Loopback is exempt (a local user, or a reverse proxy in front of everyone).
            recent = self._by_client.setdefault(client, collections.deque())
            while recent and recent[0] < now - 3600:
                recent.popleft()
            per_address = hour * ADDRESS_FACTOR
            if not _loopback(client) and len(recent) >= per_address:
                raise RunRefused(429, f"at most {per_address} runs per hour from one address", 600)
            for run_id in [k for k, r in self._live.items() if r.done]:
                del self._live[run_id]  # ended: the store has its record and timeline
            active = len(self._live)
            if active >= self.limits.max_concurrent + self.limits.max_queued:
                raise RunRefused(429, "the explorer is busy with other runs: try again soon", 30)
            rec = RunRecord(
                id=secrets.token_hex(8),
                key=located.key,
                env=req.env,
                task=req.task,
                agent=req.agent_label(),
                status="queued",
                owner=owner,
                created=now,
            )
            self.records.add(rec)
            self.records.remember_key(req.env, req.task, located.key)
            live = LiveRun(rec, AnswerMask.for_task(located.path))
            self._live[rec.id] = live
            recent.append(now)
        live.emit("status", {"status": "queued"})
        self._pool.submit(self._run, _Work(live, req, located, client))
        return rec

    # -- running

    def _trial_runner(self) -> Any:
        if self._runner is None:
            from repogym.run.trial import TrialRunner
            from repogym.sandbox import get_backend

            self._runner = TrialRunner(get_backend(self.sandbox))
        return self._runner

    def _agent(self, req: RunRequest) -> Any:
        from repogym.run.agents import make_agent

        if req.agent == "llm":
            assert req.endpoint is not None
            problem = check_endpoint(
                req.endpoint, allow_internal=self.limits.allow_internal_endpoints
            )
            if problem:  # checked again: the name may resolve elsewhere now
                raise ValueError(problem)
            opts = {
                "endpoint": req.endpoint,
                "max_steps": str(
                    min(req.max_steps or self.limits.max_steps, self.limits.max_steps)
                ),
                "max_cost_usd": str(self.limits.budget_usd),
                "time_limit_s": str(self.limits.time_limit_s),
            }
            if req.api_key:
                opts["api_key"] = req.api_key
            return make_agent(f"llm:{req.provider}/{req.model}", opts)
        if req.agent == "command":
            return make_agent(f"command:{req.command}")
        return make_agent(req.agent)

    def _run(self, work: _Work) -> None:
        live, rec = work.live, work.live.record
        out = Path(tempfile.mkdtemp(prefix="repogym-explorer-run-"))
        try:
            rec.status, rec.started = "running", time.time()
            self.records.started(rec.id, rec.started)
            live.emit("status", {"status": "running"})
            from repogym.taskdir.task import load_task

            task = load_task(work.located.path)
            agent = self._agent(work.request)
            runner = self._trial_runner()
            self._raise_if_stopped(rec.id)
            # one build per task; a failed build is reported by the trial itself
            with self._build_locks[str(work.located.path)], contextlib.suppress(Exception):
                runner.build(task, log=out / "build.log")
            outcome = runner.run(
                task,
                agent,
                out_dir=out / "trial",
                trial_name=rec.id,
                agent_timeout_s=self.limits.time_limit_s,
                on_event=functools.partial(self._emit_unless_stopped, live),
            )
            self._raise_if_stopped(rec.id)
            vr, ar = outcome.record.verifier_result, outcome.record.agent_result
            rec.reward = outcome.reward
            rec.rewards = vr.rewards if vr else None
            rec.details = live.mask.data(vr.details if vr else None)
            rec.error = live.mask.text(outcome.error) if outcome.error else None
            rec.usage = ar.usage.to_json() if ar and ar.usage else None
            rec.status = "done" if outcome.reward is not None else "error"
        except Exception as exc:  # noqa: BLE001 - a run that cannot start ends as an error
            rec.status, rec.error = "error", live.mask.text(str(exc).splitlines()[0][:500])
            live.emit("error", {"kind": type(exc).__name__, "text": rec.error})
        finally:
            work.request = None  # type: ignore[assignment]  # drop the visitor's key now
            rec.finished = time.time()
            live.emit("status", {"status": rec.status})
            try:
                self.records.finish(rec, live.events)
            except Exception as exc:  # noqa: BLE001
                log.warning("run %s: could not store its record: %s", rec.id, exc)
            live.finish()
            with self._lock:
                self._stops.pop(rec.id, None)
            shutil.rmtree(out, ignore_errors=True)

    def stop(self, run_id: str, reason: str) -> bool:
        """Ask a queued or running rollout to end: its sandbox is closed (its agent and
        verifier die with it) and it is recorded as an error saying ``reason``. False when
        the run is not in progress in this process."""
        live = self.live(run_id)
        if live is None or live.done:
            return False
        with self._lock:
            first = run_id not in self._stops
            self._stops[run_id] = reason
        if first:
            live.emit("status", {"status": "stopping", "reason": reason})
        if self._runner is not None:
            self._runner.stop_trial(run_id)
        return True

    def _emit_unless_stopped(self, live: LiveRun, kind: str, data: dict[str, Any]) -> None:
        """The trial's event sink: ends the trial (by raising) once a stop was asked."""
        self._raise_if_stopped(live.record.id)
        live.emit(kind, data)

    def _raise_if_stopped(self, run_id: str) -> None:
        with self._lock:
            reason = self._stops.get(run_id)
        if reason is not None:
            raise RunStopped(reason)

    # -- reading

    def live(self, run_id: str) -> LiveRun | None:
        with self._lock:
            return self._live.get(run_id)

    def visible(self, rec: RunRecord, owner: str) -> bool:
        """Whether the visitor ``owner`` may see ``rec``."""
        if owner and rec.owner == owner:
            return True
        if self.limits.visibility != "public" or rec.status not in FINAL or not rec.graded:
            return False
        # A private dataset's runs stay with whoever started them.
        env = self.docs.env(rec.env)
        return env is not None and not env.get("private")

    def get(self, run_id: str, owner: str, *, events: bool = False) -> RunRecord | None:
        """The run as the visitor may see it (None: absent or not theirs to see)."""
        live = self.live(run_id)
        if live is not None and not live.done:
            rec = live.record
            if not self.visible(rec, owner):
                return None
            if events:
                rec.events = live.since(0)[0]
            return rec
        stored = self.records.get(run_id, events=events)
        if stored is None or not self.visible(stored, owner):
            return None
        return stored

    def for_task(self, env: str, task: str, owner: str) -> list[RunRecord]:
        """Runs of the task (every dataset holding the same task), as the visitor may see."""
        located = self.locator.locate(env, task)
        if located is not None:
            self.records.remember_key(env, task, located.key)
            found = self.records.for_task(located.key)
        else:
            found = [r for r in self.records.for_env(env) if r.task == task]
        return [self._fresh(r) for r in found if self.visible(r, owner)]

    def for_env(self, env: str, owner: str) -> list[RunRecord]:
        return [self._fresh(r) for r in self.records.for_env(env) if self.visible(r, owner)]

    def for_ids(self, ids: list[str], owner: str) -> list[RunRecord]:
        out = []
        for run_id in ids:
            rec = self.get(run_id, owner, events=True)
            if rec is not None:
                out.append(rec)
        return out

    def _fresh(self, rec: RunRecord) -> RunRecord:
        live = self.live(rec.id)
        return live.record if live is not None and not live.done else rec

    def active(self) -> int:
        with self._lock:
            return sum(1 for r in self._live.values() if not r.done)

    def close(self) -> None:
        """Cancel queued runs, let running ones end, close the store."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        self.records.close()
