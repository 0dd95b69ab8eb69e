"""What generated tasks receive lives in one folder, ``src/repogym/shipped``: every file there
is reachable by the name a task holds it under, each name names one file, and the modules
import nothing but the standard library and each other (they run where repogym is not
installed)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from repogym import shipped

HOME = Path(shipped.__file__).resolve().parent


def _files() -> list[Path]:
    return sorted(
        p
        for p in HOME.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p != HOME / "__init__.py"
    )


def _task_name(path: Path) -> str:
    """The name a task holds ``path`` under (``parsers/__init__.py`` is ``parsers.py``)."""
    return "parsers.py" if path == HOME / "parsers" / "__init__.py" else path.name


def test_every_file_is_read_by_the_name_a_task_holds_it_under() -> None:
    names = [_task_name(p) for p in _files()]
    assert len(names) == len(set(names)), "two shipped files share a name"
    for path in _files():
        assert Path(str(shipped.locate(_task_name(path)))).resolve() == path
        assert shipped.read(_task_name(path)) == path.read_bytes()


def test_what_graded_tasks_get_is_all_here() -> None:
    for rel in shipped.GRADED:
        assert shipped.read(rel), rel
    modules = {_task_name(p) for p in _files() if p.suffix == ".py" and "scripts" not in p.parts}
    # every module the runtime verifier may load is in a graded task (diff_reward.py: pr_diff)
    assert modules - {rel for rel in shipped.GRADED if "/" not in rel} == {"diff_reward.py"}
    with pytest.raises(FileNotFoundError):
        shipped.read("no_such_file.py")


@pytest.mark.parametrize(
    "path",
    [p for p in _files() if p.suffix == ".py" and "scripts" not in p.relative_to(HOME).parts],
    ids=lambda p: p.relative_to(HOME).as_posix(),
)
def test_modules_import_only_the_standard_library_and_each_other(path: Path) -> None:
    siblings = {p.stem for p in _files() if p.suffix == ".py"} | {"parsers"}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path.name}: relative import"
            names = [node.module or ""]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top == "repogym":
                assert name.startswith("repogym.shipped."), f"{path.name} imports {name}"
            else:
                assert top in sys.stdlib_module_names or top in siblings, (
                    f"{path.name} imports {name}"
                )


def _body(path: Path, name: str) -> str:
    """A shipped script's function, without its docstring, as source (module-level names
    that differ only by a leading underscore made alike)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    node = next(
        n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.lstrip("_") == name
    )
    body = node.body[1:] if isinstance(node.body[0], ast.Expr) else node.body
    return "\n".join(ast.unparse(stmt) for stmt in body).replace("_HERE", "HERE")


@pytest.mark.parametrize(
    ("name", "scripts"),
    [
        ("load_siblings", ["verifier.py", "pr_diff_verifier.py"]),
        ("read_record", ["verifier.py", "equiv_verifier.py"]),
    ],
)
def test_standalone_copies_stay_one_rule(name: str, scripts: list[str]) -> None:
    """Shipped scripts run alone inside tasks, so a few helpers are written in each; the
    copies must stay the same code (one rule, pinned here)."""
    first, *others = (_body(HOME / "scripts" / s, name) for s in scripts)
    for other in others:
        assert other == first
