"""Harbor tasks written by others: multi-key rewards, separate verifiers, [[steps]], non-Docker
environment types and unsupported features. The trials check the runner's logic, so they run
on the fake sandbox (no isolation, :mod:`repogym.sandbox.fake`), but the one whose point is the
sandbox's network policy and the one whose image needs a RUN step (the fake runs none): those
run on the real local sandbox."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repogym.cli import app
from repogym.run.agents import CommandAgent, NopAgent, OracleAgent
from repogym.run.preflight import UnsupportedTask, preflight
from repogym.run.trial import TrialRunner
from repogym.sandbox import get_backend
from repogym.sandbox.fake import FakeSandbox
from repogym.taskdir import load_task
from repogym.taskdir.validate import validate_task
from tests.conftest import write_task

DOCKERFILE = "FROM debian:bookworm\nWORKDIR /app\n"
HEAD = 'schema_version = "1.4"\n[task]\nname = "acme/{name}"\n'


@pytest.fixture(scope="module")
def runner() -> TrialRunner:
    return TrialRunner(FakeSandbox(host=True))


@pytest.fixture(scope="module")
def local_runner() -> TrialRunner:
    return TrialRunner(get_backend("local"))


# ------------------------------------------------------------------ static: validate, preflight


@pytest.mark.parametrize("kind", ["cloudlab", "vm-cluster"])
def test_non_docker_environment_type_is_refused_with_its_name(tmp_path: Path, kind: str) -> None:
    toml = HEAD.format(name="t") + f'[environment]\ntype = "{kind}"\n'
    path = write_task(tmp_path, "t", toml=toml, dockerfile=None)
    errors = [p.message for p in validate_task(path).errors]
    assert len([e for e in errors if kind in e]) == 1, errors
    assert not any("no environment definition" in e for e in errors)
    reasons = preflight(load_task(path))
    assert len(reasons) == 1 and kind in reasons[0]


def test_unsupported_sidecars_and_mcp_servers_are_refused_not_ignored(tmp_path: Path) -> None:
    toml = (
        HEAD.format(name="t")
        + '[[environment.mcp_servers]]\nname = "db"\ntransport = "sse"\n'
        + 'url = "http://db.example.com/sse"\n'
    )
    compose = "services:\n  cache:\n    image: redis:7\n    network_mode: host\n"
    path = write_task(tmp_path, "t", toml=toml, files={"environment/docker-compose.yaml": compose})
    reasons = preflight(load_task(path))
    assert any("docker-compose.yaml" in r and "network_mode" in r for r in reasons), reasons
    assert any("mcp_servers" in r and "'db'" in r for r in reasons)


def test_run_refuses_before_building(runner: TrialRunner, tmp_path: Path) -> None:
    toml = HEAD.format(name="t") + '[environment]\ntype = "cloudlab"\n'
    task = load_task(write_task(tmp_path, "t", toml=toml, dockerfile=None))
    with pytest.raises(UnsupportedTask, match="cloudlab"):
        runner.build(task)
    outcome = runner.run(task, NopAgent())
    assert outcome.reward is None and outcome.error
    assert outcome.error.startswith("UnsupportedTask") and "cloudlab" in outcome.error


def test_validate_runnable_cli(tmp_path: Path) -> None:
    ds = tmp_path / "ds"
    write_task(ds, "ok", dockerfile=DOCKERFILE)
    write_task(ds, "cl", toml=HEAD.format(name="cl") + '[environment]\ntype = "cloudlab"\n')
    sep = HEAD.format(name="sep") + '[verifier]\nenvironment_mode = "separate"\n'
    write_task(ds, "sep", toml=sep, dockerfile=DOCKERFILE)
    write_task(ds, "v2", toml='version = "2.0"\n', dockerfile=DOCKERFILE)  # a template's own
    res = CliRunner().invoke(app, ["validate", str(ds), "--runnable", "--json"])
    assert res.exit_code == 1, res.output
    rows = {r["task_id"]: r for r in json.loads(res.stdout)["tasks"]}
    assert rows["ok"]["runnable"] and rows["ok"]["refusals"] == []
    assert (
        rows["v2"]["runnable"] and "'2.0' is not a Harbor task schema" in rows["v2"]["warnings"][0]
    )
    assert "cloudlab" in rows["cl"]["refusals"][0] and len(rows["cl"]["refusals"]) == 1
    assert "tests/Dockerfile" in rows["sep"]["refusals"][0]
    text = CliRunner().invoke(app, ["validate", str(ds / "cl"), "--runnable"])
    assert text.exit_code == 1 and "refused" in text.output and "cloudlab" in text.output
    assert CliRunner().invoke(app, ["validate", str(ds / "ok"), "--runnable"]).exit_code == 0


# ------------------------------------------------------------------ 1. multi-key rewards


def test_multi_key_reward_json_without_reward_key(runner: TrialRunner, tmp_path: Path) -> None:
    sh = '#!/bin/bash\necho \'{"accuracy": 1, "style": 0.5}\' > /logs/verifier/reward.json\n'
    task = load_task(write_task(tmp_path, "t", dockerfile=DOCKERFILE, test_sh=sh))
    outcome = runner.run(task, NopAgent(), out_dir=tmp_path / "out")
    assert outcome.reward is None
    assert outcome.result["verifier_result"]["rewards"] == {"accuracy": 1.0, "style": 0.5}
    assert outcome.error and "none named 'reward'" in outcome.error


# ------------------------------------------------------------------ 2. separate verifier


def _separate_task(root: Path) -> Path:
    toml = (
        'schema_version = "1.4"\nartifacts = ["/app/answer.txt"]\n'
        '[task]\nname = "acme/sep"\n[verifier]\nenvironment_mode = "separate"\n'
        '[environment]\nnetwork_mode = "no-network"\n'
    )
    test_sh = (
        "#!/bin/bash\n"
        # The agent's other files never reach the verifier; only the artifact does.
        "if [ -e /app/other.txt ]; then echo 0 > /logs/verifier/reward.txt; exit 0; fi\n"
        "test -f /verifier-only || { echo 0 > /logs/verifier/reward.txt; exit 0; }\n"
        'if [ "$(cat /app/answer.txt 2>/dev/null)" = 42 ]; then r=1; else r=0; fi\n'
        "echo $r > /logs/verifier/reward.txt\n"
    )
    return write_task(
        root,
        "sep",
        toml=toml,
        dockerfile=DOCKERFILE,
        test_sh=test_sh,
        files={
            "tests/Dockerfile": "FROM debian:bookworm\nCOPY . /tests/\n"
            "RUN touch /verifier-only\nWORKDIR /app\n",
            "solution/solve.sh": "#!/bin/bash\necho 42 > /app/answer.txt\n"
            "echo x > /app/other.txt\n",
        },
    )


def test_separate_verifier_gets_only_the_artifacts(
    local_runner: TrialRunner, tmp_path: Path
) -> None:
    """On the local sandbox: the verifier's image has a ``RUN`` step (the fake sandbox replays
    none, so ``/verifier-only`` would be looked up on the host)."""
    runner = local_runner
    task = load_task(_separate_task(tmp_path))
    assert validate_task(task.path).ok, validate_task(task.path).problems
    oracle = runner.run(task, OracleAgent())
    assert oracle.reward == 1.0, (oracle.error, oracle.verifier_stdout)
    assert oracle.result["verification"]["mode"] == "separate"
    assert "/app/answer.txt" in oracle.result["verification"]["artifacts"]
    nop = runner.run(task, NopAgent())
    assert nop.reward == 0.0, nop.error
    assert nop.result["verification"]["missing"] == ["/app/answer.txt"]


# ------------------------------------------------------------------ 3. multi-step


STEPS_TOML = (
    'schema_version = "1.4"\nmulti_step_reward_strategy = "{strategy}"\n'
    '[task]\nname = "acme/steps"\n[environment]\nnetwork_mode = "no-network"\n'
    '[[steps]]\nname = "one"\n{gate}'
    '[[steps]]\nname = "two"\n[steps.verifier]\ntimeout_sec = 60\n'
)


def _steps_task(root: Path, strategy: str = "mean", gate: str = "") -> Path:
    check = (
        "#!/bin/bash\n"
        'if grep -qx "$STEP_WORD" /app/state.txt 2>/dev/null; then r=1; else r=0; fi\n'
        'echo "{\\"reward\\": $r, \\"seen\\": 1}" > /logs/verifier/reward.json\n'
    )
    return write_task(
        root,
        "steps",
        toml=STEPS_TOML.format(strategy=strategy, gate=gate),
        instruction=None,
        dockerfile=DOCKERFILE,
        test_sh=None,
        files={
            "steps/one/instruction.md": "Write 'first' to /app/state.txt.\n",
            "steps/two/instruction.md": "Append 'second' to /app/state.txt.\n",
            "steps/one/tests/test.sh": check.replace("$STEP_WORD", "first"),
            "steps/two/tests/test.sh": check.replace("$STEP_WORD", "second"),
            "steps/one/solution/solve.sh": "#!/bin/bash\necho first > /app/state.txt\n",
            "steps/two/solution/solve.sh": "#!/bin/bash\necho second >> /app/state.txt\n",
            "steps/two/workdir/setup.sh": "#!/bin/bash\ntouch /app/setup-ran\n",
        },
    )


def test_multi_step_task_validates_and_loads(tmp_path: Path) -> None:
    path = _steps_task(tmp_path)
    report = validate_task(path)
    assert report.ok, report.problems
    task = load_task(path)
    assert task.is_multi_step and "Step 2: two" in task.instruction()
    assert preflight(task) == []


def test_multi_step_oracle_runs_steps_in_one_session(runner: TrialRunner, tmp_path: Path) -> None:
    task = load_task(_steps_task(tmp_path))
    outcome = runner.run(task, OracleAgent(), out_dir=tmp_path / "out")
    assert outcome.error is None, outcome.error
    steps = outcome.result["step_results"]
    assert [s["step_name"] for s in steps] == ["one", "two"]
    assert [s["verifier_result"]["reward"] for s in steps] == [1.0, 1.0]
    assert outcome.reward == 1.0
    assert outcome.result["verifier_result"]["rewards"] == {"reward": 1.0, "seen": 1.0}


def test_multi_step_mean_final_and_min_reward(runner: TrialRunner, tmp_path: Path) -> None:
    only_first = CommandAgent("grep -q first /app/state.txt 2>/dev/null || echo first > state.txt")
    mean = runner.run(load_task(_steps_task(tmp_path / "m")), only_first)
    assert [s["verifier_result"]["reward"] for s in mean.result["step_results"]] == [1.0, 0.0]
    assert mean.reward == 0.5  # Harbor's default: per-key mean over the steps
    final = runner.run(load_task(_steps_task(tmp_path / "f", "final")), only_first)
    assert final.reward == 0.0  # the last step's rewards as they are
    gated = runner.run(
        load_task(_steps_task(tmp_path / "g", gate="min_reward = 1.0\n")), NopAgent()
    )
    steps = gated.result["step_results"]
    assert len(steps) == 1 and "below min_reward" in steps[0]["stopped"]
    assert gated.reward == 0.0


# ------------------------------------------------------------------ healthchecks


def _health_task(root: Path, check: str) -> Path:
    toml = HEAD.format(name="h") + "[environment.healthcheck]\n" + check
    return write_task(
        root,
        "h",
        toml=toml,
        dockerfile=DOCKERFILE + "RUN touch /app/ready\n",
        test_sh="#!/bin/bash\ntest -f /app/done && r=1 || r=0\necho $r > /logs/verifier/reward.txt\n",
        files={"solution/solve.sh": "#!/bin/bash\ntouch /app/done\n"},
    )


def test_environment_healthcheck_gates_the_agent(local_runner: TrialRunner, tmp_path: Path) -> None:
    ok = load_task(_health_task(tmp_path / "ok", 'command = "test -f /app/ready"\n'))
    assert preflight(ok) == []
    assert local_runner.run(ok, OracleAgent()).reward == 1.0
    never = load_task(
        _health_task(
            tmp_path / "never",
            'command = "test -f /app/never"\nretries = 2\ninterval_sec = 0.1\n',
        )
    )
    outcome = local_runner.run(never, OracleAgent())
    assert outcome.reward is None and outcome.error is not None
    assert outcome.error.startswith("HealthcheckError")
    assert "never became healthy: its healthcheck failed 2 times" in outcome.error
    bad = _health_task(tmp_path / "bad", "retries = 2\n")
    assert any("healthcheck].command" in r for r in preflight(load_task(bad)))


def test_step_healthcheck_runs_after_setup(runner: TrialRunner, tmp_path: Path) -> None:
    path = _steps_task(tmp_path)
    toml = (path / "task.toml").read_text()
    (path / "task.toml").write_text(
        toml + '[steps.healthcheck]\ncommand = "test -f /app/setup-ran"\nretries = 1\n'
    )
    outcome = runner.run(load_task(path), OracleAgent())
    assert outcome.error is None and outcome.reward == 1.0, outcome.error
    (path / "steps/two/workdir/setup.sh").write_text("#!/bin/bash\ntrue\n")
    failed = runner.run(load_task(path), OracleAgent())
    steps = failed.result["step_results"]
    assert len(steps) == 2 and "step 'two' never became healthy" in json.dumps(steps[1])


HARBOR_AIRGAPPED = """\
services:
  main:
    build:
      context: ${CONTEXT_DIR}
    image: ${MAIN_IMAGE_NAME}
    command: ["sh", "-c", "sleep infinity"]
    environment:
      - TEST_DIR=${TEST_DIR}
    volumes:
      - ${HOST_VERIFIER_LOGS_PATH}:${ENV_VERIFIER_LOGS_PATH}
      - ${HOST_AGENT_LOGS_PATH}:${ENV_AGENT_LOGS_PATH}
    deploy:
      resources:
        limits:
          cpus: ${CPUS}
          memory: ${MEMORY}
    network_mode: "none"
"""


def test_harbors_own_airgapped_compose_runs_offline(
    local_runner: TrialRunner, tmp_path: Path
) -> None:
    """Harbor's compose file for an offline task restates its defaults for `main` and adds
    network_mode: none — accepted, and every phase then runs with no network."""
    from repogym.run.trial import environment_spec
    from repogym.run.verifier import phase_network

    toml = HEAD.format(name="air") + '[environment]\nnetwork_mode = "public"\n'
    path = write_task(
        tmp_path,
        "air",
        toml=toml,
        dockerfile=DOCKERFILE,
        test_sh='#!/bin/bash\n[ "$TEST_DIR" = /tests ] && [ -f /app/done ] && r=1 || r=0\n'
        "echo $r > /logs/verifier/reward.txt\n",
        files={
            "environment/docker-compose.yaml": HARBOR_AIRGAPPED,
            "solution/solve.sh": '#!/bin/bash\n[ "$TEST_DIR" = /tests ] && touch /app/done\n',
        },
    )
    task = load_task(path)
    assert preflight(task) == []
    assert environment_spec(task, local_runner.backend).network_mode == "no-network"
    assert not phase_network(task, "agent") and not phase_network(task, "verifier")
    assert local_runner.run(task, OracleAgent()).reward == 1.0
    assert local_runner.run(task, NopAgent()).reward == 0.0
    # A main that really replaces the environment is still refused.
    (path / "environment/docker-compose.yaml").write_text(
        "services:\n  main:\n    image: other/image:1\n    command: python -m http.server\n"
    )
    reasons = preflight(load_task(path))
    assert any("image would replace" in r for r in reasons), reasons
    assert any("command would replace" in r for r in reasons), reasons


def test_a_task_without_tests_is_refused_before_building(tmp_path: Path) -> None:
    path = write_task(tmp_path, "t", dockerfile=DOCKERFILE, test_sh=None)
    reasons = preflight(load_task(path))
    assert reasons == ["the task has no tests/test.sh: its verifier has nothing to run"]


def test_a_later_step_sees_neither_the_tests_nor_the_verifier_output_of_an_earlier_one(
    runner: TrialRunner, tmp_path: Path
) -> None:
    """An agent in step 2 looks for what step 1's verifier had: /tests, /logs/verifier and a
    process the verifier left behind. Step 2's verifier pays 1 only if it found any."""
    path = _steps_task(tmp_path)
    (path / "steps/one/tests/test.sh").write_text(
        "#!/bin/bash\necho secret-expected-output > /logs/verifier/details.txt\n"
        "(sleep 30.0517; true) > /dev/null 2>&1 &\n"
        'echo "{\\"reward\\": 1}" > /logs/verifier/reward.json\n'
    )
    (path / "steps/two/tests/test.sh").write_text(
        "#!/bin/bash\n"
        "grep -qE 'secret-expected-output|test.sh|lingering' /app/seen && r=1 || r=0\n"
        'echo "{\\"reward\\": $r}" > /logs/verifier/reward.json\n'
    )
    spy = CommandAgent(
        "ls /tests >> /app/seen 2>&1; cat /logs/verifier/details.txt >> /app/seen 2>&1; "
        "pgrep -f 'sleep 30[.]0517' > /dev/null && echo lingering >> /app/seen; true"
    )
    outcome = runner.run(load_task(path), spy)
    rewards = [s["verifier_result"]["reward"] for s in outcome.result["step_results"]]
    assert rewards == [1.0, 0.0], outcome.result["step_results"]
