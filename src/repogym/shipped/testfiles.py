#!/usr/bin/env python3
# ruff: noqa: UP006, UP007, UP035, UP045  (shipped into tasks: runs under the task's Python, maybe 3.6)
"""Which files are tests, per language (standard library only, Python 3.6+, no repogym imports).

The one owner of the test-file patterns. Three questions, three answers:

* :func:`is_test_path` — is a path a test file or test data? The rule that splits patches into
  source and tests, writes a task's manifests and, in the task (this module ships as
  ``tests/testfiles.py`` beside ``infra.py``), resets what an agent did to the tests.
* :func:`is_test_source` — should a scan of the repository's *source* (the interface the hidden
  tests need) skip a file as a test? :func:`is_test_path`, plus the looser spellings some
  projects use (``specs/``, ``__test__/``, ``Test_x.py``).
* :data:`PY_TEST_FILE` / :data:`JS_TEST_FILE` — can a runner be pointed at a file as a test
  module (pytest/unittest; jest/vitest/mocha)? :func:`is_node_test_candidate` — would
  ``node --test`` look at it?
"""

import re

TEST_DIRS = frozenset(
    {"test", "tests", "__tests__", "spec", "testing", "testdata", "__snapshots__", "__mocks__"}
)
"""Folder names (any case) that make everything under them a test or test data."""
#: Gradle/Android/Maven test source sets right under ``src/`` (``src/androidTest``,
#: ``src/integrationTest``, ``src/testFixtures``, ``src/it`` of the Maven invoker plugin):
#: everything under them is tests, whatever the file names.
SOURCE_SET_RE = re.compile(r"^(?:[a-z][A-Za-z]*Tests?|testFixtures|it)$")
JS_EXT = r"(?:[cm]?[jt]sx?)"
"""A JavaScript/TypeScript code extension (``js``, ``jsx``, ``ts``, ``tsx``, ``mjs``, ``cts`` …)."""
#: File names (case-sensitive) that are tests wherever they live.
TEST_FILE_RE = re.compile(
    r"""
    ^(?:
        test_.+\.py | .+_test\.py | conftest\.py | tests\.py   # pytest / unittest / Django
      | .+_test\.go                                            # go test
      | .+\.(?:test|spec)\."""
    + JS_EXT
    + r"""                 # jest, vitest, mocha
      | .+_(?:spec|test)\.rb                                   # rspec, minitest
      | .+_(?:test|tests|unittest)\.(?:c|cc|cpp|cxx)              # GoogleTest, Catch2, CTest
      | test_.+\.(?:c|cc|cpp|cxx)
      | tests\.rs | .+_tests\.rs                                # a Rust `mod tests;` file
    )$
    """,
    re.VERBOSE,
)

#: :func:`is_test_path` as glob patterns (``**`` spans folders, ``{a,b}`` alternatives), for the
#: paths a clean-room verification protects (:mod:`repogym.taskdir.verification`).
TEST_PATH_GLOBS = (
    "**/{test,tests,Test,Tests,TEST,TESTS,__tests__,spec,Spec,testing,Testing,testdata}",
    "**/{__snapshots__,__mocks__}",
    "**/*.{test,tests,Test,Tests}",
    "**/test_*.py",
    "**/*_test.py",
    "**/conftest.py",
    "**/tests.py",
    "**/*_test.go",
    "**/*.{test,spec}.{js,jsx,ts,tsx,mjs,cjs,mts,cts}",
    "**/*_{spec,test}.rb",
    "**/*_{test,tests,unittest}.{c,cc,cpp,cxx}",
    "**/test_*.{c,cc,cpp,cxx}",
    "**/tests.rs",
    "**/*_tests.rs",
    "**/src/{[a-z]*Test,[a-z]*Tests,testFixtures,it}",
)

#: Python test modules a runner can be pointed at: ``test_*.py``, ``*_test.py``, and the single
#: test module of a small project at the repository's root, ``test.py``/``tests.py`` (run as
#: ``pytest test.py``). A ``test.py`` deeper down is often code (a ``test`` command), so it is not.
PY_TEST_FILE = re.compile(r"(^|/)(test_[^/]*|[^/]*_test)\.py$|^tests?\.py$")
#: JS/TS test modules a runner can be pointed at: ``*.test.*`` / ``*.spec.*``, or code under
#: ``__tests__/`` (jest's default ``testMatch``); data under ``__tests__/`` is not a test module.
JS_TEST_FILE = re.compile(r"\.(test|spec)\." + JS_EXT + r"$|(^|/)__tests__/.*\." + JS_EXT + r"$")

#: Extra folder names a scan of source skips as tests (beyond :data:`TEST_DIRS`).
SOURCE_SCAN_TEST_DIRS = frozenset({"__test__", "specs"})
_SOURCE_SCAN_TEST_NAME = re.compile(
    r"^test_.*\.py$|_test\.py$|^conftest\.py$|\.(?:test|spec)\." + JS_EXT + r"$", re.IGNORECASE
)
#: Java/Kotlin test class names Maven and Gradle run (case-sensitive: ``Latest.java`` is code).
_SOURCE_SCAN_JVM_TEST = re.compile(r"(?:Tests?|IT|TestCase)\.(?:java|kt)$")

#: Folders ``node --test`` treats as test folders.
NODE_TEST_DIRS = ("test", "tests", "__tests__", "spec")
_NODE_TEST_NAME = re.compile(r"[._-](test|spec)\.[cm]?[jt]s$|^test\.[cm]?[jt]s$")


def is_test_path(path):
    # type: (str) -> bool
    """True when ``path`` (repository-relative, ``/``-separated) is a test file or test data.

    Rules, in order:

    * any *directory* component named as in :data:`TEST_DIRS` (``test``, ``tests``,
      ``__tests__``, ``spec``, ``testing``, ``testdata`` (Go), ``__snapshots__`` or
      ``__mocks__`` (Jest)), compared lower-case, or ending in ``.test``/``.tests``
      (``MyLib.Tests/``) — so fixtures and data under a test directory count too;
    * a test source set right under a ``src`` folder (:data:`SOURCE_SET_RE`:
      ``src/androidTest``, ``src/integrationTest``, ``src/testFixtures``, ``src/it``); Java and
      Kotlin tests are found by their folders only (``src/test/java``): Maven and Gradle run
      ``*Test.java`` only from a test source root, and ``src/main/.../TestUtils.java`` is code;
    * file names ``test_*.py``, ``*_test.py``, ``conftest.py``, ``tests.py`` (Django),
      ``*_test.go``, ``*.test.{js,jsx,ts,tsx,mjs,cjs,mts,cts}``, ``*.spec.{same}``,
      ``*_spec.rb``, ``*_test.rb``, C/C++ ``*_test.{c,cc,cpp,cxx}``, ``*_tests.*``,
      ``*_unittest.*``, ``test_*.*``, Rust ``tests.rs``/``*_tests.rs`` (the file of a
      ``#[cfg(test)] mod tests;``) (case-sensitive, as the test runners match them). Rust's
      ``benches/`` and ``examples/`` are not tests; unit tests inside ``src/*.rs`` are split
      out of a change by :mod:`rust_tests` instead.

    Caveat: a package's own ``testing/`` helpers (``numpy/testing``) count as tests.
    """
    parts = path.strip("/").split("/")
    for i, part in enumerate(parts):
        low = part.lower()
        if i < len(parts) - 1 and (low in TEST_DIRS or low.endswith((".test", ".tests"))):
            return True
        # (the last part too: the clean room's globs cannot tell ``src/it`` the file from
        # ``src/it/`` the folder, and such a file is no source anyway)
        if i and parts[i - 1] == "src" and SOURCE_SET_RE.match(part):
            return True
    return bool(TEST_FILE_RE.match(parts[-1]))


def is_test_source(path):
    # type: (str) -> bool
    """True when a scan of the repository's source should skip ``path`` as a test.

    :func:`is_test_path`, or a folder named ``specs``/``__test__`` (any case), or a test-like
    file name in any case (``Test_x.py``, ``X.Spec.ts``), or a Java/Kotlin test class name
    (``FooTest.java``, ``FooIT.kt``) wherever it lives: a definition found in such a file is
    not part of the code under test.
    """
    if is_test_path(path):
        return True
    parts = path.strip("/").split("/")
    if any(p.lower() in SOURCE_SCAN_TEST_DIRS for p in parts[:-1]):
        return True
    return bool(_SOURCE_SCAN_TEST_NAME.search(parts[-1]) or _SOURCE_SCAN_JVM_TEST.search(parts[-1]))


def is_node_test_candidate(path):
    # type: (str) -> bool
    """True when ``node --test`` would consider ``path`` (a JS/TS file) a test: named
    ``*.test.js``/``*-test.js``/``*_test.js``/``test.js`` (``spec`` too), or under a test
    folder (:data:`NODE_TEST_DIRS`)."""
    parts = path.strip("/").split("/")
    if _NODE_TEST_NAME.search(parts[-1]):
        return True
    return any(p in NODE_TEST_DIRS for p in parts[:-1])
