"""The plug-in registry: lazy built-ins, entry points, broken plug-ins isolated, install hints."""

from __future__ import annotations

import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from repogym import plugins
from repogym.plugins import Builtin, MissingDependency, PluginError, Registry, UnknownPlugin


def _ints(obj: object) -> int:
    if not isinstance(obj, int) or isinstance(obj, bool):
        raise TypeError(f"not an int: {obj!r}")
    return obj


@pytest.fixture
def pkg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A throw-away package of plug-in modules on ``sys.path``."""
    name = f"plugpkg_{tmp_path.name.replace('-', '_')}"
    root = tmp_path / name
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "good.py").write_text("VALUE = 7\n")
    (root / "needs_sdk.py").write_text("import repogym_absent_sdk\nVALUE = 1\n")
    (root / "boom.py").write_text("raise RuntimeError('boom\\nsecond line')\n")
    (root / "wrong.py").write_text("VALUE = 'text'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def _points(monkeypatch: pytest.MonkeyPatch, *points: EntryPoint) -> None:
    monkeypatch.setattr(
        plugins, "entry_points", lambda group: [p for p in points if p.group == group]
    )


def test_builtins_are_imported_on_first_use_only(pkg: str) -> None:
    reg: Registry[int] = Registry(
        "number", group=None, builtins={"seven": f"{pkg}.good:VALUE"}, check=_ints
    )
    assert f"{pkg}.good" not in sys.modules
    assert reg.names() == ["seven"] and "seven" in reg
    assert f"{pkg}.good" not in sys.modules
    assert reg.get("seven") == 7
    assert f"{pkg}.good" in sys.modules


def test_unknown_names_list_the_choices_and_hidden_ones_stay_usable(pkg: str) -> None:
    reg: Registry[int] = Registry(
        "number",
        group=None,
        builtins={
            "seven": f"{pkg}.good:VALUE",
            "secret": Builtin(f"{pkg}.good:VALUE", hidden=True),
            "one": 1,
        },
        check=_ints,
    )
    assert reg.names() == ["one", "seven"]
    assert reg.names(hidden=True) == ["one", "secret", "seven"]
    assert reg.get("secret") == 7 and reg.get("one") == 1
    with pytest.raises(UnknownPlugin) as caught:
        reg.get("eight")
    assert str(caught.value) == "unknown number 'eight'; choose one of: one, seven"
    assert isinstance(caught.value, LookupError)


def test_a_broken_plugin_is_named_in_one_line_and_the_others_work(
    pkg: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _points(
        monkeypatch,
        EntryPoint("boom", f"{pkg}.boom:VALUE", "repogym.numbers"),
        EntryPoint("wrong", f"{pkg}.wrong:VALUE", "repogym.numbers"),
        EntryPoint("good", f"{pkg}.good:VALUE", "repogym.numbers"),
        EntryPoint("other", f"{pkg}.good:VALUE", "repogym.other"),
    )
    reg: Registry[int] = Registry("number", group="repogym.numbers", builtins={}, check=_ints)
    assert reg.names() == ["boom", "good", "wrong"]
    with pytest.raises(PluginError) as caught:
        reg.get("boom")
    message = str(caught.value)
    assert "\n" not in message and "'boom'" in message and "boom second line" in message
    assert "not an int: 'text'" in str(pytest.raises(PluginError, reg.get, "wrong").value)
    assert reg.get("good") == 7
    assert reg.load_all() == {"good": 7}
    assert set(reg.errors()) == {"boom", "wrong"}
    assert "number 'boom'" in caplog.text


def test_an_entry_point_cannot_take_a_builtin_name(
    pkg: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _points(monkeypatch, EntryPoint("one", f"{pkg}.good:VALUE", "repogym.numbers"))
    reg: Registry[int] = Registry(
        "number", group="repogym.numbers", builtins={"one": 1}, check=_ints
    )
    assert reg.get("one") == 1


def test_a_missing_optional_dependency_gives_the_install_line(pkg: str) -> None:
    reg: Registry[int] = Registry(
        "number",
        group=None,
        builtins={
            "sdk": Builtin(f"{pkg}.needs_sdk:VALUE", extra="docker"),
            "plain": f"{pkg}.needs_sdk:VALUE",
            "gone": Builtin(f"{pkg}.absent_module:VALUE", extra="docker"),
        },
        check=_ints,
    )
    with pytest.raises(MissingDependency) as caught:
        reg.get("sdk")
    assert str(caught.value) == (
        "the number 'sdk' needs repogym_absent_sdk: pip install 'repogym[docker]'"
    )
    assert isinstance(caught.value, ImportError)
    # Without an extra, or when the plug-in's own module is missing, it is simply broken.
    for name in ("plain", "gone"):
        with pytest.raises(PluginError) as caught:
            reg.get(name)
        assert not isinstance(caught.value, MissingDependency) and "broken" in str(caught.value)


def test_register_replaces_and_unregister_removes(pkg: str) -> None:
    reg: Registry[int] = Registry("number", group=None, builtins={"one": 1}, check=_ints)
    reg.register("one", 11)
    reg.register("lazy", f"{pkg}.good:VALUE", hidden=True)
    assert reg.get("one") == 11 and reg.get("lazy") == 7 and reg.names() == ["one"]
    with pytest.raises(TypeError):
        reg.register("bad", 1.5)  # type: ignore[arg-type]
    reg.unregister("one")
    reg.unregister("never-there")
    assert reg.names(hidden=True) == ["lazy"]
