"""Static detection of the interface hidden F2P tests need (base vs head snapshots)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from repogym.pipelines._instructions.interface import Required, render_interface, required_interface


def _write(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(textwrap.dedent(content))


def _snapshots(
    tmp_path: Path, base: dict[str, str | bytes], head: dict[str, str | bytes]
) -> tuple[Path, Path]:
    """``base`` as given; ``head`` = base overlaid with the changed files."""
    b, h = tmp_path / "base", tmp_path / "head"
    _write(b, base)
    _write(h, {**base, **head})
    return b, h


def _find(items: list[Required], kind: str, name: str) -> Required:
    found = [i for i in items if i.kind == kind and i.name == name]
    assert found, f"no {kind} {name!r} in {items}"
    assert len(found) == 1
    return found[0]


def _names(items: list[Required]) -> set[tuple[str, str]]:
    return {(i.kind, i.name) for i in items}


CALC_BASE = """\
def add(a, b):
    return a + b


def flexible(x, **options):
    return x


class Calc:
    def __init__(self, base=0):
        self.base = base

    def total(self):
        return self.base
"""

CALC_HEAD = (
    CALC_BASE
    + """

    def scale(self, factor=2, *, exact: bool = True):
        return self.base * factor


def multiply(a: int, b: int, *, strict: bool = False) -> int:
    '''Body text that must never leak.'''
    return a * b
"""
)


def test_new_function_imported_from_existing_module(tmp_path: Path) -> None:
    base, head = _snapshots(
        tmp_path,
        {"pkg/__init__.py": "", "pkg/calc.py": CALC_BASE},
        {
            "pkg/calc.py": CALC_HEAD,
            "tests/test_calc.py": """\
                from pkg.calc import add, multiply

                def test_multiply():
                    assert multiply(2, 3) == 6
                    assert add(1, 1) == 2
            """,
        },
    )
    items = required_interface(
        base, head, ["tests/test_calc.py"], ["tests/test_calc.py::test_multiply"]
    )
    assert items == [
        Required(
            kind="function",
            name="pkg.calc.multiply",
            owner="pkg.calc",
            signature="multiply(a, b, *, strict=False)",
            where="pkg/calc.py",
            tests=["tests/test_calc.py::test_multiply"],
        )
    ]


def test_new_module_and_its_names(tmp_path: Path) -> None:
    base, head = _snapshots(
        tmp_path,
        {"pkg/__init__.py": "", "pkg/calc.py": CALC_BASE},
        {
            "pkg/fmt.py": "def humanize(value, precision=1):\n    return str(value)\n",
            "pkg/io/__init__.py": "",
            "pkg/io/reader.py": "class Reader:\n    pass\n",
            "tests/test_fmt.py": """\
                import pkg.io.reader
                from pkg import fmt
                from pkg.fmt import humanize

                def test_humanize():
                    assert humanize(1) == fmt.humanize(1)
                    pkg.io.reader.Reader()
            """,
        },
    )
    tid = "tests/test_fmt.py::test_humanize"
    items = required_interface(base, head, ["tests/test_fmt.py"], [tid])
    fmt = _find(items, "module", "pkg.fmt")
    assert (fmt.owner, fmt.where, fmt.tests) == ("pkg", "pkg/fmt.py", [tid])
    func = _find(items, "function", "pkg.fmt.humanize")
    assert func.signature == "humanize(value, precision=1)"
    assert _find(items, "module", "pkg.io.reader").where == "pkg/io/reader.py"
    assert _find(items, "class", "pkg.io.reader.Reader").signature == "Reader()"
    # Ordered by file, then kind, then name.
    assert [i.where for i in items] == sorted(i.where for i in items)


def test_new_keyword_argument_but_not_into_kwargs(tmp_path: Path) -> None:
    base, head = _snapshots(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/calc.py": CALC_BASE,
            "pkg/time.py": "def naturaltime(value, future=False):\n    return ''\n",
        },
        {
            "pkg/time.py": "def naturaltime(value, future=False, tz=None):\n    return ''\n",
            "pkg/calc.py": CALC_BASE.replace(
                "def __init__(self, base=0)", "def __init__(self, base=0, step=1)"
            ),
            "tests/test_time.py": """\
                from pkg import time as t
                from pkg.calc import Calc, flexible

                def test_tz():
                    assert t.naturaltime(1, future=True, tz="UTC") == ""
                    assert flexible(1, anything=2) == 1
                    Calc(base=1, step=2)
            """,
        },
    )
    items = required_interface(base, head, ["tests/test_time.py"], ["tests/test_time.py::test_tz"])
    tz = _find(items, "parameter", "tz")
    assert tz.owner == "pkg.time.naturaltime"
    assert tz.signature == "naturaltime(value, future=False, tz=None)"
    assert tz.where == "pkg/time.py"
    step = _find(items, "parameter", "step")
    assert (step.owner, step.signature) == ("pkg.calc.Calc", "Calc(base=0, step=1)")
    # **options absorbs "anything"; "future" and "base" already exist.
    assert _names(items) == {("parameter", "tz"), ("parameter", "step")}


def test_new_method_on_local_instance(tmp_path: Path) -> None:
    base, head = _snapshots(
        tmp_path,
        {"pkg/__init__.py": "", "pkg/calc.py": CALC_BASE},
        {
            "pkg/calc.py": CALC_HEAD,
            "tests/test_calc.py": """\
                from pkg.calc import Calc

                def test_scale():
                    c = Calc(3)
                    c.label = "x"
                    assert c.label == "x"
                    assert c.total() == 3 and c.base == 3
                    assert c.scale(2, exact=False) == 6
                    assert Calc().scale() == 0
            """,
        },
    )
    items = required_interface(
        base, head, ["tests/test_calc.py"], ["tests/test_calc.py::test_scale"]
    )
    assert items == [
        Required(
            kind="method",
            name="Calc.scale",
            owner="pkg.calc.Calc",
            signature="scale(factor=2, *, exact=True)",
            where="pkg/calc.py",
            tests=["tests/test_calc.py::test_scale"],
        )
    ]


def test_unknown_base_class_or_star_import_is_not_guessed(tmp_path: Path) -> None:
    base, head = _snapshots(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg._impl import *\n",
            "pkg/_impl.py": "def one():\n    return 1\n",
            "pkg/models.py": "from somelib import Base\n\nclass Model(Base):\n    pass\n",
        },
        {
            "tests/test_models.py": """\
                from pkg import two
                from pkg.models import Model

                def test_model():
                    assert Model().save() and two()
            """,
        },
    )
    items = required_interface(
        base, head, ["tests/test_models.py"], ["tests/test_models.py::test_model"]
    )
    assert items == []


def test_cli_options(tmp_path: Path) -> None:
    cli_base = """\
        import argparse

        def main(argv=None):
            parser = argparse.ArgumentParser()
            parser.add_argument("--quiet", action="store_true")
            return parser.parse_args(argv)
    """
    base, head = _snapshots(
        tmp_path,
        {"pkg/__init__.py": "", "pkg/cli.py": cli_base},
        {
            "pkg/cli.py": cli_base.replace(
                'parser.add_argument("--quiet", action="store_true")',
                'parser.add_argument("--quiet", action="store_true")\n'
                '            parser.add_argument("--verbose", action="store_true")',
            ),
            "tests/test_cli.py": """\
                import subprocess
                from pkg.cli import main

                def test_verbose():
                    assert main(["--verbose", "--quiet"])
                    subprocess.run(["git", "log", "--oneline"])
            """,
        },
    )
    items = required_interface(
        base, head, ["tests/test_cli.py"], ["tests/test_cli.py::test_verbose"]
    )
    assert items == [
        Required(
            "cli_option", "--verbose", None, None, "pkg/cli.py", ["tests/test_cli.py::test_verbose"]
        )
    ]


def test_error_messages(tmp_path: Path) -> None:
    source = """\
        def check(width, key=None):
            if key is not None:
                raise KeyError(f"unknown key {key!r}")
            return width
    """
    base, head = _snapshots(
        tmp_path,
        {"pkg/__init__.py": "", "pkg/check.py": source},
        {
            "pkg/check.py": source.replace(
                "    return width",
                '    if width <= 0:\n        raise ValueError("width must be positive.")\n    return width',
            ),
            "tests/test_check.py": """\
                import pytest
                from pkg.check import check

                def test_width():
                    with pytest.raises(ValueError, match=r"width must be positive\\."):
                        check(-1)
                    with pytest.raises(KeyError, match="unknown key 'x'"):
                        check(1, key="x")
                    try:
                        check(0)
                    except ValueError as e:
                        assert "must be positive" in str(e)
            """,
        },
    )
    items = required_interface(
        base, head, ["tests/test_check.py"], ["tests/test_check.py::test_width"]
    )
    assert items == [
        Required(
            "error_message",
            "width must be positive.",
            "ValueError",
            None,
            "pkg/check.py",
            ["tests/test_check.py::test_width"],
        )
    ]


def test_parametrised_ids_map_to_one_function(tmp_path: Path) -> None:
    base, head = _snapshots(
        tmp_path,
        {"pkg/__init__.py": "", "pkg/calc.py": CALC_BASE},
        {
            "pkg/calc.py": CALC_HEAD,
            "tests/test_calc.py": """\
                import pytest
                from pkg import calc

                class TestMultiply:
                    @pytest.mark.parametrize("a,b", [(1, 2), (3, 4)])
                    def test_it(self, a, b):
                        assert calc.multiply(a, b) == a * b

                def test_not_failing():
                    assert calc.Calc().scale() == 0
            """,
        },
    )
    ids = [
        "tests/test_calc.py::TestMultiply::test_it[1-2]",
        "tests/test_calc.py::TestMultiply::test_it[3-4]",
    ]
    items = required_interface(base, head, ["tests/test_calc.py"], ids)
    # test_not_failing is not F2P: Calc.scale is not reported.
    assert items == [
        Required(
            "function",
            "pkg.calc.multiply",
            "pkg.calc",
            "multiply(a, b, *, strict=False)",
            "pkg/calc.py",
            ids,
        )
    ]


def test_fixture_and_helper_in_the_same_file(tmp_path: Path) -> None:
    base, head = _snapshots(
        tmp_path,
        {"pkg/__init__.py": "", "pkg/calc.py": CALC_BASE},
        {
            "pkg/calc.py": CALC_HEAD,
            "tests/test_calc.py": """\
                import pytest
                from pkg import calc as c

                @pytest.fixture
                def machine():
                    return c.Calc(2)

                def doubled(m):
                    return c.multiply(m.total(), 2)

                def unrelated():
                    return c.Calc().nothing_here()

                def test_machine(machine):
                    assert machine.scale() == 4
                    assert doubled(machine) == 4
            """,
        },
    )
    items = required_interface(
        base, head, ["tests/test_calc.py"], ["tests/test_calc.py::test_machine"]
    )
    assert _names(items) == {("method", "Calc.scale"), ("function", "pkg.calc.multiply")}


def test_unittest_ids_setup_and_assert_raises_regex(tmp_path: Path) -> None:
    base, head = _snapshots(
        tmp_path,
        {"pkg/__init__.py": "", "pkg/calc.py": CALC_BASE, "tests/__init__.py": ""},
        {
            "pkg/calc.py": CALC_HEAD.replace(
                "return a * b", 'raise OverflowError("too big to multiply")'
            ),
            "tests/test_calc.py": """\
                import unittest
                from pkg.calc import Calc, multiply

                class CalcTest(unittest.TestCase):
                    def setUp(self):
                        self.calc = Calc(1)

                    def test_scale(self):
                        self.assertEqual(self.calc.scale(), 2)

                    def test_overflow(self):
                        with self.assertRaisesRegex(OverflowError, "too big"):
                            multiply(10, 10)
            """,
        },
    )
    ids = ["tests.test_calc.CalcTest.test_scale", "tests.test_calc.CalcTest.test_overflow"]
    items = required_interface(base, head, ["tests/test_calc.py"], ids)
    assert _find(items, "method", "Calc.scale").tests == [ids[0]]
    assert _find(items, "function", "pkg.calc.multiply").tests == [ids[1]]
    msg = _find(items, "error_message", "too big")
    assert (msg.owner, msg.tests) == ("OverflowError", [ids[1]])


def test_src_layout(tmp_path: Path) -> None:
    base, head = _snapshots(
        tmp_path,
        {
            "pyproject.toml": "[project]\nname = 'pkg'\n",
            "src/pkg/__init__.py": "from .calc import add\n",
            "src/pkg/calc.py": CALC_BASE,
        },
        {
            "src/pkg/__init__.py": "from .calc import add, multiply\n",
            "src/pkg/calc.py": CALC_HEAD,
            "tests/test_api.py": """\
                import pkg

                def test_api():
                    assert pkg.multiply(2, 2) == pkg.add(2, 2)
            """,
        },
    )
    items = required_interface(base, head, ["tests/test_api.py"], ["tests/test_api.py::test_api"])
    item = _find(items, "function", "pkg.multiply")
    assert (item.owner, item.where) == ("pkg", "src/pkg/calc.py")
    assert item.signature == "multiply(a, b, *, strict=False)"
    assert len(items) == 1


def test_existing_names_and_test_helpers_are_not_reported(tmp_path: Path) -> None:
    base, head = _snapshots(
        tmp_path,
        {
            "pkg/__init__.py": "__all__ = ['lazy']\n",
            "pkg/calc.py": CALC_BASE
            + "\nVERSION = '1'\n\ntry:\n    from fastcalc import fast\nexcept ImportError:\n    fast = None\n",
        },
        {
            "tests/helpers.py": "def make():\n    return 1\n",
            "tests/test_calc.py": """\
                import os
                import numpy as np
                from pkg import lazy
                from pkg.calc import Calc, VERSION, fast, add
                from helpers import make

                def test_all():
                    assert add(1, 2) == 3 and Calc(base=1).total() == 1
                    assert VERSION and fast is None and make() and np.array and os.path.join
                    assert Calc.__name__ and Calc().base == 0
            """,
        },
    )
    items = required_interface(
        base, head, ["tests/test_calc.py", "tests/helpers.py"], ["tests/test_calc.py::test_all"]
    )
    assert items == []


def test_files_that_do_not_parse_are_skipped(tmp_path: Path) -> None:
    base, head = _snapshots(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/calc.py": CALC_BASE,
            "pkg/broken.py": "def broken(:\n",
            "pkg/binary.py": b"\xff\xfe\x00 not utf-8",
        },
        {
            "pkg/calc.py": CALC_HEAD,
            "tests/test_bad.py": "def test_x(:\n    pass\n",
            "tests/test_calc.py": """\
                from pkg.broken import broken
                from pkg.binary import thing
                from pkg.calc import multiply

                def test_multiply():
                    assert multiply(1, 1) and broken and thing
            """,
        },
    )
    ids = ["tests/test_bad.py::test_x", "tests/test_calc.py::test_multiply"]
    items = required_interface(base, head, ["tests/test_bad.py", "tests/test_calc.py"], ids)
    assert _names(items) == {("function", "pkg.calc.multiply")}


def test_patch_targets_and_module_attributes(tmp_path: Path) -> None:
    base, head = _snapshots(
        tmp_path,
        {"pkg/__init__.py": "", "pkg/net.py": "def fetch(url):\n    return url\n"},
        {
            "pkg/net.py": "def fetch(url):\n    return url\n\n\ndef retry(fn, times=3):\n    return fn()\n",
            "tests/test_net.py": """\
                from unittest import mock
                import pkg.net

                def test_retry():
                    with mock.patch("pkg.net.retry") as m:
                        pkg.net.fetch("x")
                    assert m
            """,
        },
    )
    items = required_interface(base, head, ["tests/test_net.py"], ["tests/test_net.py::test_retry"])
    assert items == [
        Required(
            "function",
            "pkg.net.retry",
            "pkg.net",
            "retry(fn, times=3)",
            "pkg/net.py",
            ["tests/test_net.py::test_retry"],
        )
    ]


def test_javascript_project(tmp_path: Path) -> None:
    base, head = _snapshots(
        tmp_path,
        {
            "package.json": '{"name": "demo"}',
            "src/calc.ts": "export function add(a: number, b: number): number {\n  return a + b;\n}\n",
            "src/legacy.js": "function sub(a, b) { return a - b; }\nmodule.exports = { sub };\n",
        },
        {
            "src/calc.ts": (
                "export function add(a: number, b: number): number {\n  return a + b;\n}\n\n"
                "export const multiply = (a: number, b: number = 1): number => a * b;\n"
            ),
            "src/format/index.ts": "export function pad(s: string, width = 2) {\n  return s;\n}\n",
            "src/legacy.js": (
                "function sub(a, b) { return a - b; }\nfunction neg(a) { return -a; }\n"
                "module.exports = { sub, neg };\n"
            ),
            "src/calc.test.ts": """\
                import { add, multiply } from './calc';
                import { pad } from "./format";
                // import { ghost } from './calc';
                const { sub, neg } = require('./legacy.js');

                describe('calc', () => {
                  it('multiplies', () => {
                    expect(multiply(2, 3)).toBe(add(3, 3));
                    expect(pad('1')).toBe('01');
                    expect(neg(sub(1, 2))).toBe(1);
                  });
                });
            """,
        },
    )
    tid = "src/calc.test.ts > calc > multiplies"
    items = required_interface(base, head, ["src/calc.test.ts"], [tid])
    assert items == [
        Required("export", "multiply", "src/calc.ts", "multiply(a, b = 1)", "src/calc.ts", [tid]),
        Required("module", "src/format/index.ts", None, None, "src/format/index.ts", [tid]),
        Required(
            "export",
            "pad",
            "src/format/index.ts",
            "pad(s, width = 2)",
            "src/format/index.ts",
            [tid],
        ),
        Required("export", "neg", "src/legacy.js", "neg(a)", "src/legacy.js", [tid]),
    ]


def test_render_interface() -> None:
    items = [
        Required("module", "pkg.fmt", "pkg", None, "pkg/fmt.py", ["t1"]),
        Required(
            "function",
            "pkg.fmt.humanize",
            "pkg.fmt",
            "humanize(value, precision=1)",
            "pkg/fmt.py",
            ["t1"],
        ),
        Required("function", "pkg.multiply", "pkg", "multiply(a, b)", "src/pkg/calc.py", ["t1"]),
        Required("method", "Calc.scale", "pkg.calc.Calc", "scale(factor=2)", "pkg/calc.py", ["t1"]),
        Required(
            "parameter",
            "tz",
            "pkg.time.naturaltime",
            "naturaltime(value, tz=None)",
            "pkg/time.py",
            ["t2"],
        ),
        Required("cli_option", "--verbose", None, None, "pkg/cli.py", ["t3"]),
        Required("error_message", "width must be positive", "ValueError", None, None, ["t4"]),
        Required("error_message", "use `x`", None, None, None, ["t4"]),
        Required(
            "export",
            "pad",
            "src/format/index.ts",
            "pad(s, width = 2)",
            "src/format/index.ts",
            ["t5"],
        ),
    ]
    text = render_interface(items)
    assert text == (
        "## Required interface\n"
        "\n"
        "The hidden tests use these names, which do not exist yet:\n"
        "\n"
        "- `pkg/fmt.py`: new module `pkg.fmt`\n"
        "- `pkg/fmt.py`: new function `humanize(value, precision=1)`\n"
        "- `src/pkg/calc.py`: new function `multiply(a, b)`, importable from `pkg`\n"
        "- `pkg/calc.py`: new method `Calc.scale(factor=2)`\n"
        "- `pkg.time.naturaltime`: new keyword argument `tz` (`naturaltime(value, tz=None)`)\n"
        "- `pkg/cli.py`: new command-line option `--verbose`\n"
        "- `ValueError` with a message matching `width must be positive`\n"
        "- An error with a message matching `` use `x` ``\n"
        "- `src/format/index.ts`: new export `pad(s, width = 2)`\n"
    )
    assert render_interface([]) == ""


def test_dataclass_constructor_and_typer_options(tmp_path: Path) -> None:
    app_base = textwrap.dedent(
        """\
        import typer
        from dataclasses import dataclass

        app = typer.Typer()

        @dataclass
        class Settings:
            width: int
            fill: str = " "

        @app.command()
        def main(width: int = 80, dry_run: bool = False):
            pass
        """
    )
    app_head = app_base.replace(
        'fill: str = " "', 'fill: str = " "\n    align: str = "left"'
    ).replace("dry_run: bool = False)", "dry_run: bool = False, color: bool = True)")
    base, head = _snapshots(
        tmp_path,
        {"tool/__init__.py": "", "tool/app.py": app_base},
        {
            "tool/app.py": app_head,
            "tests/test_app.py": """\
                from typer.testing import CliRunner
                from tool.app import Settings, app

                def test_align():
                    assert Settings(width=3, align="right").fill == " "
                    result = CliRunner().invoke(app, ["--width=3", "--dry-run", "--no-color"])
            """,
        },
    )
    items = required_interface(base, head, ["tests/test_app.py"], ["tests/test_app.py::test_align"])
    align = _find(items, "parameter", "align")
    assert (align.owner, align.signature) == (
        "tool.app.Settings",
        'Settings(width, fill=" ", align="left")',
    )
    # typer derives options from parameter names: --no-color is new, --dry-run is not.
    assert _find(items, "cli_option", "--no-color").where == "tool/app.py"
    assert _names(items) == {("parameter", "align"), ("cli_option", "--no-color")}


def test_javascript_members_of_a_default_import(tmp_path: Path) -> None:
    base, head = _snapshots(
        tmp_path,
        {
            "lib/store.js": "class Store {\n  get(key) { return key }\n}\nexport default new Store()\n",
            "lib/all.js": "export * from 'some-package'\n",
        },
        {
            "lib/store.js": (
                "class Store {\n  get(key) { return key }\n"
                "  async evict(key, { force = false } = {}) { return force }\n}\n"
                "export default new Store()\n"
            ),
            "test/store.test.js": """\
                import store from '../lib/store.js'
                import * as all from '../lib/all.js'
                import { anything } from '../lib/all.js'

                test('evicts', async () => {
                  expect(store.get('a')).toBe('a')
                  expect(await store.evict('a', { force: true })).toBe(true)
                  expect('abc'.length + store.toString().indexOf('x')).toBe(2)
                  expect(() => all.whatever()).toThrow('store is read-only')
                })
            """,
        },
    )
    tid = "test/store.test.js > evicts"
    items = required_interface(base, head, ["test/store.test.js"], [tid])
    # lib/all.js re-exports a package wholesale: nothing about it is reported; the message
    # "store is read-only" exists in neither snapshot's source.
    assert items == [
        Required(
            "method",
            "evict",
            "lib/store.js",
            "evict(key, { force = false } = {})",
            "lib/store.js",
            [tid],
        )
    ]
