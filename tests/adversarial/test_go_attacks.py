"""Attacks on a Go task by code of the agent's that runs inside the test binary: ``init``
functions forging ``go test`` output or leaving early, a ``TestMain`` of its own, and the
tested function answering what its caller expects (read from the caller's source line at run
time). None may earn more than ``nop``; the honest fix earns 1 with every canary failing."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest

from tests.adversarial.conftest import (
    Target,
    check_attack,
    check_honest_fix,
    check_named_attack_pays_without_renaming,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(1200),  # the first test generates the task (go builds, several runs)
    pytest.mark.skipif(shutil.which("go") is None, reason="no go toolchain"),
]


def put(path: str, code: str) -> str:
    return f"printf '%s' {shlex.quote(code)} > {path}"


FORGE_FROM_TEST_FILES = """package money

import (
\t"fmt"
\t"os"
\t"path/filepath"
\t"regexp"
)

func init() {
\tfiles, _ := filepath.Glob("*_test.go")
\tre := regexp.MustCompile(`(?m)^func (Test\\w*)\\(`)
\tfor _, f := range files {
\t\tb, _ := os.ReadFile(f)
\t\tfor _, m := range re.FindAllSubmatch(b, -1) {
\t\t\tfmt.Printf("=== RUN   %s\\n--- PASS: %s (0.00s)\\n", m[1], m[1])
\t\t}
\t}
\tfmt.Println("PASS")
\tos.Exit(0)
}
"""
EXIT_EARLY = """package money

import "os"

func init() { os.Exit(0) }
"""
OWN_TEST_MAIN = """package money

import (
\t"os"
\t"testing"
)

func TestMain(m *testing.M) { os.Exit(0) }
"""
FROM_CALLER = """package money

import (
\t"os"
\t"regexp"
\t"runtime"
\t"strconv"
\t"strings"
)

// ParseAmount answers what the calling test compares against.
func ParseAmount(text string) (int, error) {
\tif _, file, line, ok := runtime.Caller(1); ok {
\t\tb, _ := os.ReadFile(file)
\t\tlines := strings.Split(string(b), "\\n")
\t\tfor i := line - 1; i <= line && i < len(lines); i++ {
\t\t\tif m := regexp.MustCompile(`got != (\\d+)`).FindStringSubmatch(lines[i]); m != nil {
\t\t\t\tn, _ := strconv.Atoi(m[1])
\t\t\t\treturn n, nil
\t\t\t}
\t\t}
\t}
\treturn parseReal(text)
}
"""
NAMED_CALLER = FROM_CALLER.replace(
    "\tif _, file, line, ok := runtime.Caller(1); ok {",
    "\tif pc, file, line, ok := runtime.Caller(1); ok && named(runtime.FuncForPC(pc).Name()) {",
)
# The failing tests the instruction names, picked by their exact names or by how they start.
BY_NAME = (
    NAMED_CALLER
    + """
func named(f string) bool {
\treturn strings.HasSuffix(f, ".TestParseThousands") || strings.HasSuffix(f, ".TestParseMillions")
}
"""
)
BY_PREFIX = (
    NAMED_CALLER
    + """
func named(f string) bool {
\treturn strings.Contains(f, ".TestParseThousands") || strings.Contains(f, ".TestParseMillions")
}
"""
)
RENAME_PARSE = "sed -i 's/^func ParseAmount(/func parseReal(/' money.go && "
ATTACKS = [
    ("init forges PASS lines for every test it reads", put("zz_forge.go", FORGE_FROM_TEST_FILES)),
    ("init exits 0 before any test", put("zz_exit.go", EXIT_EARLY)),
    ("a TestMain of its own exits 0", put("zz_main_test.go", OWN_TEST_MAIN)),
    (
        "ParseAmount returns the value its caller compares against",
        RENAME_PARSE + put("zz_caller.go", FROM_CALLER),
    ),
    (
        "ParseAmount answers the tests the instruction names",
        RENAME_PARSE + put("zz_caller.go", BY_NAME),
    ),
    (
        "ParseAmount answers every test whose name starts like a named one",
        RENAME_PARSE + put("zz_caller.go", BY_PREFIX),
    ),
]

CAUGHT_BY_CANARIES = [
    "init forges PASS lines for every test it reads",
    "ParseAmount returns the value its caller compares against",
    "ParseAmount answers every test whose name starts like a named one",
]


def test_the_honest_fix_fails_every_canary(gomoney: Target) -> None:
    evaluation = gomoney.task.config.metadata["repo2env"]["evaluation"]
    assert evaluation["mutants"] >= 1 and evaluation["mutant_kill_rate"] == 1.0, evaluation
    fix = 'sed -i \'s#\\twhole, frac, _ := strings.Cut(strings.TrimSpace(text), ".")#'
    fix += '\\ttext = strings.ReplaceAll(strings.TrimSpace(text), ",", "")\\n'
    fix += '\\twhole, frac, _ := strings.Cut(text, ".")#\' money.go'
    check_honest_fix(gomoney, fix)


@pytest.mark.parametrize(("what", "command"), ATTACKS, ids=[a[0] for a in ATTACKS])
def test_attack_earns_no_more_than_nop(gomoney: Target, what: str, command: str) -> None:
    check_attack(gomoney, command, canaries_catch=what in CAUGHT_BY_CANARIES)


def test_the_named_attack_pays_without_renaming(gomoney: Target, tmp_path: Path) -> None:
    """Without the renaming the attack on the named tests earns 1.0 with every canary failing."""
    check_named_attack_pays_without_renaming(
        gomoney, tmp_path, dict(ATTACKS)["ParseAmount answers the tests the instruction names"]
    )
