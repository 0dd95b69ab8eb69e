"""``equivalence_tests``: re-implement a function, graded by differential testing against the
original (no LLM, no test of the repository's own).

A module-level function of the revision that the test suite calls has its body replaced by its
docstring and ``raise NotImplementedError`` (:func:`._synthesis.ops.stub_function`); the agent must
write an implementation that behaves like the original — the **reference** — on every input.

Inputs, per function: the distinct argument tuples the suite itself passed while it ran
(``shipped/scripts/equiv_record.py``, one recorded run of the suite for the whole revision: plain
builtins only, pickle round trip) and, when every required parameter has a builtin type hint,
``hypothesis_examples`` more drawn on the host with hypothesis (``st.from_type``, fixed seed).
The reference runs on every input twice, in the shared build, through the task's own verifier
(``tests/test.sh --expect``): inputs whose outcome differs between the runs, that time out, take
more than a quarter of ``call_timeout``, return something that is not plain builtins, or raise
``NotImplementedError`` are dropped; so are exception cases beyond ``max_error_share``. Up to
``examples`` recorded calls become examples in the instruction and are *not* graded; the rest
(at most ``max_inputs``) are the hidden inputs. Fewer than ``min_inputs`` left, or the same
outcome for all of them, drops the function.

The verifier (``tests/verifier.py`` from ``shipped/scripts/equiv_verifier.py``, behind the runtime
``test.sh`` and its build-time integrity record) runs the agent's function in isolated child
processes and pays the share of inputs whose outcome matches; the task is verified in a clean
room. The reference exists only on the verifier side (``tests/expected.pkl``, ``tests/cases.json``,
``tests/reference.py``) and in ``solution/`` (the gold patch restores the body).
"""

from __future__ import annotations

import base64
import hashlib
import json
import pickle
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from repogym import __version__, shipped
from repogym.bootstrap import Recipe
from repogym.pipelines._harness.emit import (
    change_hash,
    difficulty,
    provenance,
    write_file,
)
from repogym.pipelines._harness.frame import RunFailed, TaskHarness
from repogym.pipelines._synthesis.equiv import (
    RECORD_TEMPLATE,
    VERIFIER_TEMPLATE,
    Target,
    draw_inputs,
    equivalence_targets,
    import_root,
    recorded_types,
    verifier_module,
)
from repogym.pipelines._synthesis.harness import (
    WORKDIR,
    Baseline,
    SharedBaseline,
    SynthEdit,
    SynthPipeline,
    edited_context,
    round_robin,
    run_wrapped_suite,
    synth_candidate,
    synth_sources,
)
from repogym.pipelines._synthesis.ops import TRACE_SCRIPT, stub_function
from repogym.pipelines.base import Candidate, HarnessContext, Outcome
from repogym.sandbox import BuiltEnvironment, EnvironmentSpec, SandboxError
from repogym.sources import Source
from repogym.spec import EquivalenceOptions
from repogym.taskdir import save_task_config
from repogym.taskdir.config import (
    AgentConfig,
    EnvironmentConfig,
    SolutionConfig,
    VerifierConfig,
    new_task_config,
)
from repogym.taskdir.verification import RUNTIME_PROTECTED

TOOLS_DIR = "/tmp/repogym-equiv"
RECORD_OUT = "/tmp/repogym-equiv-calls.json"
EXPECT_OUT = "/tmp/repogym-equiv-expect.json"
REFERENCE_SHARE = 0.25
"""The reference must answer each input within this share of ``call_timeout``."""

NOT_CALLED = "function not called by the tests"
NOT_DETERMINISTIC = "not deterministic"
TOO_FEW = "too few inputs"
CONSTANT = "constant output"
NOT_SERIALISABLE = "arguments not serialisable"
RESULT_NOT_SERIALISABLE = "return value not serialisable"


def _subtable(
    cand: Candidate,
    edit: SynthEdit,
    config: dict[str, Any],
    cases: list[dict[str, Any]],
    facts: dict[str, Any],
    opts: Any,
) -> dict[str, Any]:
    """The task's ``[metadata.repo2env.equivalence_tests]``: where the function is, how many
    hidden inputs of which origin, the grading settings and what was inferred."""
    examples = [c for c in cases if c.get("example")]
    hidden = [c for c in cases if not c.get("example")]
    origins = [c["origin"] for c in hidden]
    sub: dict[str, Any] = {
        "base_commit": cand.base,
        "head_commit": cand.head,
        "path": edit.path,
        "function": edit.function,
        "module": config["module"],
        "source_root": config["source_root"],
        "inputs": len(hidden),
        "recorded_inputs": origins.count("recorded"),
        "hypothesis_inputs": origins.count("hypothesis"),
        "exception_cases": sum(1 for c in hidden if c["expected"][0] == "raise"),
        "examples": len(examples),
        "reward_mode": opts.reward,
        "call_timeout": opts.call_timeout,
        "isolation": facts["isolation"],
        "inferred_types": facts["inferred_types"],
        "verifier": "tests/verifier.py",
    }
    return sub


class CallRecorder:
    """The baseline's traced run for ``equivalence_tests``: one run of the suite that records
    both which functions it calls and the arguments of the module-level ones (in place of the
    plain tracer run, :meth:`SharedBaseline.trace_calls`)."""

    def __init__(self, ctx: HarnessContext) -> None:
        self.ctx = ctx
        self.records: dict[tuple[str, int], dict[str, Any]] = {}
        """(file, line) of a module-level function → its recorded calls."""
        self.error: str | None = None
        """Why the recording run failed (None: it did not)."""

    def __call__(
        self, built: BuiltEnvironment, spec: EnvironmentSpec, recipe: Recipe
    ) -> set[tuple[str, int]] | None:
        options: EquivalenceOptions = self.ctx.options
        with self.ctx.backend.start(built, spec) as session:
            for name, as_name in (
                (RECORD_TEMPLATE, RECORD_TEMPLATE),
                (TRACE_SCRIPT, TRACE_SCRIPT),
                (VERIFIER_TEMPLATE, "equiv_verifier.py"),
            ):
                session.write(f"{TOOLS_DIR}/{as_name}", shipped.read(name))
            data, why = run_wrapped_suite(
                session,
                recipe,
                f"{TOOLS_DIR}/{RECORD_TEMPLATE}",
                RECORD_OUT,
                ["--max", str(options.max_recorded)],
                options.test_timeout,
            )
        if data is None:
            self.error = why
            return None
        self.records = {
            (str(f["path"]), int(f["line"])): f
            for f in data.get("functions", [])
            if isinstance(f, dict)
        }
        return {(str(e[0]), int(e[1])) for e in data.get("called", []) if len(e) >= 2}


class EquivalenceHarness(TaskHarness):
    """Evaluates equivalence candidates of one revision (thread-safe): the shared baseline
    (:class:`SharedBaseline`, traced by a :class:`CallRecorder`), the reference's outcomes on
    the recorded and drawn inputs, then the task."""

    options: EquivalenceOptions

    def __init__(self, ctx: HarnessContext) -> None:
        super().__init__(ctx)
        self.recorder = CallRecorder(ctx)
        self.baseline = SharedBaseline(ctx, trace=self.recorder)

    # ------------------------------------------------------------------------------ evaluate

    def _evaluate(self, cand: Candidate, work: Path, outcome: Outcome) -> None:
        edit: SynthEdit = cand.extra["edit"]
        target: Target = cand.extra["target"]
        opts = self.options
        base = self.baseline.get(cand.head)
        if base.called is None:
            raise RunFailed("recording the tests' calls failed", self.recorder.error)
        if (edit.path, edit.line) not in base.called:
            return self._drop(outcome, NOT_CALLED)
        record = self.recorder.records.get((edit.path, edit.line))
        if record is None:
            return self._drop(outcome, "not a module attribute when called")
        root = import_root(edit.path, record.get("module"))
        if root is None:
            detail = f"{edit.path} ran as module {record.get('module')!r}"
            return self._drop(outcome, "module not importable by name", detail)

        vmod = verifier_module()
        pool: list[tuple[str, bytes]] = []
        seen: set[bytes] = set()
        for blob in record.get("inputs", []):
            data = base64.b64decode(blob)
            if data not in seen:
                seen.add(data)
                pool.append(("recorded", data))
        inferred: dict[str, Any] = {}
        if opts.infer_types:
            calls = [vmod.loads(data) for _, data in pool]
            inferred = {
                name: kind
                for name, kind in recorded_types(target, calls).items()
                if not any(p.name == name and p.annotation is not None for p in target.params)
            }
        drawn = draw_inputs(
            target,
            opts.hypothesis_examples,
            opts.seed,
            home=self.baseline.folder / "hypothesis",
            inferred=inferred,
        )
        for args, kwargs in drawn:
            if not vmod.is_plain((args, kwargs)):
                continue
            data = vmod.dumps((tuple(args), dict(kwargs)))
            if data not in seen:
                seen.add(data)
                pool.append(("hypothesis", data))
        if not pool:
            if record.get("rejected"):
                detail = ", ".join(f"{k}: {v}" for k, v in sorted(record["rejected"].items()))
                return self._drop(outcome, NOT_SERIALISABLE, detail)
            return self._drop(outcome, TOO_FEW, "no recorded call and no type hints to draw from")

        config = {
            "workdir": base.recipe.workdir,
            "source_root": root,
            "module": record["module"],
            "function": edit.function,
            "path": edit.path,
            "call_timeout": opts.call_timeout,
            "batch_size": 25,
            "reward_mode": opts.reward,
            "rel_tol": 1e-9,
            "abs_tol": 1e-12,
            "env": dict(sorted(base.recipe.env.items())),
        }
        self._progress(cand, "tests_before")
        runs, seconds = self._reference_runs(base, work, config, [d for _, d in pool])
        outcome.test_seconds += seconds
        kept, why = self._select(pool, runs)
        if why is not None:
            return self._drop(outcome, why[0], why[1])
        config["python"] = runs[0].get("python")
        facts = {"isolation": runs[0].get("isolation", []), "inferred_types": sorted(inferred)}
        self._emit_task(cand, edit, target, base, work, outcome, config, kept, facts)

    def _reference_runs(
        self, base: Baseline, work: Path, config: dict[str, Any], blobs: list[bytes]
    ) -> tuple[list[dict[str, Any]], float]:
        """The reference's raw outcomes on every input, twice (separate processes), through
        the task's verifier in a session of the shared (original) build."""
        tests = work / "expect-tests"
        write_file(tests / "test.sh", shipped.read("test.sh"), 0o755)
        write_file(tests / "verifier.py", shipped.read(VERIFIER_TEMPLATE))
        write_file(tests / "config.json", json.dumps(config, indent=1) + "\n")
        write_file(tests / "inputs.pkl", pickle.dumps(blobs, 2))
        shutil.copy(base.tests / "integrity.key", tests / "integrity.key")
        timeout = 120 + 2 * len(blobs) * self.options.call_timeout
        runs: list[dict[str, Any]] = []
        spent = 0.0
        with self.backend.start(base.built, base.spec) as session:
            session.mount(tests, "/tests")
            for _ in range(2):
                res = session.exec(
                    ["bash", "/tests/test.sh", "--expect", EXPECT_OUT],
                    cwd=base.recipe.workdir,
                    timeout_s=timeout,
                    network=False,
                )
                spent += res.duration_s
                if res.timed_out:
                    raise RunFailed("reference runs time out")
                try:
                    payload = json.loads(session.read(EXPECT_OUT))
                    session.remove(EXPECT_OUT)
                except (OSError, ValueError, SandboxError):
                    tail = (res.stdout + res.stderr).strip().splitlines()[-1:] or [""]
                    raise RunFailed("verifier self-check failed", tail[0][:300]) from None
                if payload.get("integrity"):
                    raise RunFailed("verifier self-check failed", payload["integrity"][0][:300])
                if payload.get("import_error"):
                    raise RunFailed("reference does not import", payload["import_error"][:300])
                runs.append(payload)
        return runs, spent

    def _select(
        self, pool: list[tuple[str, bytes]], runs: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], tuple[str, str] | None]:
        """The usable cases (origin, input, expected outcome, reprs), or a drop reason."""
        vmod = verifier_module()
        opts = self.options
        first, second = runs[0]["outcomes"], runs[1]["outcomes"]
        counts = {"differ": 0, "slow": 0, "failed": 0, "unserialisable": 0, "not implemented": 0}
        usable: list[dict[str, Any]] = []
        for i, (origin, data) in enumerate(pool):
            a, b = first[i], second[i]
            if a.get("k") not in ("return", "raise"):
                counts["unserialisable" if a.get("k") == "unserialisable" else "failed"] += 1
                continue
            if a.get("k") == "raise" and a.get("t") == "NotImplementedError":
                counts["not implemented"] += 1
                continue
            try:
                expected, again = vmod.outcome_of(a), vmod.outcome_of(b)
            except Exception:
                counts["unserialisable"] += 1
                continue
            if not vmod.outcomes_match(expected, again):
                counts["differ"] += 1
                continue
            if max(a.get("s") or 0.0, b.get("s") or 0.0) > REFERENCE_SHARE * opts.call_timeout:
                counts["slow"] += 1
                continue
            usable.append(
                {"origin": origin, "input": data, "expected": expected, "raw": a, "index": i}
            )
        summary = ", ".join(f"{k}: {v}" for k, v in counts.items() if v)
        if counts["differ"]:
            # Hash-order or clock dependent somewhere: the inputs that agreed may not next time.
            detail = f"outcomes differ between runs for {counts['differ']} of {len(pool)} inputs"
            return [], (NOT_DETERMINISTIC, detail)
        if counts["unserialisable"] and not usable:
            return [], (RESULT_NOT_SERIALISABLE, summary)
        returns = [c for c in usable if c["expected"][0] == "return"]
        errors = [c for c in usable if c["expected"][0] == "raise"]
        room = int(opts.max_error_share / (1 - opts.max_error_share) * len(returns))
        usable = returns + errors[:room]
        usable.sort(key=lambda c: c["index"])
        examples = self._examples(usable, vmod, len(usable) - opts.min_inputs)
        shown = {c["index"] for c in examples}
        hidden = _mix([c for c in usable if c["index"] not in shown], opts.max_inputs)
        if len(hidden) < opts.min_inputs:
            detail = f"{len(hidden)} usable of {len(pool)} (min_inputs {opts.min_inputs})"
            return [], (TOO_FEW, detail + (f"; dropped: {summary}" if summary else ""))
        head = hidden[0]["expected"]
        if all(vmod.outcomes_match(head, c["expected"]) for c in hidden[1:]):
            return [], (CONSTANT, f"every input gives {_outcome_text(head)[:200]}")
        for c in examples:
            c["example"] = True
        return examples + hidden, None

    def _examples(self, usable: list[dict[str, Any]], vmod: Any, room: int) -> list[dict[str, Any]]:
        """Up to ``examples`` (and at most ``room``) recorded calls with short, distinct return
        values: the instruction shows them, so they are not graded."""
        out: list[dict[str, Any]] = []
        for c in usable:
            if len(out) >= min(self.options.examples, room):
                break
            if c["origin"] != "recorded" or c["expected"][0] != "return":
                continue
            if _edge_case(vmod.loads(c["input"])):
                continue  # empty or None arguments are worth more as hidden inputs
            if len(_call_text("f", c["input"])) > 120 or len(c["raw"].get("r", "")) > 120:
                continue
            if any(vmod.outcomes_match(c["expected"], o["expected"]) for o in out):
                continue
            out.append(c)
        return out

    # ------------------------------------------------------------------------------ emit

    def _emit_task(
        self,
        cand: Candidate,
        edit: SynthEdit,
        target: Target,
        base: Baseline,
        work: Path,
        outcome: Outcome,
        config: dict[str, Any],
        cases: list[dict[str, Any]],
        facts: dict[str, Any],
    ) -> None:
        opts, recipe = self.options, base.recipe
        examples = [c for c in cases if c.get("example")]
        hidden = [c for c in cases if not c.get("example")]
        context, key = edited_context(cand, edit, base, work)

        staging = self._staging(cand)
        tests = staging / "tests"
        write_file(tests / "test.sh", shipped.read("test.sh"), 0o755)
        write_file(tests / "verifier.py", shipped.read(VERIFIER_TEMPLATE))
        write_file(tests / "integrity.key", key + "\n")
        write_file(tests / "config.json", json.dumps(config, indent=1) + "\n")
        write_file(tests / "inputs.pkl", pickle.dumps([c["input"] for c in hidden], 2))
        write_file(tests / "expected.pkl", pickle.dumps([c["expected"] for c in hidden], 2))
        write_file(tests / "cases.json", json.dumps(_cases_json(edit, hidden), indent=1) + "\n")
        original = _original_text(cand)
        write_file(tests / "reference.py", _reference_source(edit, target, original))

        instruction = compose_instruction(edit, config["module"], target, examples)
        write_file(staging / "instruction.md", instruction)
        shutil.copytree(context, staging / "environment", symlinks=True)
        solution = staging / "solution"
        write_file(solution / "patch.diff", cand.source_patch.encode("utf-8", "surrogateescape"))
        write_file(solution / "solve.sh", shipped.read("solve.sh"), 0o755)
        write_file(solution / "apply_patch.py", shipped.read("apply_patch.py"))
        write_file(solution / "edit.json", json.dumps(edit.to_json(), indent=1) + "\n")

        origins = [c["origin"] for c in hidden]
        sub = _subtable(cand, edit, config, cases, facts, opts)
        owner = self.repo_label.split("/")[0] if "/" in self.repo_label else "local"
        batches = (len(hidden) + 24) // 25
        task_config = new_task_config(
            name=f"{owner}/{cand.task_id}",
            description=f"Re-implement {edit.function} ({edit.path}) equivalently"[:200],
            keywords=[self.pipeline, recipe.language, "equivalence"],
            metadata={
                "difficulty": difficulty(cand.source_patch),
                "category": "feature",
                "language": recipe.language,
                "repo2env": provenance(
                    pipeline=self.pipeline,
                    pipeline_version=self.pipeline_version,
                    repo=self.repo_label,
                    candidate=cand,
                    source_access="local",
                    reward_kinds=["equivalence"],
                    subtable=sub,
                    protected=list(RUNTIME_PROTECTED),
                ),
                "repogym": {
                    "generator": f"repogym {__version__}",
                    "recipe_hash": recipe.hash,
                    "change_hash": change_hash(cand.source_patch, ""),
                    "summary": (
                        f"Re-implement {edit.function} in {edit.path}; graded on {len(hidden)} "
                        f"hidden input(s) ({origins.count('recorded')} recorded from the "
                        f"tests, {origins.count('hypothesis')} generated from its parameter types) "
                        "against the original's outcomes."
                    ),
                },
            },
            agent=AgentConfig(timeout_sec=opts.agent_timeout),
            verifier=VerifierConfig(
                timeout_sec=max(300.0, 120 + batches * 150 + len(hidden) * opts.call_timeout),
                network_mode="no-network",
            ),
            environment=EnvironmentConfig(
                build_timeout_sec=1800.0,
                cpus=1,
                memory_mb=4096,
                storage_mb=4096,
                network_mode=opts.network,
                workdir=recipe.workdir,
            ),
            solution=SolutionConfig(env={"REPOGYM_WORKDIR": recipe.workdir}),
        )
        save_task_config(staging, task_config)
        if self._gate_and_publish(staging, cand, outcome, None):
            outcome.f2p, outcome.p2p = len(hidden), 0


# ------------------------------------------------------------------------------ text


def _call_text(name: str, data: bytes) -> str:
    """``name(1, 'a', key=2)`` for a stored input."""
    args, kwargs = verifier_module().loads(data)
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    return f"{name}({', '.join(parts)})"


def _edge_case(call: tuple[tuple[Any, ...], dict[str, Any]]) -> bool:
    """Whether a call passes None or an empty string or container (a boundary case)."""
    args, kwargs = call
    return any(
        a is None or (isinstance(a, str | bytes | bytearray | list | tuple | dict | set | frozenset)
                      and not a)
        for a in [*args, *kwargs.values()]
    )  # fmt: skip


def _outcome_text(expected: tuple[Any, ...]) -> str:
    if expected[0] == "raise":
        return f"raises {expected[1]}"
    text = repr(expected[1])
    return text if expected[2] is None else f"{text} (and changes its arguments)"


def compose_instruction(
    edit: SynthEdit, module: str, target: Target, examples: list[dict[str, Any]]
) -> str:
    """What the agent is told: the function, its signature and docstring, the rule, the
    examples (never graded) and how grading works — never the body or a hidden outcome."""
    info = target.info
    lines = [
        f"# Re-implement `{edit.function}`",
        "",
        f"The body of `{edit.function}` in `{edit.path}` (module `{module}`) has been removed: "
        "it now raises `NotImplementedError`. Write an implementation that behaves exactly "
        "like the project's current implementation did on every input: the same return "
        "values (of the same types), the same changes to mutable arguments, and the same "
        "exceptions (of the same types). Keep its name and signature; the rest of the "
        "repository is there to read and to use.",
        "",
        "Its signature:",
        "",
        "```python",
        info.signature.rstrip(":") + ":",
        "```",
    ]
    if info.docstring:
        quoted = "\n".join(f"> {line}".rstrip() for line in info.docstring.splitlines())
        lines += ["", "Its docstring:", "", quoted]
    if examples:
        lines += ["", "## Examples", "", "```python"]
        for c in examples:
            lines.append(f">>> {_call_text(edit.function, c['input'])}")
            lines.append(c["raw"].get("r") or repr(c["expected"][1]))
        lines.append("```")
    lines += [
        "",
        "## How it is graded",
        "",
        f"Hidden tests import `{edit.function}` from `{module}` in a fresh interpreter and call "
        "it on many inputs: arguments the project's own tests pass to it, and others generated "
        "from the types of its parameters. Each outcome is compared with the original "
        "implementation's: equal values of the same types (floats within a relative "
        "tolerance of 1e-9), equal arguments afterwards, or an exception of the same type. "
        "The reward is the share of inputs that match. Every call must finish within a few "
        "seconds; printing, files and the network play no part.",
        "",
        f"The repository is checked out at `{WORKDIR}`. Edit the source there; changes to test "
        "files and to the interpreter's start-up files are not carried over to grading.",
        "",
    ]
    return "\n".join(lines)


def _cases_json(edit: SynthEdit, hidden: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The hidden cases for humans (the verifier reads the pickles)."""
    return [
        {
            "origin": c["origin"],
            "call": _call_text(edit.function, c["input"])[:2000],
            "expected": _outcome_text(c["expected"])[:2000],
        }
        for c in hidden
    ]


def _original_text(cand: Candidate) -> str:
    return str(cand.extra["original"])


def _reference_source(edit: SynthEdit, target: Target, original: str) -> str:
    """The original function's source, for humans reading the task (nothing imports it)."""
    lines = original.splitlines(keepends=True)
    body = "".join(lines[target.info.line - 1 : target.info.end_line])
    return (
        f"# The reference implementation of {edit.function} ({edit.path}), as the repository\n"
        "# had it. For people reading the task: the verifier never imports this file.\n\n" + body
    )


def _mix(cases: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """At most ``limit`` cases, alternating recorded and generated ones (recorded first)."""
    by_origin = [
        [c for c in cases if c["origin"] == "recorded"],
        [c for c in cases if c["origin"] == "hypothesis"],
    ]
    return list(round_robin(by_origin))[:limit]


# ------------------------------------------------------------------------------ pipeline


class EquivalenceTests(SynthPipeline):
    """Local clones, or GitHub/GitLab repositories through a cached clone (default branch)."""

    name = "equivalence_tests"
    version = "1"
    options_model = EquivalenceOptions
    llm_rewrite = False
    """The instruction is generated from the function and its examples; nothing to rewrite."""

    def candidates(
        self, source: Source, options: EquivalenceOptions, slug: str, rev: str
    ) -> Iterator[Candidate | tuple[str, str]]:
        sha = source.resolve(rev)
        per_file: list[list[Candidate]] = []
        for item in synth_sources(source, sha, options):
            if len(item) == 3:
                yield f"equiv:{item[0]}", item[2]
                continue
            path, text = item[0], item[1]
            assert text is not None
            found: list[Candidate] = []
            for entry in equivalence_targets(text, path):
                if isinstance(entry, tuple):
                    info, reason = entry
                    yield f"equiv:{path}:{info.qualname}", reason
                    continue
                info = entry.info
                key = f"equiv:{path}:{info.qualname}"
                new_text = stub_function(text, path, info.qualname, info.line)
                if new_text is None:
                    yield key, "cannot be stubbed"
                    continue
                ident = hashlib.sha256(f"{path}\0{info.qualname}\0{text}".encode()).hexdigest()
                edit = SynthEdit(
                    path=path,
                    function=info.qualname,
                    line=info.line,
                    kind="stub",
                    new_text=new_text,
                    description=f"body of {info.qualname} removed",
                )
                cand = synth_candidate(
                    slug=slug,
                    sha=sha,
                    kind="equivalence_tests",
                    tag="equiv",
                    edit=edit,
                    original=text,
                    ident=ident,
                )
                cand.extra.update(target=entry, original=text)
                found.append(cand)
            per_file.append(found)
        yield from round_robin(per_file)

    def harness(self, ctx: HarnessContext) -> EquivalenceHarness:
        return EquivalenceHarness(ctx)


PIPELINE = EquivalenceTests()
