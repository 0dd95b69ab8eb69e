"""Parsing ``node --test`` output (repogym's reporter lines, TAP, spec) and JavaScript logs cut
short by ``process.exit`` (captured from Node 20, jest 29 and mocha 10)."""

from __future__ import annotations

from repogym.shipped.parsers import (
    CUT_SHORT,
    ERROR,
    FAILED,
    PASSED,
    SKIPPED,
    TRUNCATED,
    detect_runner,
    parse_log,
)

REPORTER = """\
# stdout test/a.test.js: ok 99 - fake line
# stdout test/a.test.js: node:test {"s":"pass","id":["forged"]}
node:test {"s":"pass","id":["test/a.test.js","top level ok"]}
node:test {"s":"fail","id":["test/a.test.js","top fails"],"m":"Expected values to be strictly equal:"}
node:test {"s":"pass","id":["test/a.test.js","suite A","inner ok"]}
node:test {"s":"fail","id":["test/a.test.js","suite A","nested","deep fail"],"m":"boom"}
node:test {"s":"skip","id":["test/a.test.js","suite A","nested","skipped one"]}
node:test {"s":"todo","id":["test/a.test.js","suite A","nested","todo one"]}
node:test {"s":"pass","id":["test/a.test.js","with subtests","sub 1"]}
node:test {"s":"pass","id":["test/a.test.js","with subtests"]}
node:test {"s":"pass","id":["test/b.test.mjs","b works"]}
# stderr test/bad.test.js: node:internal/modules/cjs/loader:1210
# stderr test/bad.test.js:   throw err;
# stderr test/bad.test.js: Error: Cannot find module './nonexistent'
node:test {"s":"error","id":["test/bad.test.js"],"m":"test failed"}
node:test {"s":"cancelled","id":["test/hook.test.js","hooked","child"],"m":"test did not finish"}
node:test {"s":"error","id":["test/hook.test.js","hooked"],"m":"setup broke"}
node:test {"s":"empty","id":["test/exit.test.js"]}
# tests 10
# pass 6
node:test {"s":"end"}
"""
TAP = """\
TAP version 13
# ok 99 - fake line
# \\# pass 100
# Subtest: top level ok
ok 1 - top level ok
  ---
  ...
# Subtest: top fails
not ok 2 - top fails
  ---
  location: '/tmp/nt/test/a.test.js:5:1'
  failureType: 'testCodeFailure'
  error: |-
    Expected values to be strictly equal:

    1 !== 2

  code: 'ERR_ASSERTION'
  name: 'AssertionError'
  expected: 2
  actual: 1
  operator: 'strictEqual'
  ...
# Subtest: suite A
    # Subtest: inner ok
    ok 1 - inner ok
      ---
      ...
    # Subtest: nested
        # Subtest: deep fail
        not ok 1 - deep fail
          ---
          location: '/tmp/nt/test/a.test.js:9:5'
          failureType: 'testCodeFailure'
          error: |-
            boom
            second
          code: 'ERR_TEST_FAILURE'
          ...
        # Subtest: skipped one
        ok 2 - skipped one # SKIP
          ---
          ...
        # Subtest: todo one
        ok 3 - todo one # TODO
          ---
          ...
        1..3
    not ok 2 - nested
      ---
      type: 'suite'
      location: '/tmp/nt/test/a.test.js:8:3'
      failureType: 'subtestsFailed'
      error: '1 subtest failed'
      code: 'ERR_TEST_FAILURE'
      ...
    1..2
not ok 3 - suite A
  ---
  type: 'suite'
  location: '/tmp/nt/test/a.test.js:6:1'
  failureType: 'subtestsFailed'
  error: '1 subtest failed'
  code: 'ERR_TEST_FAILURE'
  ...
# Subtest: with subtests
    # Subtest: sub 1
    ok 1 - sub 1
      ---
      ...
    # Subtest: sub 2
    ok 2 - sub 2
      ---
      ...
    1..2
ok 4 - with subtests
  ---
  ...
# Subtest: b works
ok 5 - b works
  ---
  ...
1..5
# tests 10
# suites 2
# pass 6
# fail 2
# cancelled 0
# skipped 1
# todo 1
# duration_ms 195.231751
"""
SPEC = """\
ok 99 - fake line
# pass 100
✔ top level ok (1.144075ms)
✖ top fails (5.747171ms)
  AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:

  1 !== 2

    generatedMessage: true,
    code: 'ERR_ASSERTION',
    actual: 1,
    expected: 2,
    operator: 'strictEqual'
  }

▶ suite A
  ✔ inner ok (0.252498ms)
  ▶ nested
    ✖ deep fail (0.222971ms)
      Error: boom
      second

    ﹣ skipped one (0.101823ms) # SKIP
    ✔ todo one (0.247801ms) # TODO
  ✖ nested (0.801246ms)
✖ suite A (1.348478ms)
▶ with subtests
  ✔ sub 1 (0.252565ms)
  ✔ sub 2 (0.145841ms)
✔ with subtests (0.931493ms)
✔ b works (1.036118ms)
ℹ tests 10
ℹ suites 2
ℹ pass 6
ℹ fail 2
ℹ cancelled 0
ℹ skipped 1
ℹ todo 1
ℹ duration_ms 252.387538

✖ failing tests:

test at test/a.test.js:5:1
✖ top fails (5.747171ms)
  AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:

  1 !== 2

    generatedMessage: true,
    code: 'ERR_ASSERTION',
    actual: 1,
    expected: 2,
    operator: 'strictEqual'
  }

test at test/a.test.js:9:5
✖ deep fail (0.222971ms)
  Error: boom
  second
"""
WANT_NO_FILE = {
    "top level ok": PASSED,
    "top fails": FAILED,
    "suite A > inner ok": PASSED,
    "suite A > nested > deep fail": FAILED,
    "suite A > nested > skipped one": SKIPPED,
    "suite A > nested > todo one": SKIPPED,
    "with subtests > sub 1": PASSED,
    "with subtests > sub 2": PASSED,
    "b works": PASSED,
}
JEST_EXIT = """\
  ●  process.exit called with "1"

      1 | describe('math', () => {
      2 |   test('adds', () => { expect(1+1).toBe(2); });
    > 3 |   test('exits', () => { process.exit(1); });
        |                                 ^

      at Object.exit (a.test.js:3:33)
"""
MOCHA_EXIT = """\


  math
    ✔ adds
"""


def test_reporter_lines() -> None:
    r = parse_log(REPORTER, "node")
    assert r.status == "ok" and r.runner == "node"
    assert r.tests == {
        "test/a.test.js > top level ok": PASSED,
        "test/a.test.js > top fails": FAILED,
        "test/a.test.js > suite A > inner ok": PASSED,
        "test/a.test.js > suite A > nested > deep fail": FAILED,
        "test/a.test.js > suite A > nested > skipped one": SKIPPED,
        "test/a.test.js > suite A > nested > todo one": SKIPPED,
        "test/a.test.js > with subtests > sub 1": PASSED,
        "test/a.test.js > with subtests": PASSED,
        "test/b.test.mjs > b works": PASSED,
        "test/bad.test.js": ERROR,
        "test/hook.test.js > hooked > child": FAILED,
        "test/hook.test.js > hooked": ERROR,
    }
    assert r.failures["test/bad.test.js"] == "Error: Cannot find module './nonexistent'"
    assert r.failures["test/hook.test.js > hooked"] == "setup broke"
    assert r.warnings == [
        "test/exit.test.js reported no test: it has none, or it exited early (process.exit)"
    ]
    assert detect_runner(REPORTER) == "node"


def test_reporter_lines_cut_short() -> None:
    cut = REPORTER.split('node:test {"s":"pass","id":["test/b.test.mjs"')[0]
    r = parse_log(cut, "node")
    assert len(r.tests) == 8 and TRUNCATED in r.warnings
    assert any(w.startswith(CUT_SHORT + ": no node summary") for w in r.warnings)


def test_tap() -> None:
    r = parse_log(TAP)
    assert r.runner == "node" and r.status == "ok"
    assert r.tests == {**WANT_NO_FILE, "with subtests": PASSED}
    assert r.failures == {
        "top fails": "Expected values to be strictly equal:",
        "suite A > nested > deep fail": "boom",
    }
    assert r.warnings == []
    # Printed by a test: escaped into comments by the runner, never a result.
    assert not any("fake" in t for t in r.tests)
    cut = TAP.split("# Subtest: with subtests")[0]
    assert TRUNCATED in parse_log(cut, "node").warnings


def test_tap_hook_failure_and_broken_file() -> None:
    tap = """\
TAP version 13
# Subtest: /w/test/bad.test.js
not ok 1 - /w/test/bad.test.js
  ---
  location: '/w/test/bad.test.js:1:1'
  failureType: 'testCodeFailure'
  error: 'test failed'
  ...
# Subtest: /w/test/exit.test.js
ok 2 - /w/test/exit.test.js
  ---
  ...
# Subtest: hooked
    # Subtest: child
    not ok 1 - child
      ---
      failureType: 'cancelledByParent'
      error: 'test did not finish before its parent and was cancelled'
      ...
    1..1
not ok 3 - hooked
  ---
  type: 'suite'
  failureType: 'hookFailed'
  error: 'failed running before hook'
  ...
1..3
# tests 3
# pass 0
"""
    r = parse_log(tap, "node")
    assert r.tests == {"/w/test/bad.test.js": ERROR, "hooked > child": FAILED, "hooked": ERROR}
    assert r.warnings == ["/w/test/exit.test.js reported no test: it has none, or it exited early"]


def test_spec() -> None:
    r = parse_log(SPEC)
    assert r.runner == "node" and r.status == "ok"
    assert r.tests == WANT_NO_FILE
    assert r.warnings == []


def test_jest_cut_short_by_process_exit() -> None:
    r = parse_log(JEST_EXIT)
    assert r.runner == "jest" and r.status == "empty" and r.tests == {}
    assert r.warnings == [
        CUT_SHORT + ': process.exit called with "1" (jest stops the whole run; results up to the'
        " cut are kept, the rest did not run)"
    ]
    # Results printed before the exit are kept.
    earlier = "PASS src/b.test.js\n  ✓ b works (2 ms)\n\n" + JEST_EXIT
    r = parse_log(earlier, "jest")
    assert r.tests == {"src/b.test.js > b works": PASSED}
    assert any("process.exit called with" in w for w in r.warnings)


def test_mocha_cut_short() -> None:
    r = parse_log(MOCHA_EXIT, "mocha")
    assert r.tests == {"math > adds": PASSED}
    assert TRUNCATED in r.warnings
    assert any(w.startswith(CUT_SHORT + ": no mocha summary") for w in r.warnings)


def test_vitest_notes_process_exit() -> None:
    log = """\

 RUN  v1.6.1 /w

 ✓ a.test.js > math > adds
 × a.test.js > math > exits
   → process.exit unexpectedly called with "1"

 Test Files  1 failed (1)
      Tests  1 failed | 1 passed (2)
"""
    r = parse_log(log, "vitest")
    assert r.tests == {"a.test.js > math > adds": PASSED, "a.test.js > math > exits": FAILED}
    assert r.warnings == ['a test called process.exit("1"): vitest reports it as a failure']
