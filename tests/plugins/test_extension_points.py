"""Every extension point is a plugins.Registry: names and messages as before, plug-ins by entry
point, a broken plug-in named without breaking the built-ins."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from repogym import plugins
from repogym.bootstrap.detect import LANGUAGE_REGISTRY, detect
from repogym.executors import EXECUTORS, ExecutorError, get_executor
from repogym.hub.registry import REGISTRIES, open_registry
from repogym.llm import PROVIDER_REGISTRY, Provider, parse_llm_spec
from repogym.run.agents import AGENTS, CommandAgent, NopAgent, OracleAgent, make_agent
from repogym.sandbox import BACKENDS, SandboxError, backend_names, get_backend
from repogym.sandbox.fake import FakeSandbox
from repogym.sources.remote import HOSTS


def test_sandbox_backends_keep_their_names_and_fake_is_not_listed() -> None:
    assert backend_names() == ["docker", "local"]
    assert isinstance(get_backend("fake"), FakeSandbox)
    with pytest.raises(SandboxError) as caught:
        get_backend("bogus")
    assert str(caught.value) == "unknown sandbox backend 'bogus'; choose one of: docker, local"


def test_agents_keep_their_specs_and_messages() -> None:
    assert isinstance(make_agent("oracle"), OracleAgent)
    assert isinstance(make_agent("nop"), NopAgent)
    agent = make_agent("command:echo hi")
    assert isinstance(agent, CommandAgent) and agent.command == "echo hi"
    for bad in ("bogus", "oracle:x", "command", "llm"):
        with pytest.raises(ValueError, match="unknown agent"):
            make_agent(bad)
    for spec in ("nop", "bogus"):
        with pytest.raises(ValueError, match="--agent-opt is for llm"):
            make_agent(spec, {"max_steps": "3"})


def test_executors_hosts_registries_languages_and_providers_are_registries() -> None:
    assert EXECUTORS.names() == ["local", "ray"]
    assert get_executor("local", jobs=2).name == "local"
    with pytest.raises(ExecutorError, match="unknown executor 'k8s': use local or ray"):
        get_executor("k8s")
    assert HOSTS.names() == ["github", "gitlab"]
    assert REGISTRIES.names() == ["file", "hf"]
    assert LANGUAGE_REGISTRY.names() == ["c", "cpp", "go", "java", "node", "python", "rust"]
    assert PROVIDER_REGISTRY.names() == ["anthropic", "ollama", "openai", "sglang", "vllm"]
    assert AGENTS.names() == ["command", "llm", "nop", "oracle"]
    with pytest.raises(ValueError) as caught:
        parse_llm_spec("acme/model")
    assert str(caught.value) == (
        "unknown LLM provider 'acme'; expected one of openai, vllm, sglang, ollama, anthropic"
    )


def test_plugins_arrive_by_entry_point(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "acme_plugin.py").write_text(
        "from repogym.llm import Provider\n"
        "from repogym.sandbox.fake import FakeSandbox\n"
        "PROVIDER = Provider(self_hosted=True, default_endpoint='http://127.0.0.1:1/v1')\n"
        "class Acme(FakeSandbox):\n    name = 'acme'\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    points = [
        EntryPoint("acme", "acme_plugin:Acme", "repogym.sandboxes"),
        EntryPoint("broken", "acme_plugin:Missing", "repogym.sandboxes"),
        EntryPoint("acme", "acme_plugin:PROVIDER", "repogym.llm_providers"),
    ]
    monkeypatch.setattr(
        plugins, "entry_points", lambda group: [p for p in points if p.group == group]
    )
    for registry in (BACKENDS, PROVIDER_REGISTRY):  # discovered again, restored afterwards
        monkeypatch.setattr(registry, "_entries", dict(registry._entries))
        monkeypatch.setattr(registry, "_discovered", False)
    assert get_backend("acme").name == "acme"
    assert backend_names() == ["acme", "broken", "docker", "local"]
    with pytest.raises(SandboxError) as caught:
        get_backend("broken")
    assert "'broken'" in str(caught.value) and "\n" not in str(caught.value)
    assert get_backend("local").name == "local"  # the others still work
    assert parse_llm_spec("acme/m") == ("acme", "m")
    assert PROVIDER_REGISTRY.get("acme") == Provider(
        self_hosted=True, default_endpoint="http://127.0.0.1:1/v1"
    )


def test_language_choice_and_unknown_language(tmp_path: Path) -> None:
    (tmp_path / "go.mod").write_text("module example.com/x\n\ngo 1.22\n")
    assert detect(tmp_path).language == "go"
    unknown = detect(tmp_path, language="cobol")
    assert (
        not unknown.supported
        and unknown.reason == "unknown language 'cobol' (python, node, rust, go, java, cpp, c)"
    )


def test_registry_urls_keep_their_messages(tmp_path: Path) -> None:
    assert open_registry(f"file://{tmp_path}").root == tmp_path
    with pytest.raises(Exception, match="unsupported registry 's3://b'"):
        open_registry("s3://b")
    with pytest.raises(Exception, match="registry path must be absolute"):
        open_registry("file:relative")


def test_a_plugin_of_the_wrong_kind_is_reported_broken(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Every registry checks what a plug-in gives: a sandbox backend must be a Sandbox class,
    # a provider a Provider; anything else is a one-line "broken" error naming it.
    (tmp_path / "wrong_plugin.py").write_text("NOT_A_CLASS = 42\nclass Plain:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    points = [
        EntryPoint("number", "wrong_plugin:NOT_A_CLASS", "repogym.sandboxes"),
        EntryPoint("plain", "wrong_plugin:Plain", "repogym.sandboxes"),
        EntryPoint("plain", "wrong_plugin:Plain", "repogym.llm_providers"),
    ]
    monkeypatch.setattr(
        plugins, "entry_points", lambda group: [p for p in points if p.group == group]
    )
    for registry in (BACKENDS, PROVIDER_REGISTRY):
        monkeypatch.setattr(registry, "_entries", dict(registry._entries))
        monkeypatch.setattr(registry, "_discovered", False)
    for name in ("number", "plain"):
        with pytest.raises(SandboxError) as caught:
            get_backend(name)
        assert "not a repogym.sandbox.Sandbox subclass" in str(caught.value)
        assert "\n" not in str(caught.value)
    with pytest.raises(plugins.PluginError) as bad:
        PROVIDER_REGISTRY.get("plain")
    assert "not a repogym.llm.Provider" in str(bad.value)
    assert get_backend("local").name == "local"
