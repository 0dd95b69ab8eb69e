"""The required interface of Go and Rust tests: new exported names the changed tests use, with
signatures from the fixed source, never bodies, never a name the tests do not use."""

from __future__ import annotations

from pathlib import Path

from repogym.pipelines._instructions.interface import render_interface, required_interface
from repogym.pipelines._instructions.interface.golang import go_decls


def snapshot(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


GO_BASE = """\
package uuid

import "time"

// UUID is a universally unique identifier.
type UUID [16]byte

// NewV6 returns a version 6 UUID.
func NewV6() (UUID, error) {
	return NewV6WithTimeHelper(nil)
}

func NewV6WithTimeHelper(t *time.Time) (UUID, error) { return UUID{}, nil }

// String formats the UUID.
func (u UUID) String() string { return "" }
"""

GO_HEAD = (
    GO_BASE
    + """
// NewV6WithTime returns a version 6 UUID for the time t.
func NewV6WithTime(t *time.Time) (UUID, error) {
	secret := 42
	_ = secret
	return UUID{}, nil
}

// Clock is the time source.
type Clock interface {
	Now() time.Time
}

// Time returns the time stored in a version 6 UUID.
func (u UUID) Time() time.Time { return time.Time{} }

// Unused is new but no test names it.
func Unused() {}

const (
	// Version6 is the version of NewV6 UUIDs.
	Version6 Version = 6
	hidden = 1
)
"""
)

GO_TEST = """\
package uuid

import (
	"testing"
	"time"
)

func TestNewV6WithTime(t *testing.T) {
	now := time.Now()
	u, err := NewV6WithTime(&now)
	if err != nil || u.Time().IsZero() || u.String() == "" {
		t.Fatal(err)
	}
	var _ Clock
	_ = Version6
}
"""

GO_EXTERNAL_TEST = """\
package uuid_test

import (
	"testing"

	gouuid "example.com/uuid"
)

func TestExternal(t *testing.T) {
	_, _ = gouuid.NewV6WithTime(nil)
}
"""


def go_case(tmp_path: Path, test: str) -> list:  # type: ignore[type-arg]
    files = {"go.mod": "module example.com/uuid\n\ngo 1.21\n", "uuid.go": GO_BASE}
    base = snapshot(tmp_path / "base", files)
    head = snapshot(tmp_path / "head", {**files, "uuid.go": GO_HEAD, "uuid_test.go": test})
    return required_interface(base, head, ["uuid_test.go"], ["TestNewV6WithTime"])


def test_go_internal_test_package(tmp_path: Path) -> None:
    items = go_case(tmp_path, GO_TEST)
    got = {(i.kind, i.name, i.signature) for i in items}
    assert got == {
        ("function", "NewV6WithTime", "func NewV6WithTime(t *time.Time) (UUID, error)"),
        ("method", "UUID.Time", "func (u UUID) Time() time.Time"),
        ("class", "Clock", "type Clock interface"),
        ("attribute", "Version6", "const Version6 Version"),
    }
    text = render_interface(items)
    assert "- `uuid.go`: new function `func NewV6WithTime(t *time.Time) (UUID, error)`" in text
    assert "- `uuid.go`: new method `UUID.Time`: `func (u UUID) Time() time.Time`" in text
    assert "secret" not in text and "Unused" not in text and "String" not in text
    assert "`const hidden" not in text


def test_go_external_test_package(tmp_path: Path) -> None:
    items = go_case(tmp_path, GO_EXTERNAL_TEST)
    assert [(i.name, i.where) for i in items] == [("NewV6WithTime", "uuid.go")]


def test_go_declarations() -> None:
    text = (
        "package p\n\nfunc Any() interface{} { return nil }\n"
        "func Map[T any](xs []T, f func(T) T) []T { return nil }\n"
        "func (l *List[T]) Push(v T) {}\n"
        "type Option func(*cfg) error\n"
        "var ErrBad = errors.New(`bad {`)\n"
    )
    assert [(d.kind, d.name, d.signature) for d in go_decls(text, "p.go")] == [
        ("function", "Any", "func Any() interface{}"),
        ("function", "Map", "func Map[T any](xs []T, f func(T) T) []T"),
        ("method", "List.Push", "func (l *List[T]) Push(v T)"),
        ("class", "Option", "type Option func(*cfg) error"),
        ("attribute", "ErrBad", "var ErrBad"),
    ]


RS_BASE = """\
pub struct Pair {
    pub left: u32,
    pub right: u32,
}

impl Pair {
    pub fn new(left: u32, right: u32) -> Self {
        Pair { left, right }
    }
}

fn helper() -> u32 {
    1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds() {
        assert_eq!(Pair::new(1, 2).left, 1);
    }
}
"""

RS_HEAD = RS_BASE.replace(
    "impl Pair {\n",
    "impl Pair {\n    /// Both numbers added.\n    pub fn sum(&self) -> u32 {\n"
    "        self.left + self.right + helper() - 1\n    }\n\n"
    "    pub fn swapped(\n        &self,\n    ) -> Pair {\n        Pair::new(self.right, self.left)\n    }\n\n",
).replace(
    "fn helper()",
    "/// Reads `3:4`.\npub fn parse_pair(s: &str) -> Option<Pair> {\n    let secret = s.len();\n"
    "    None\n}\n\nfn private_new() -> u8 { 0 }\n\nfn unused_new() {}\n\nfn helper()",
)

RS_TESTS = """\
#[cfg(test)]
mod tests {
    use super::*;

    fn local_helper() {}

    #[test]
    fn sums() {
        let p = crate::parse_pair("3:4").unwrap();
        assert_eq!(p.sum(), 7);
        assert_eq!(Pair::swapped(&p).left, 4);
        assert_eq!(private_new(), 0);
        assert_eq!(p.len(), 2);
        local_helper();
    }
}"""


def test_rust_inline_tests(tmp_path: Path) -> None:
    cargo = '[package]\nname = "pairs"\nversion = "0.1.0"\n'
    base = snapshot(tmp_path / "base", {"Cargo.toml": cargo, "src/lib.rs": RS_BASE})
    head_lib = RS_HEAD.replace(RS_BASE[RS_BASE.index("#[cfg(test)]") :], RS_TESTS + "\n")
    head = snapshot(tmp_path / "head", {"Cargo.toml": cargo, "src/lib.rs": head_lib})
    items = required_interface(
        base, head, ["src/lib.rs"], ["tests::sums"], {"src/lib.rs": RS_TESTS.encode()}
    )
    got = {(i.kind, i.name, i.signature) for i in items}
    assert got == {
        ("function", "parse_pair", "pub fn parse_pair(s: &str) -> Option<Pair>"),
        ("method", "Pair::sum", "pub fn sum(&self) -> u32"),
        ("method", "Pair::swapped", "pub fn swapped(&self) -> Pair"),
        ("function", "private_new", "fn private_new() -> u8"),  # inline tests reach it
    }
    text = render_interface(items)
    assert "- `src/lib.rs`: new method `Pair::sum`: `pub fn sum(&self) -> u32`" in text
    assert "secret" not in text and "unused_new" not in text and "self.left" not in text
    # Without the hidden copy, head's file gives the same test code.
    assert required_interface(base, head, ["src/lib.rs"], ["tests::sums"]) == items


def test_rust_integration_tests_reach_public_items_only(tmp_path: Path) -> None:
    cargo = '[package]\nname = "my-pairs"\nversion = "0.1.0"\n'
    test = (
        'use my_pairs::parse_pair;\n\n#[test]\nfn t() {\n    let p = parse_pair("1:2");\n'
        "    assert!(my_pairs::Pair::new(1, 2).sum() == 3 && private_new() == 0);\n}\n"
    )
    base = snapshot(tmp_path / "base", {"Cargo.toml": cargo, "src/lib.rs": RS_BASE})
    head = snapshot(
        tmp_path / "head", {"Cargo.toml": cargo, "src/lib.rs": RS_HEAD, "tests/it.rs": test}
    )
    items = required_interface(base, head, ["tests/it.rs"], ["t"])
    assert [i.name for i in items] == ["Pair::sum", "parse_pair"]


def test_go_method_on_a_typed_variable(tmp_path: Path) -> None:
    """``Resize`` exists on another type in the base: the call counts only because the test's
    variable comes from a constructor that returns the type that gains it."""
    base_src = (
        "package lru\n\ntype Cache struct{ n int }\n\nfunc (c *Cache) Resize(n int) int "
        "{ return 0 }\n\ntype TwoQueue[K comparable] struct{ n int }\n\n"
        "func New2Q[K comparable](n int) (*TwoQueue[K], error) { return nil, nil }\n"
    )
    head_src = base_src + "\nfunc (c *TwoQueue[K]) Resize(n int) (evicted int) { return 0 }\n"
    test = (
        'package lru\n\nimport "testing"\n\nfunc TestResize(t *testing.T) {\n'
        "\tl, err := New2Q[int](4)\n\t_ = err\n\tl.Resize(2)\n}\n"
    )
    files = {"go.mod": "module example.com/lru\n"}
    base = snapshot(tmp_path / "base", {**files, "lru.go": base_src})
    head = snapshot(tmp_path / "head", {**files, "lru.go": head_src, "lru_test.go": test})
    items = required_interface(base, head, ["lru_test.go"], ["TestResize"])
    assert [(i.name, i.signature) for i in items] == [
        ("TwoQueue.Resize", "func (c *TwoQueue[K]) Resize(n int) (evicted int)")
    ]
    untyped = test.replace("l, err := New2Q[int](4)", "l, err := make2Q()")
    (head / "lru_test.go").write_text(untyped)
    assert required_interface(base, head, ["lru_test.go"], ["TestResize"]) == []
