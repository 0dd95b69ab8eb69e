"""Static import-graph selection of pass-to-pass tests (``repogym.pipelines._selection.select``)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from repogym.pipelines._selection.select import (
    find_test_files,
    import_graph,
)
from repogym.pipelines._selection.select import tests_exercising as exercising  # not a test itself


def make(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(textwrap.dedent(content))
    return root


def select(root: Path, changed: list[str], runner: str = "pytest") -> list[str]:
    return exercising(root, changed, find_test_files(root, runner))


# --------------------------------------------------------------------------- Python


def test_flat_layout(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/core.py": "def f(): return 1\n",
            "pkg/other.py": "def g(): return 2\n",
            "tests/test_core.py": "from pkg.core import f\n",
            "tests/test_other.py": "import pkg.other\n",
        },
    )
    assert select(tmp_path, ["pkg/core.py"]) == ["tests/test_core.py"]
    assert select(tmp_path, ["pkg/other.py"]) == ["tests/test_other.py"]


def test_src_layout(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "src/mylib/__init__.py": "",
            "src/mylib/a.py": "X = 1\n",
            "tests/test_a.py": "from mylib import a\n",
            "tests/test_none.py": "import os\n",
        },
    )
    assert select(tmp_path, ["src/mylib/a.py"]) == ["tests/test_a.py"]


def test_package_dir_from_setup_cfg_and_pyproject(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "setup.cfg": "[options]\npackage_dir =\n    = lib\n",
            "lib/alpha/__init__.py": "",
            "lib/alpha/m.py": "",
            "pyproject.toml": '[tool.poetry]\npackages = [{ include = "beta", from = "code" }]\n',
            "code/beta/__init__.py": "",
            "code/beta/n.py": "",
            "tests/test_alpha.py": "import alpha.m\n",
            "tests/test_beta.py": "from beta.n import thing\n",
        },
    )
    assert select(tmp_path, ["lib/alpha/m.py"]) == ["tests/test_alpha.py"]
    assert select(tmp_path, ["code/beta/n.py"]) == ["tests/test_beta.py"]


def test_transitive_two_levels(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/low.py": "",
            "pkg/mid.py": "from pkg import low\n",
            "pkg/high.py": "import pkg.mid\n",
            "tests/test_high.py": "from pkg.high import x\n",
            "tests/test_mid.py": "from pkg.mid import y\n",
            "tests/test_low_only.py": "import pkg.low\n",
        },
    )
    assert select(tmp_path, ["pkg/low.py"]) == [
        "tests/test_high.py",
        "tests/test_low_only.py",
        "tests/test_mid.py",
    ]
    assert select(tmp_path, ["pkg/high.py"]) == ["tests/test_high.py"]


def test_relative_imports(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/util.py": "",
            "pkg/sub/__init__.py": "",
            "pkg/sub/a.py": "from ..util import helper\n",
            "pkg/sub/b.py": "from . import c\n",
            "pkg/sub/c.py": "",
            "tests/test_a.py": "from pkg.sub.a import x\n",
            "tests/test_b.py": "from pkg.sub import b\n",
        },
    )
    assert select(tmp_path, ["pkg/util.py"]) == ["tests/test_a.py"]
    assert select(tmp_path, ["pkg/sub/c.py"]) == ["tests/test_b.py"]


def test_package_init_reexport(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "pkg/__init__.py": "from .impl import thing\n",
            "pkg/impl.py": "thing = 1\n",
            "pkg/unrelated.py": "",
            "tests/test_api.py": "import pkg\n",
            # anything under the package runs pkg/__init__.py, which imports impl
            "tests/test_sibling.py": "from pkg.unrelated import z\n",
        },
    )
    assert select(tmp_path, ["pkg/impl.py"]) == ["tests/test_api.py", "tests/test_sibling.py"]


def test_unrelated_test_is_excluded(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "app/__init__.py": "",
            "app/a.py": "",
            "other/b.py": "",
            "tests/test_a.py": "import app.a\n",
            "tests/test_b.py": "import other.b\nimport json\nimport pytest\n",
        },
    )
    assert select(tmp_path, ["app/a.py"]) == ["tests/test_a.py"]


def test_conftest_in_parent_folder(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/db.py": "",
            "tests/unit/conftest.py": "import pytest\nfrom pkg import db\n",
            "tests/unit/test_one.py": "def test(): pass\n",
            "tests/unit/deep/test_two.py": "def test(): pass\n",
            "tests/other/test_three.py": "def test(): pass\n",
        },
    )
    assert select(tmp_path, ["pkg/db.py"]) == [
        "tests/unit/deep/test_two.py",
        "tests/unit/test_one.py",
    ]


def test_conftest_pytest_plugins(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/core.py": "",
            "tests/__init__.py": "",
            "tests/fixtures/__init__.py": "",
            "tests/fixtures/core.py": "from pkg import core\n",
            "conftest.py": 'pytest_plugins = ["tests.fixtures.core"]\n',
            "tests/test_x.py": "",
        },
    )
    assert select(tmp_path, ["pkg/core.py"]) == ["tests/test_x.py"]


def test_helper_module_next_to_tests(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/engine.py": "",
            "tests/helpers.py": "from pkg.engine import run\n",
            "tests/test_uses_helper.py": "import helpers\n",
            "tests/test_from_helper.py": "from helpers import run\n",
            "tests/test_plain.py": "",
        },
    )
    assert select(tmp_path, ["pkg/engine.py"]) == [
        "tests/test_from_helper.py",
        "tests/test_uses_helper.py",
    ]


def test_importlib_literal_and_dunder_import(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/plugin.py": "",
            "pkg/legacy.py": "",
            "tests/test_dyn.py": """\
                import importlib

                def test():
                    mod = importlib.import_module("pkg.plugin")
                """,
            "tests/test_dunder.py": "m = __import__('pkg.legacy')\n",
            "tests/test_computed.py": "import importlib\nname = 'plugin'\n"
            "importlib.import_module(f'pkg.{name}')\n",
        },
    )
    assert select(tmp_path, ["pkg/plugin.py"]) == ["tests/test_dyn.py"]
    assert select(tmp_path, ["pkg/legacy.py"]) == ["tests/test_dunder.py"]


def test_imports_in_functions_try_and_type_checking(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "",
            "pkg/b.py": "",
            "pkg/c.py": "",
            "tests/test_x.py": """\
                from typing import TYPE_CHECKING
                if TYPE_CHECKING:
                    from pkg.a import A
                try:
                    import pkg.b
                except ImportError:
                    pkg = None

                def test():
                    from pkg import c
                """,
        },
    )
    for changed in ("pkg/a.py", "pkg/b.py", "pkg/c.py"):
        assert select(tmp_path, [changed]) == ["tests/test_x.py"]


def test_python2_file_falls_back_to_regex(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/old.py": "print 'python 2'\nimport sibling\n",
            "pkg/sibling.py": "",
            "pkg/other.py": "",
            "tests/test_old.py": """\
                print "still python 2"
                from pkg import (old,
                    other)
                """,
        },
    )
    # implicit relative import of a Python 2 module, reached through the regex scan
    assert select(tmp_path, ["pkg/sibling.py"]) == ["tests/test_old.py"]
    assert select(tmp_path, ["pkg/other.py"]) == ["tests/test_old.py"]


def test_non_utf8_source(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/x.py": "",
            "tests/test_latin1.py": b"# -*- coding: latin-1 -*-\n# caf\xe9\nimport pkg.x\n",
        },
    )
    assert select(tmp_path, ["pkg/x.py"]) == ["tests/test_latin1.py"]


def test_circular_imports_terminate(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg import a\n",
            "pkg/a.py": "from pkg import b\n",
            "pkg/b.py": "import pkg.a\nimport pkg\n",
            "pkg/z.py": "",
            "tests/test_cycle.py": "import pkg.b\n",
        },
    )
    assert select(tmp_path, ["pkg/a.py"]) == ["tests/test_cycle.py"]
    assert select(tmp_path, ["pkg/z.py"]) == []
    graph = import_graph(tmp_path, ["tests/test_cycle.py"])
    assert graph["pkg/a.py"] == {"pkg/__init__.py", "pkg/b.py"}
    assert graph["pkg/b.py"] == {"pkg/__init__.py", "pkg/a.py"}
    assert "pkg/z.py" not in graph


def test_changed_test_file_and_new_module(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "tests/test_new.py": "from pkg import fresh\n",
            "tests/test_old.py": "",
        },
    )
    # pkg/fresh.py is added by the fix (absent from the snapshot) and is still a target
    assert select(tmp_path, ["pkg/fresh.py"]) == ["tests/test_new.py"]
    assert select(tmp_path, ["./tests/test_old.py"]) == ["tests/test_old.py"]


# --------------------------------------------------------------------------- JavaScript


def test_js_specifier_forms(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "package.json": '{"name": "demo"}',
            "src/req.js": "module.exports = 1;\n",
            "src/imp.js": "export default 1;\n",
            "src/side.js": "",
            "src/reexported.js": "export const a = 1;\n",
            "src/barrel.js": "export { a } from './reexported';\nexport * from './nothing';\n",
            "src/lazy.mjs": "",
            "src/data.json": "{}",
            "test/req.test.js": "const r = require('../src/req');\n",
            "test/imp.test.js": "import x, {\n  y,\n} from '../src/imp.js';\nimport '../src/side';\n",
            "test/barrel.test.js": "import { a } from '../src/barrel';\n",
            "test/lazy.test.js": "test('x', async () => { await import('../src/lazy.mjs'); });\n",
            "test/json.test.js": "const d = require('../src/data.json');\n",
            "test/none.test.js": "const fs = require('fs');\nimport React from 'react';\n",
        },
    )
    assert select(tmp_path, ["src/req.js"], "jest") == ["test/req.test.js"]
    assert select(tmp_path, ["src/imp.js"], "jest") == ["test/imp.test.js"]
    assert select(tmp_path, ["src/side.js"], "jest") == ["test/imp.test.js"]
    assert select(tmp_path, ["src/reexported.js"], "jest") == ["test/barrel.test.js"]
    assert select(tmp_path, ["src/lazy.mjs"], "jest") == ["test/lazy.test.js"]
    assert select(tmp_path, ["src/data.json"], "jest") == ["test/json.test.js"]


def test_js_folder_index(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "lib/widgets/index.js": "module.exports = require('./button');\n",
            "lib/widgets/button.js": "",
            "__tests__/widgets.js": "const w = require('../lib/widgets');\n",
            "__tests__/fixtures/data.json": "{}",
        },
    )
    assert find_test_files(tmp_path, "jest") == ["__tests__/widgets.js"]
    assert select(tmp_path, ["lib/widgets/button.js"], "jest") == ["__tests__/widgets.js"]


def test_ts_import_of_js_extension_means_ts(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "src/math.ts": "export const add = (a: number, b: number) => a + b;\n",
            "src/view.tsx": "",
            "src/math.test.ts": "import { add } from './math.js';\n",
            "src/view.test.tsx": "import View from './view.jsx';\n",
        },
    )
    assert select(tmp_path, ["src/math.ts"], "vitest") == ["src/math.test.ts"]
    assert select(tmp_path, ["src/view.tsx"], "vitest") == ["src/view.test.tsx"]


def test_self_reference_through_package_name(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "package.json": '{"name": "@acme/kit", "main": "dist/index.js"}',
            "src/index.ts": "export * from './parse';\n",
            "src/parse.ts": "",
            "src/extra/tool.ts": "",
            "test/kit.test.ts": "import { parse } from '@acme/kit';\n",
            "test/tool.test.ts": "import tool from '@acme/kit/src/extra/tool';\n",
            "test/dep.test.ts": "import x from '@acme/other';\n",
        },
    )
    assert select(tmp_path, ["src/parse.ts"], "jest") == ["test/kit.test.ts"]
    assert select(tmp_path, ["src/extra/tool.ts"], "jest") == ["test/tool.test.ts"]


def test_self_reference_through_exports(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "package.json": '{"name": "pkg", "exports": {".": {"import": "./lib/main.mjs"},'
            ' "./utils/*": "./lib/utils/*.js"}}',
            "lib/main.mjs": "",
            "lib/utils/str.js": "",
            "test/main.spec.js": "import pkg from 'pkg';\n",
            "test/str.spec.js": "const s = require('pkg/utils/str');\n",
        },
    )
    assert select(tmp_path, ["lib/main.mjs"], "mocha") == ["test/main.spec.js"]
    assert select(tmp_path, ["lib/utils/str.js"], "mocha") == ["test/str.spec.js"]


def test_tsconfig_path_alias(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "tsconfig.json": """\
                {
                  // comments and trailing commas are allowed
                  "compilerOptions": {
                    "baseUrl": ".",
                    /* the alias */
                    "paths": { "@/*": ["src/*"], },
                  },
                }
                """,
            "src/store/cart.ts": "",
            "src/store/index.ts": "export * from './cart';\n",
            "tests/cart.test.ts": "import { cart } from '@/store';\n",
            "tests/other.test.ts": "import { x } from '@/missing';\n",
        },
    )
    assert select(tmp_path, ["src/store/cart.ts"], "vitest") == ["tests/cart.test.ts"]


def test_workspaces_extends_and_subpath_imports(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "package.json": '{"private": true, "workspaces": ["packages/*"]}',
            "tsconfig.base.json": '{"compilerOptions": {"baseUrl": ".",'
            ' "paths": {"~lib/*": ["packages/app/src/lib/*"]}}}',
            # main points at build output that is not in the snapshot: mapped back to src/
            "packages/core/package.json": '{"name": "@m/core", "main": "./dist/index.js"}',
            "packages/core/src/index.ts": "export * from './a';\n",
            "packages/core/src/a.ts": "",
            "packages/app/package.json": '{"name": "@m/app", "imports": {"#cfg/*": "./config/*.js"}}',
            "packages/app/tsconfig.json": '{"extends": "../../tsconfig.base"}',
            "packages/app/config/db.js": "",
            "packages/app/src/lib/x.ts": "",
            "packages/app/src/app.test.ts": "import { a } from '@m/core';\n",
            "packages/app/src/lib.test.ts": "import x from '~lib/x';\n",
            "packages/app/src/db.test.ts": "import db from '#cfg/db';\n",
            # vite template: the alias lives in tsconfig.app.json; .vue files are scanned too
            "web/package.json": '{"name": "web"}',
            "web/tsconfig.json": '{"files": [], "references": [{"path": "./tsconfig.app.json"}]}',
            "web/tsconfig.app.json": '{"compilerOptions": {"paths": {"@/*": ["./src/*"]}}}',
            "web/src/comp.vue": "<script setup>import h from './helper'</script>\n",
            "web/src/helper.ts": "",
            "web/src/comp.spec.ts": "import C from '@/comp.vue'\n",
        },
    )
    assert select(tmp_path, ["packages/core/src/a.ts"], "vitest") == [
        "packages/app/src/app.test.ts"
    ]
    assert select(tmp_path, ["packages/app/src/lib/x.ts"], "vitest") == [
        "packages/app/src/lib.test.ts"
    ]
    assert select(tmp_path, ["packages/app/config/db.js"], "vitest") == [
        "packages/app/src/db.test.ts"
    ]
    assert select(tmp_path, ["web/src/helper.ts"], "vitest") == ["web/src/comp.spec.ts"]


def test_jest_mock_specifier(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "src/api.js": "",
            "src/client.js": "",
            "src/client.test.js": "jest.mock('./api');\nconst c = require('./client');\n",
            "src/vi.test.ts": "vi.mock('./api.js', () => ({}));\n",
            "src/plain.test.js": "test('x', () => {});\n",
        },
    )
    assert select(tmp_path, ["src/api.js"], "jest") == ["src/client.test.js", "src/vi.test.ts"]


# --------------------------------------------------------------------------- discovery


def test_find_test_files_pytest_skips_vendored_folders(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "tests/test_a.py": "",
            "tests/b_test.py": "",
            "tests/conftest.py": "",
            "tests/helpers.py": "",
            "pkg/build/__init__.py": "",
            "pkg/build/test_builder.py": "",
            ".venv/lib/python3.11/site-packages/x/test_x.py": "",
            "venv/lib/test_v.py": "",
            "build/lib/tests/test_copy.py": "",
            "dist/test_d.py": "",
            ".tox/py311/test_t.py": "",
            ".hidden/test_h.py": "",
            "node_modules/pkg/test_n.py": "",
            "tests/__pycache__/test_a.py": "",
        },
    )
    expected = ["pkg/build/test_builder.py", "tests/b_test.py", "tests/test_a.py"]
    assert find_test_files(tmp_path, "pytest") == expected
    assert find_test_files(tmp_path, "unittest") == expected


def test_find_test_files_takes_a_root_test_module(tmp_path: Path) -> None:
    # Small projects keep their tests in one root module run as `pytest test.py` (python-slugify);
    # a test.py deeper down is code (a `test` command), not a test module.
    make(tmp_path, {"test.py": "", "slugify/test.py": "", "slugify/__init__.py": ""})
    assert find_test_files(tmp_path, "pytest") == ["test.py"]
    make(tmp_path / "other", {"tests.py": "", "app/tests.py": ""})
    assert find_test_files(tmp_path / "other", "unittest") == ["tests.py"]


def test_find_test_files_jest_skips_node_modules(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "src/a.test.js": "",
            "src/b.spec.tsx": "",
            "src/__tests__/c.ts": "",
            "src/__tests__/__snapshots__/c.ts.snap": "",
            "src/util.js": "",
            "node_modules/lib/x.test.js": "",
            ".venv/y.test.js": "",
            "packages/p/node_modules/z.spec.js": "",
        },
    )
    expected = ["src/__tests__/c.ts", "src/a.test.js", "src/b.spec.tsx"]
    for runner in ("jest", "vitest", "mocha", "node"):
        assert find_test_files(tmp_path, runner) == expected


def test_other_languages_return_nothing(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "go.mod": "module example.com/m\n",
            "calc/calc.go": "package calc\n",
            "calc/calc_test.go": 'package calc\nimport "example.com/m/calc"\n',
        },
    )
    tests = find_test_files(tmp_path, "go")
    assert tests == ["calc/calc_test.go"]
    assert exercising(tmp_path, ["calc/calc.go"], tests) == []
    assert find_test_files(tmp_path, "cargo") == []
    assert exercising(tmp_path, ["src/lib.rs"], ["tests/it.rs"]) == []


# --------------------------------------------------------------------------- scale


@pytest.fixture
def big_repo(tmp_path: Path) -> Path:
    """5,000 source modules in 50 packages (each module imports the previous one of its
    package) and 2,000 tests, each importing one module."""
    root = tmp_path / "big"
    for p in range(50):
        pkg = root / "src" / "big" / f"p{p}"
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        for m in range(100):
            body = f"from big.p{p} import m{m - 1}\n" if m else "import os\n"
            (pkg / f"m{m}.py").write_text(body + f"def f{m}():\n    return {m}\n")
    (root / "src" / "big" / "__init__.py").write_text("")
    tests = root / "tests"
    tests.mkdir()
    for t in range(2000):
        p, m = t % 50, (t // 50) * 2 + 1  # m in 1..79
        (tests / f"test_{t}.py").write_text(
            f"from big.p{p}.m{m} import f{m}\n\ndef test():\n    assert f{m}() == {m}\n"
        )
    return root


def test_large_synthetic_repository(big_repo: Path) -> None:
    tests = find_test_files(big_repo, "pytest")
    assert len(tests) == 2000
    # p7/m40 is reached by every test of package 7 importing m >= 40 (m = 41, 43, ..., 79)
    selected = exercising(big_repo, ["src/big/p7/m40.py"], tests)
    expected = sorted(
        f"tests/test_{t}.py" for t in range(2000) if t % 50 == 7 and (t // 50) * 2 + 1 >= 40
    )
    assert selected == expected
    assert len(selected) == 20
    # the package __init__ is reached by every test
    assert len(exercising(big_repo, ["src/big/__init__.py"], tests)) == 2000
    assert exercising(big_repo, ["src/big/p3/m99.py"], tests) == []
