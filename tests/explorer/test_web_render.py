"""The web layer's pure parts: the safe Markdown subset, the highlighter, page escaping."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from repogym.explorer.web import markdown, pages
from repogym.explorer.web.highlight import highlight_lines, language_for, tokens


def test_markdown_subset_renders_blocks_and_inline() -> None:
    html = markdown.render(
        "# Title\n\nText with **bold**, *em* and `code`.\n\n- one\n- two\n\n1. a\n2. b\n\n"
        "```python\nx = 1\n```\n\n> quoted\n\n---\n"
    )
    assert "<h2>Title</h2>" in html
    assert "<strong>bold</strong>" in html and "<em>em</em>" in html
    assert "<code>code</code>" in html
    assert "<ul><li>one</li><li>two</li></ul>" in html
    assert "<ol><li>a</li><li>b</li></ol>" in html
    assert '<pre class="code"><code class="lang-python">x = <span class="tok-num">1</span>' in html
    assert "<blockquote><p>quoted</p></blockquote>" in html
    assert "<hr>" in html


class _Tags(HTMLParser):
    """Collects the tags and attributes a browser would see."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def _tags(html: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Tags()
    parser.feed(html)
    return parser.tags


@pytest.mark.parametrize(
    "source",
    [
        "<script>alert(1)</script>",
        "<img src=x onerror=alert(1)>",
        "[x](javascript:alert(1))",
        "[x](data:text/html,<script>alert(1)</script>)",
        '[x](https://e.com/" onmouseover="alert(1))',
        "```\n</code></pre><script>alert(1)</script>\n```",
        "`<b>`",
        "# <svg onload=alert(1)>",
    ],
)
def test_markdown_never_passes_raw_html_or_unsafe_links(source: str) -> None:
    html = markdown.render(source)
    allowed = {"p", "pre", "code", "span", "a", "h2", "strong", "em"}
    for tag, attrs in _tags(html):
        assert tag in allowed, (tag, html)
        assert not any(name.startswith("on") for name in attrs), (attrs, html)
        if tag == "a":
            assert (attrs.get("href") or "").startswith(("http://", "https://")), html


def test_markdown_links_http_only() -> None:
    html = markdown.render("[docs](https://example.org/a?b=1&c=2) and [local](/etc/passwd)")
    assert (
        '<a href="https://example.org/a?b=1&amp;c=2" rel="nofollow noopener noreferrer">docs</a>'
        in html
    )
    assert "[local](/etc/passwd)" in html


def test_markdown_deep_quotes_do_not_recurse_forever() -> None:
    html = markdown.render(">" * 5000 + " deep")
    assert "deep" in html


def test_highlighter_languages() -> None:
    assert language_for("environment/Dockerfile") == "dockerfile"
    assert language_for("tests/test.sh") == "bash"
    assert language_for("task.toml") == "toml"
    assert language_for("a/b.py") == "python"
    assert language_for("solution/patch.diff") == "diff"
    assert language_for("README") == ""
    assert ("kw", "FROM") in tokens("FROM python:3.12\n", "dockerfile")
    assert ("var", "$HOME") in tokens('echo "$x" $HOME # c\n', "bash")
    assert ("key", '"a"') in tokens('{"a": 1}', "json")
    assert ("add", "+new") in tokens("+new\n-old\n", "diff")


def test_highlight_lines_split_multiline_tokens_and_escape() -> None:
    lines = highlight_lines('def f():\n    """<doc>\n    more"""\n', "python")
    assert len(lines) == 3
    assert lines[1] == '    <span class="tok-str">"""&lt;doc&gt;</span>'
    assert lines[2] == '<span class="tok-str">    more"""</span>'
    assert highlight_lines("<b>&</b>", "") == ["&lt;b&gt;&amp;&lt;/b&gt;"]


def test_viewer_lines_have_anchors_and_links() -> None:
    html = pages.viewer("org/x", "t1", "a.py", b"x = 1\ny = '<i>'\n", None)
    assert '<div class="l" id="L1"><a class="n" href="#L1"' in html
    assert 'id="L2"' in html and "&lt;i&gt;" in html
    assert 'href="/api/files/org/x/t1/a.py"' in html


def test_viewer_binary_and_withheld() -> None:
    assert "Binary file" in pages.viewer("e", "t", "b.bin", b"\x00\x01", None)
    html = pages.viewer("e", "t", "solution/solve.sh", None, "solution (the answer)")
    assert "Withheld: solution (the answer)" in html


def test_urls_keep_org_slash_and_quote_the_rest() -> None:
    assert pages.env_url("org/name") == "/d/org/name"
    assert pages.task_url("org/name", "a b") == "/t/org/name/a%20b"
    assert pages.raw_url("e", "t", "dir/a#b.py") == "/api/files/e/t/dir/a%23b.py"
