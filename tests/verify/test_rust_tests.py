"""The Rust inline-test scanner (shipped as ``tests/rust_tests.py``): test modules found with
braces matched past strings, raw strings, chars, lifetimes and nested comments; the split of a
change into gold code and hidden tests; the splice that puts hidden tests into an agent's file."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from repogym.shipped import rust_tests as rt

TRICKY = r"""//! Crate docs { with a brace
#![allow(dead_code)]
use std::fmt;

/// Parses. `}` in docs.
pub fn parse<'a>(s: &'a str) -> Result<u8, &'static str> {
    let c = '{';
    let q = '\'';
    let b = b'}';
    let e = '\\';
    let u = '\u{1F600}';
    let x = '\x7d';
    let raw = r#"}" #[cfg(test)] mod fake { "#;
    let raw2 = br##"}"# }"##;
    let s2 = "}\" {";
    let r#type = 1;
    /* nested /* } */ { */
    // } line comment
    'outer: loop { break 'outer; }
    if c == '}' { Ok(1) } else { Err("x") }
}

mod inner {
    #[cfg(test)]
    mod nested_tests { }
}

impl<'a> fmt::Display for Wrapper<'a> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { write!(f, "{{}}") }
}

/// The tests.
#[cfg(test)]
#[allow(unused)]
mod tests {
    use super::*;
    #[test]
    fn t() { assert_eq!(parse("{").unwrap(), 1); let _ = r##"}}"#"##; let _ = '"'; }
}

#[cfg(all(test, feature = "x"))]
pub(crate) mod more_tests { fn f() { let _ = "}"; } }

#[cfg(not(test))]
mod real { }

#[cfg(test)]
mod outline;
"""


def spans_text(text: str) -> list[str]:
    return [text[a:b] for a, b in rt.test_items(text)]


def test_finds_top_level_test_items_only() -> None:
    found = spans_text(TRICKY)
    assert len(found) == 3
    assert found[2] == "#[cfg(test)]\nmod outline;"
    assert found[0].startswith("/// The tests.\n#[cfg(test)]\n#[allow(unused)]\nmod tests {")
    assert found[0].endswith("let _ = '\"'; }\n}")
    assert found[1].startswith('#[cfg(all(test, feature = "x"))]\npub(crate) mod more_tests')
    assert found[1].endswith("} }")


@pytest.mark.parametrize(
    "text",
    [
        'fn f() { let s = "unclosed; }',
        "fn f() { /* unclosed /* nested */ }",
        'fn f() { let s = r#"unclosed"; }',
        "fn f() { if x { }",
        "fn f() { ) }",
        "}",
    ],
)
def test_unreadable_files_raise(text: str) -> None:
    with pytest.raises(rt.RustSyntaxError):
        rt.test_items(text)


def test_cfg_predicates() -> None:
    for attr, hit in [
        ("cfg(test)", True),
        ("cfg( test )", True),
        ('cfg(all(test, feature = "std"))', True),
        ("cfg(not(test))", False),
        ("cfg(any(test, doc))", False),
        ("cfg(tests)", False),
        ("cfg_attr(test, allow(x))", False),
        ("test", True),
        ("tokio :: test", True),
        ("testing", False),
        ("should_panic", False),
    ]:
        text = f"#[{attr}]\nmod m {{ }}\n"
        assert bool(rt.test_items(text)) is hit, attr


@pytest.mark.parametrize(
    ("item", "after"),
    [
        ("#[test]\nfn t() { assert!(g() == [0u8; 2]); }", "fn after() {}"),
        ("#[test]\n#[should_panic]\npub async fn t() -> Result<(), E> { Ok(()) }", "fn after() {}"),
        ("#[cfg(test)]\nuse std::collections::{HashMap, HashSet};", "fn after() {}"),
        ("#[cfg(test)]\nconst C: S = S { a: [1; 2] };", "struct After;"),
        ("#[cfg(test)]\nstatic V: &[u8] = &[1, 2];", "fn after() {}"),
        ("#[cfg(test)]\nconst fn helper() -> u8 { 1 }", "fn after() {}"),
        ("#[cfg(test)]\nstruct Fixture(u8);", "fn after() {}"),
        ("#[cfg(test)]\nstruct Fixture<T = u8> { t: T }", "fn after() {}"),
        (
            "#[cfg(test)]\nimpl<T: Fn() -> ()> Helper for W<T> where T: Copy { fn h() {} }",
            "fn a() {}",
        ),
        ("#[cfg(test)]\nextern crate quickcheck;", "fn after() {}"),
        ("#[cfg(test)]\nmacro_rules! m { ($x:expr) => { $x }; }", "fn after() {}"),
    ],
)
def test_test_items_of_every_kind(item: str, after: str) -> None:
    text = f"fn before() {{ }}\n\n{item}\n\n{after}\n"
    assert spans_text(text) == [item]


HEAD = """\
pub fn add(a: i32, b: i32) -> i32 {
    a + b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds() {
        assert_eq!(add(1, 2), 3);
    }

    #[test]
    fn adds_negative() {
        assert_eq!(add(-1, -2), -3);
    }
}
"""
BASE = HEAD.replace("a + b", "a - b").split("\n    #[test]\n    fn adds_negative")[0] + "\n}\n"


def test_split_and_splice_round_trip() -> None:
    gold, hidden = rt.split(BASE, HEAD)
    assert "a + b" in gold and "adds_negative" not in gold and "fn adds()" in gold
    assert hidden.startswith("#[cfg(test)]") and "adds_negative" in hidden
    assert rt.splice(gold, hidden) == HEAD  # the oracle's file, restored, is the head
    before = rt.splice(BASE, hidden)  # the nop's file
    assert "a - b" in before and "adds_negative" in before
    assert rt.split(BASE, BASE) is None  # tests unchanged: nothing to hide
    assert rt.split(BASE, HEAD.replace("#[cfg(test)]\nmod tests", "mod tests")) is None


def test_top_level_test_functions_split() -> None:
    base = "pub fn one() -> u8 { 2 }\n\n#[test]\nfn old() { assert!(true); }\n"
    head = base.replace("{ 2 }", "{ 1 }") + "\n#[test]\nfn new() { assert_eq!(one(), 1); }\n"
    gold, hidden = rt.split(base, head)
    assert gold == base.replace("{ 2 }", "{ 1 }")
    assert (
        hidden
        == "#[test]\nfn old() { assert!(true); }\n\n#[test]\nfn new() { assert_eq!(one(), 1); }"
    )
    assert "fn new()" in rt.splice(base, hidden) and rt.splice(gold, hidden).count("#[test]") == 2


def test_splice_replaces_whatever_the_agent_left() -> None:
    _, hidden = rt.split(BASE, HEAD)
    fixed = BASE.replace("a - b", "a + b")
    weakened = fixed.replace("assert_eq!(add(1, 2), 3);", "assert!(true);")
    deleted = fixed.split("#[cfg(test)]")[0]
    extra = fixed + "\n#[cfg(test)]\nmod tests2 { #[test] fn x() {} }\n"
    for agent in (weakened, deleted, extra):
        out = rt.splice(agent, hidden)
        assert out.count("#[cfg(test)]") == 1 and hidden in out
        assert "assert!(true)" not in out and "tests2" not in out
    # a file with no test module gets them at its end; an empty one is just them
    assert rt.splice(deleted, hidden).endswith(hidden + "\n")
    assert rt.splice("", hidden) == hidden + "\n"


def test_splice_at_says_where_the_hidden_items_start() -> None:
    """Canaries planted by the hidden copy's line numbers are shifted by this offset."""
    _, hidden = rt.split(BASE, HEAD)
    fixed = BASE.replace("a - b", "a + b")
    for agent in (fixed, fixed.split("#[cfg(test)]")[0], "", "// one line\n" * 3 + fixed):
        out, start = rt.splice_at(agent, hidden)
        assert out == rt.splice(agent, hidden)
        assert out[start:].startswith(hidden) and (start == 0 or out[start - 1] == "\n")


def test_new_file_and_nested_agent_module() -> None:
    gold, hidden = rt.split(None, HEAD)
    assert "mod tests" not in gold and "pub fn add" in gold
    # A test module the agent nests in a module of its own is not where the hidden ones go.
    agent = gold + "\nmod evil {\n    #[cfg(test)]\n    mod tests { }\n}\n"
    out = rt.splice(agent, hidden)
    assert out.endswith(hidden + "\n") and out.index("mod evil") < out.index(hidden)


# --------------------------------------------------------------- generated files (hypothesis)

NOISE = st.sampled_from(
    [
        'let s = "}";',
        'let s = "{\\"}";',
        "let c = '}';",
        "let c = '\\'';",
        'let r = r#"}"#;',
        'let r = r##""# }"##;',
        'let b = b"{";',
        "/* } /* { */ */",
        "// }\n",
        "fn g<'a>(x: &'a str) -> &'a str { x }",
        "'l: loop { break 'l; }",
        "let v = [0u8; 3];",
        "if a { b } else { c }",
        "let x = 1.5e3;",
        'println!("{}", "#[cfg(test)] mod fake {");',
    ]
)


@st.composite
def rust_files(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A file of functions and modules with noisy bodies, and the test modules it holds."""
    items, modules = [], []
    for i in range(draw(st.integers(1, 6))):
        body = "\n    ".join(draw(st.lists(NOISE, max_size=4)))
        kind = draw(st.sampled_from(["fn", "mod", "test", "nested"]))
        if kind == "fn":
            items.append(f"pub fn f{i}() {{\n    {body}\n}}")
        elif kind == "mod":
            items.append(f"mod m{i} {{\n    fn h() {{ {body} }}\n}}")
        elif kind == "nested":
            items.append(f"mod n{i} {{\n    #[cfg(test)]\n    mod tests {{ {body} }}\n}}")
        else:
            module = f"#[cfg(test)]\nmod t{i} {{\n    #[test]\n    fn t() {{ {body} }}\n}}"
            items.append(module)
            modules.append(module)
    return "\n\n".join(items) + "\n", modules


@settings(max_examples=300, deadline=None)
@given(rust_files())
def test_generated_files(case: tuple[str, list[str]]) -> None:
    text, modules = case
    assert spans_text(text) == modules
    code, _anchor = rt.remove_spans(text, rt.test_items(text))
    assert rt.test_items(code) == []
    hidden = "#[cfg(test)]\nmod tests { #[test] fn new() {} }"
    out = rt.splice(text, hidden)
    assert spans_text(out) == [hidden]


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("{}()[]\"'#/*r! \nabcmod_;")), max_size=60))
def test_arbitrary_text_never_crashes(text: str) -> None:
    try:
        spans = rt.test_items(text)
    except rt.RustSyntaxError:
        return
    assert all(0 <= a < b <= len(text) for a, b in spans)
