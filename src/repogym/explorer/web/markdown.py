"""A tiny, safe Markdown subset for task instructions and dataset cards.

Supported: ATX headings, paragraphs, fenced code blocks (highlighted), inline code, bullet and
numbered lists, block quotes, horizontal rules, ``**bold**``, ``*emphasis*`` and links whose
target is ``http://`` or ``https://``. Everything else is text: raw HTML is escaped, never passed
through, and other link schemes (``javascript:``, ``data:``, relative) are shown as plain text.
"""

from __future__ import annotations

import html
import re

from repogym.explorer.web.highlight import highlight, normalize_language

_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})[ \t]*([\w+.#-]*)[^\n]*$")
_HEADING = re.compile(r"^[ \t]{0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
_BULLET = re.compile(r"^[ \t]*[-*+][ \t]+(.*)$")
_NUMBERED = re.compile(r"^[ \t]*(\d{1,9})[.)][ \t]+(.*)$")
_QUOTE = re.compile(r"^[ \t]{0,3}>[ \t]?(.*)$")
_RULE = re.compile(r"^[ \t]{0,3}(?:(?:-[ \t]*){3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,})$")
_INLINE = re.compile(
    r"(`+)(.+?)\1|\[([^\]\n]{1,500})\]\(([^()\s]{1,2000})\)|(https?://[^\s<>()\"']+)"
)
_STRONG = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__")
_EM = re.compile(
    r"(?<![\w*])\*(?=\S)([^*]+?)(?<=\S)\*(?![\w*])"
    r"|(?<![\w_])_(?=\S)([^_]+?)(?<=\S)_(?![\w_])"
)
_SAFE_URL = re.compile(r"^https?://[^\s\"'<>`]+$", re.IGNORECASE)


def _emphasis(escaped: str) -> str:
    escaped = _STRONG.sub(lambda m: f"<strong>{m.group(1) or m.group(2)}</strong>", escaped)
    return _EM.sub(lambda m: f"<em>{m.group(1) or m.group(2)}</em>", escaped)


def inline(text: str, *, links: bool = True) -> str:
    """Render inline Markdown (code spans, links, emphasis); everything else escaped."""
    out: list[str] = []
    pos = 0
    for m in _INLINE.finditer(text):
        out.append(_emphasis(html.escape(text[pos : m.start()], quote=False)))
        pos = m.end()
        if m.group(1):
            out.append(f"<code>{html.escape(m.group(2).strip(), quote=False)}</code>")
        elif m.group(3) is not None:
            label, url = m.group(3), m.group(4)
            if links and _SAFE_URL.match(url):
                out.append(
                    f'<a href="{html.escape(url, quote=True)}" rel="nofollow noopener noreferrer">'
                    f"{inline(label, links=False)}</a>"
                )
            else:
                out.append(_emphasis(html.escape(m.group(0), quote=False)))
        else:
            url = m.group(5).rstrip(".,;:!?")
            tail = m.group(5)[len(url) :]
            if links:
                esc = html.escape(url, quote=True)
                out.append(f'<a href="{esc}" rel="nofollow noopener noreferrer">{esc}</a>')
            else:
                out.append(html.escape(url, quote=False))
            out.append(html.escape(tail, quote=False))
    out.append(_emphasis(html.escape(text[pos:], quote=False)))
    return "".join(out)


def render(text: str, _depth: int = 0) -> str:
    """Render a Markdown document to safe HTML."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    out: list[str] = []
    para: list[str] = []
    items: list[str] = []
    list_tag = ""

    def flush_para() -> None:
        if para:
            out.append("<p>" + inline(" ".join(s.strip() for s in para)) + "</p>")
            para.clear()

    def flush_list() -> None:
        nonlocal list_tag
        if items:
            out.append(f"<{list_tag}>" + "".join(f"<li>{i}</li>" for i in items) + f"</{list_tag}>")
            items.clear()
        list_tag = ""

    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            flush_para()
            flush_list()
            marker, lang = fence.group(1), normalize_language(fence.group(2))
            body: list[str] = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(marker):
                body.append(lines[i])
                i += 1
            i += 1  # closing fence (or end of text)
            code = "\n".join(body)
            cls = f' class="lang-{lang}"' if lang else ""
            out.append(f'<pre class="code"><code{cls}>{highlight(code, lang)}</code></pre>')
            continue
        if not line.strip():
            flush_para()
            flush_list()
            i += 1
            continue
        heading = _HEADING.match(line)
        if heading:
            flush_para()
            flush_list()
            level = min(len(heading.group(1)) + 1, 6)
            out.append(f"<h{level}>{inline(heading.group(2))}</h{level}>")
            i += 1
            continue
        if _RULE.match(line):
            flush_para()
            flush_list()
            out.append("<hr>")
            i += 1
            continue
        bullet, numbered = _BULLET.match(line), _NUMBERED.match(line)
        if bullet or numbered:
            flush_para()
            tag = "ul" if bullet else "ol"
            if list_tag and list_tag != tag:
                flush_list()
            list_tag = tag
            items.append(inline(bullet.group(1) if bullet else numbered.group(2)))  # type: ignore[union-attr]
            i += 1
            continue
        if items and line.startswith((" ", "\t")):
            items[-1] += " " + inline(line.strip())
            i += 1
            continue
        quote = _QUOTE.match(line) if _depth < 8 else None
        if quote:
            flush_para()
            flush_list()
            quoted: list[str] = []
            while i < len(lines) and (q := _QUOTE.match(lines[i])):
                quoted.append(q.group(1))
                i += 1
            out.append("<blockquote>" + render("\n".join(quoted), _depth + 1) + "</blockquote>")
            continue
        flush_list()
        para.append(line)
        i += 1
    flush_para()
    flush_list()
    return "\n".join(out)
