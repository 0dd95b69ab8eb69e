"""Where a gold patch can be made wrong: the lines of its post-image that a mutation operator
(drop a statement, negate a condition, replace a return value) applies to, for Python (via
``tokenize``) and JavaScript (a small scanner)."""

from __future__ import annotations

import ast
import io
import re
import tokenize
import warnings
from dataclasses import dataclass

# --------------------------------------------------------------------------- candidates


@dataclass
class Site:
    kind: str
    line: int
    edits: dict[int, str | None]  # post-image line -> new content (no CR/newline) or delete
    what: str  # description
    revert: int | None = None  # hunk index for hunk_revert


def snippet(text: str, limit: int = 70) -> str:
    s = " ".join(text.split())
    s = s.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return s if len(s) <= limit else s[: limit - 1] + "…"


def line_contents(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        c = line[:-1] if line.endswith("\n") else line
        out.append(c[:-1] if c.endswith("\r") else c)
    return out


# ---- Python


@dataclass
class _LogicalLine:
    start: int
    end: int
    indent: int
    toks: list[tokenize.TokenInfo]
    header: bool  # ends with ":" (a block follows)


_SKIP_TOKENS = frozenset(
    {
        tokenize.NL,
        tokenize.COMMENT,
        tokenize.INDENT,
        tokenize.DEDENT,
        tokenize.ENCODING,
        tokenize.ENDMARKER,
    }
)
_SIMPLE_STMTS = (
    ast.Expr,
    ast.Assign,
    ast.AugAssign,
    ast.AnnAssign,
    ast.Raise,
    ast.Assert,
    ast.Delete,
    ast.Import,
    ast.ImportFrom,
)
_OPEN, _CLOSE = "([{", ")]}"


def _py_logical_lines(text: str) -> list[_LogicalLine] | None:
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except Exception:  # noqa: BLE001 - any tokenizer failure: no line-level operators
        return None
    out: list[_LogicalLine] = []
    cur: list[tokenize.TokenInfo] = []
    for t in toks:
        if t.type == tokenize.NEWLINE:
            if cur:
                last = cur[-1]
                header = last.type == tokenize.OP and last.string == ":"
                out.append(_LogicalLine(cur[0].start[0], t.start[0], cur[0].start[1], cur, header))
            cur = []
        elif t.type not in _SKIP_TOKENS:
            cur.append(t)
    if cur:
        end = max(t.end[0] for t in cur)
        out.append(_LogicalLine(cur[0].start[0], end, cur[0].start[1], cur, False))
    return out


def _is_name(tok: tokenize.TokenInfo, *names: str) -> bool:
    return tok.type == tokenize.NAME and tok.string in names


def _simple_statement(stripped: str) -> bool:
    # undecodable bytes (surrogates) cannot be parsed; U+FFFD keeps strings and comments valid
    stripped = stripped.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(stripped)
    except Exception:  # noqa: BLE001
        return False
    if len(tree.body) != 1 or not isinstance(tree.body[0], _SIMPLE_STMTS):
        return False
    node = tree.body[0]
    return not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))


def _py_ternary(toks: list[tokenize.TokenInfo]) -> tuple[int, int] | None:
    """Indices of the ``if`` and ``else`` tokens of the first ternary on the line."""
    depth = 0
    depths = []
    for t in toks:
        depths.append(depth)
        if t.type == tokenize.OP and t.string in _OPEN:
            depth += 1
        elif t.type == tokenize.OP and t.string in _CLOSE:
            depth -= 1
    for j in range(1, len(toks)):
        if not _is_name(toks[j], "if"):
            continue
        d = level = depths[j]
        for k in range(j + 1, len(toks)):
            t = toks[k]
            if t.type == tokenize.OP and t.string in _OPEN:
                level += 1
            elif t.type == tokenize.OP and t.string in _CLOSE:
                level -= 1
                if level < d:
                    break
            elif level == d:
                if _is_name(t, "else"):
                    if k > j + 1:
                        return j, k
                    break
                if _is_name(t, "if", "for", "lambda", "async") or (
                    t.type == tokenize.OP and t.string in (",", ":", "=", ";")
                ):
                    break
    return None


def py_candidates(contents: list[str], added: set[int]) -> list[Site]:
    if any("\r" in c for c in contents):
        return []
    lls = _py_logical_lines("\n".join(contents) + "\n")
    if lls is None:
        return []
    out: list[Site] = []
    for idx, ll in enumerate(lls):
        if ll.start not in added:
            continue
        toks, first = ll.toks, ll.toks[0]
        content = contents[ll.start - 1]
        indent = content[: len(content) - len(content.lstrip())]
        one_line = ll.start == ll.end and all(t.end[0] == ll.start for t in toks)
        if _is_name(first, "return"):
            rest = [t for t in toks[1:] if not (t.type == tokenize.OP and t.string == ";")]
            all_added = all(n in added for n in range(ll.start, ll.end + 1))
            trivial = not rest or (len(rest) == 1 and _is_name(rest[0], "None"))
            if all_added and not trivial and first.start[0] == ll.start:
                edits: dict[int, str | None] = {ll.start: content[: first.start[1]] + "return None"}
                edits.update({n: None for n in range(ll.start + 1, ll.end + 1)})
                out.append(
                    Site("replace_return", ll.start, edits, f"return None: {snippet(content)}")
                )
        if not one_line:
            continue
        if _is_name(first, "if", "elif", "while"):
            depth, colon = 0, None
            for k in range(1, len(toks)):
                t = toks[k]
                if t.type == tokenize.OP and t.string in _OPEN:
                    depth += 1
                elif t.type == tokenize.OP and t.string in _CLOSE:
                    depth -= 1
                elif depth == 0 and t.type == tokenize.OP and t.string == ":":
                    colon = k
                    break
            if colon is not None and colon > 1:
                a, b = first.end[1], toks[colon].start[1]
                cond = content[a:b].strip()
                new = content[:a] + " not (" + cond + ")" + content[b:]
                out.append(
                    Site(
                        "negate_condition",
                        ll.start,
                        {ll.start: new},
                        f"negate condition: {snippet(content)}",
                    )
                )
            continue
        tern = _py_ternary(toks)
        if tern is not None:
            a, b = toks[tern[0]].end[1], toks[tern[1]].start[1]
            cond = content[a:b].strip()
            new = content[:a] + " not (" + cond + ") " + content[b:]
            out.append(
                Site(
                    "negate_condition",
                    ll.start,
                    {ll.start: new},
                    f"negate ternary condition: {snippet(content)}",
                )
            )
        if _is_name(first, "return") or not _simple_statement(content.strip()):
            continue
        prev = lls[idx - 1] if idx > 0 else None
        nxt = lls[idx + 1] if idx + 1 < len(lls) else None
        alone = (
            prev is not None
            and prev.header
            and prev.indent < ll.indent
            and (nxt is None or nxt.indent <= prev.indent)
        )
        if alone:
            cand = Site(
                "drop_statement",
                ll.start,
                {ll.start: indent + "pass"},
                f"replace statement with pass: {snippet(content)}",
            )
        else:
            cand = Site(
                "drop_statement", ll.start, {ll.start: None}, f"drop statement: {snippet(content)}"
            )
        out.append(cand)
    return out


# ---- JavaScript


@dataclass
class _JsLine:
    masked: str  # same length as the line; string/regex bodies "x", comments " "
    start_code: bool  # the line starts in code (not in a comment, string or template)
    start_top: str | None  # innermost open bracket at the start ("o{": an object literal)
    start_depth: int
    end_code: bool
    end_depth: int
    min_depth: int

    @property
    def balanced(self) -> bool:
        return (
            self.start_code
            and self.end_code
            and self.min_depth >= self.start_depth == (self.end_depth)
        )

    @property
    def statement_level(self) -> bool:
        return self.start_code and self.start_top in (None, "{")


_JS_REGEX_AFTER_WORDS = frozenset(
    {
        "return",
        "typeof",
        "instanceof",
        "in",
        "of",
        "new",
        "delete",
        "void",
        "throw",
        "case",
        "do",
        "else",
        "yield",
        "await",
    }
)
_JS_REGEX_AFTER_CHARS = frozenset("(,=:[!&|?{};~+-*%<>^")
_PAIRS = {")": "(", "]": "[", "}": "{"}


# A "{" after these tokens opens an object literal, not a block (after ":" it may be either:
# `case 1: {` is a block, so ":" is left out and its braces count as blocks).
_JS_BEFORE_OBJECT = frozenset("=(,[?!&|+-*%<~^") | {"return", "yield", "typeof", "void", "await"}


def _js_word_char(ch: str) -> bool:
    return ch.isalnum() or ch in "_$" or ord(ch) > 127


class _JsConfused(Exception):
    """The scanner lost track: a string left open, a bracket closed by the wrong one."""


class _JsLines:
    """The state :func:`_js_scan` carries from line to line, and the line being scanned."""

    def __init__(self) -> None:
        self.stack: list[str] = []  # "(" "[" "{" "`" (template text) "${" (template expression)
        self.kinds: list[str] = []  # beside ``stack``: "o{" where a "{" opened an object literal
        self.mode = ""  # "" code, "*" block comment, "'" / '"' string continued with a backslash
        self.prev = ""  # the last significant token (a punctuation char or a word)
        self.line = ""
        self.buf: list[str] = []
        self.min_depth = 0

    def scan(self, ln: int, line: str) -> _JsLine:
        """One line (``ln`` from 0); raises :class:`_JsConfused`."""
        stack = self.stack
        in_tpl = bool(stack) and stack[-1] == "`"
        start_code = self.mode == "" and not in_tpl
        start_top = self.kinds[-1] if self.kinds else None
        start_depth = self.min_depth = len(stack)
        self.line, self.buf = line, list(line)
        n, i = len(line), 0
        if ln == 0 and line.startswith("#!"):
            self.buf = [" "] * n
            i = n
        while i < n:
            if self.mode == "*":
                i = self.comment_rest(i)
            elif self.mode in ("'", '"'):
                i = self.string_rest(i)
            elif stack and stack[-1] == "`":
                i = self.template(i)
            else:
                i = self.code(i)
        if self.mode in ("'", '"') and not line.endswith("\\"):
            raise _JsConfused
        end_code = self.mode == "" and not (stack and stack[-1] == "`")
        return _JsLine(
            "".join(self.buf),
            start_code,
            start_top,
            start_depth,
            end_code,
            len(stack),
            self.min_depth,
        )

    def comment_rest(self, i: int) -> int:
        """Inside a block comment: blank it up to its end."""
        line, n = self.line, len(self.line)
        j = line.find("*/", i)
        end = n if j < 0 else j + 2
        self.buf[i:end] = [" "] * (end - i)
        if j >= 0:
            self.mode = ""
        return end

    def string_rest(self, i: int) -> int:
        """Inside a string continued from the line before (its quote is ``mode``)."""
        line, n, buf = self.line, len(self.line), self.buf
        j = i
        while j < n and line[j] != self.mode:
            j += 2 if line[j] == "\\" else 1
        if j >= n:
            if not line.endswith("\\"):
                raise _JsConfused
            buf[i:n] = ["x"] * (n - i)
            return n
        buf[i:j] = ["x"] * (j - i)
        self.mode, self.prev = "", "x"
        return j + 1

    def template(self, i: int) -> int:
        """Inside a template literal's text."""
        line, n, buf, stack = self.line, len(self.line), self.buf, self.stack
        c = line[i]
        if c == "\\":
            end = min(n, i + 2)
            buf[i:end] = ["x"] * (end - i)
            return end
        if c == "`":
            stack.pop()
            self.kinds.pop()
            self.min_depth = min(self.min_depth, len(stack))
            self.prev = "x"
            return i + 1
        if c == "$" and line[i + 1 : i + 2] == "{":
            stack.append("${")
            self.kinds.append("${")
            self.prev = "{"
            return i + 2
        buf[i] = "x"
        return i + 1

    def code(self, i: int) -> int:
        """In code: one token (blank, comment, string, regex, bracket, word or punctuation)."""
        line, n, buf, stack = self.line, len(self.line), self.buf, self.stack
        c = line[i]
        nxt = line[i + 1 : i + 2]
        if c in " \t\r\f\v\ufeff\xa0":
            return i + 1
        if c == "/" and nxt == "/":
            buf[i:n] = [" "] * (n - i)
            return n
        if c == "/" and nxt == "*":
            self.mode = "*"
            buf[i : i + 2] = [" ", " "]
            return i + 2
        if c in "'\"":
            return self.string(i, c)
        if c == "`":
            stack.append("`")
            self.kinds.append("`")
            return i + 1
        if c == "/":
            prev = self.prev
            if prev == "" or prev in _JS_REGEX_AFTER_CHARS or prev in _JS_REGEX_AFTER_WORDS:
                end = self.regex(i)
                if end is not None:
                    return end
            self.prev = "/"
            return i + 1
        if c in _OPEN:
            stack.append(c)
            self.kinds.append("o{" if c == "{" and self.prev in _JS_BEFORE_OBJECT else c)
            self.prev = c
            return i + 1
        if c in _CLOSE:
            want = "${" if c == "}" and stack and stack[-1] == "${" else _PAIRS[c]
            if not stack or stack[-1] != want:
                raise _JsConfused
            stack.pop()
            self.kinds.pop()
            self.min_depth = min(self.min_depth, len(stack))
            self.prev = c
            return i + 1
        if _js_word_char(c):
            j = i
            while j < n and _js_word_char(line[j]):
                j += 1
            self.prev = line[i:j]
            return j
        self.prev = c
        return i + 1

    def string(self, i: int, quote: str) -> int:
        """A string literal opening at ``i`` (it may continue on the next line)."""
        line, n, buf = self.line, len(self.line), self.buf
        j = i + 1
        while j < n and line[j] != quote:
            j += 2 if line[j] == "\\" else 1
        if j >= n:
            if not line.endswith("\\"):
                raise _JsConfused
            buf[i + 1 : n] = ["x"] * (n - i - 1)
            self.mode = quote
            return n
        buf[i + 1 : j] = ["x"] * (j - i - 1)
        self.prev = "x"
        return j + 1

    def regex(self, i: int) -> int | None:
        """A regex literal opening at ``i``: the index after its flags, or None when the line
        has no closing ``/`` (then the ``/`` is division)."""
        line, n = self.line, len(self.line)
        j, in_class = i + 1, False
        while j < n:
            ch = line[j]
            if ch == "\\":
                j += 2
                continue
            if ch == "[":
                in_class = True
            elif ch == "]":
                in_class = False
            elif ch == "/" and not in_class:
                break
            j += 1
        if j >= n:
            return None
        self.buf[i + 1 : j] = ["x"] * (j - i - 1)
        i = j + 1
        while i < n and _js_word_char(line[i]):
            i += 1
        self.prev = "x"
        return i


def _js_scan(lines: list[str]) -> list[_JsLine] | None:
    """A light lexer: per line, what is code, and the bracket nesting (None if confused)."""
    scanner = _JsLines()
    try:
        out = [scanner.scan(ln, line) for ln, line in enumerate(lines)]
    except _JsConfused:
        return None
    if scanner.mode or scanner.stack:
        return None
    return out


_JS_NO_DROP = re.compile(
    r"^(?:return|throw|break|continue|case|default|if|else|for|while|do|switch|try|catch"
    r"|finally|function|class|async\s+function)\b"
)
_JS_COND = re.compile(r"^\s*(?:\}\s*)?(?:else\s+)?(?:if|while)\s*\(")
_JS_LABEL = re.compile(r"^\s*(?:case\b.*|default\s*):$")
_JS_DIRECTIVE = re.compile(r"^(['\"])x*\1;$")
_JS_HEADER = re.compile(r"^(?:\}\s*)?(?:if|for|while|else|with|do)(?![\w$])")
_JS_OPERATOR_WORDS = frozenset(
    {"typeof", "instanceof", "in", "of", "new", "delete", "void", "await", "yield", "else", "do"}
)


def js_candidates(contents: list[str], added: set[int]) -> list[Site]:
    if any(ch in c for c in contents for ch in ("\r", "\u2028", "\u2029")):
        return []
    info = _js_scan(contents)
    if info is None:
        return []
    sig = [i for i, li in enumerate(info) if li.masked.strip()]
    out: list[Site] = []
    for pos, i in enumerate(sig):
        ln = i + 1
        if ln not in added:
            continue
        li, content = info[i], contents[i]
        sm = li.masked.strip()
        lead = len(li.masked) - len(li.masked.lstrip())
        prev = info[sig[pos - 1]].masked.strip() if pos > 0 else None
        nxt = info[sig[pos + 1]].masked.strip() if pos + 1 < len(sig) else None
        m = _JS_COND.match(li.masked)
        if m is not None and li.statement_level:
            open_at, depth, close_at = m.end() - 1, 0, None
            for k in range(open_at, len(li.masked)):
                ch = li.masked[k]
                if ch in _OPEN:
                    depth += 1
                elif ch in _CLOSE:
                    depth -= 1
                    if depth == 0:
                        close_at = k
                        break
            if close_at is not None and content[open_at + 1 : close_at].strip():
                new = content[: open_at + 1] + "!(" + content[open_at + 1 : close_at] + ")"
                new += content[close_at:]
                what = f"negate condition: {snippet(content)}"
                out.append(Site("negate_condition", ln, {ln: new}, what))
            continue
        if not (li.statement_level and li.balanced):
            continue
        semi = sm.endswith(";")
        # without ";" the line must end a statement by ASI: a value at its end, and a next
        # line that cannot continue the expression
        asi_end = not semi and _js_ends_value(sm) and not _js_continues(nxt)
        if re.match(r"return(?![\w$])", sm):
            if not (semi or asi_end or (nxt is not None and nxt.startswith("}"))):
                continue
            start = lead + len("return")
            end = lead + len(sm) - (1 if semi else 0)
            expr = content[start:end].strip()
            if expr and expr not in ("undefined", "null", "void 0"):
                new = content[:lead] + "return undefined" + (";" if semi else "")
                what = f"return undefined: {snippet(content)}"
                out.append(Site("replace_return", ln, {ln: new}, what))
            continue
        if not (semi or asi_end) or sm == ";":
            continue
        if _JS_NO_DROP.match(sm) or _JS_DIRECTIVE.match(sm.rstrip(";") + ";"):
            continue
        if sm[0] in "})].,?:":
            continue
        if prev is None or prev[-1] in ";{}" or _JS_LABEL.match(prev):
            prev_ok = True
        else:  # the previous line ended its statement by ASI
            p_info = info[sig[pos - 1]]
            prev_ok = (
                p_info.statement_level
                and p_info.balanced
                and _js_ends_value(prev)
                and not _JS_HEADER.match(prev)
                and sm[0] not in "([`+-/*%<>=&|^"
            )
        if not prev_ok:
            continue
        if prev is not None and prev.endswith("}") and nxt is not None and nxt[0] in "([`+-/":
            continue
        out.append(Site("drop_statement", ln, {ln: None}, f"drop statement: {snippet(content)}"))
    return out


def _js_ends_value(sm: str) -> bool:
    """The (masked) line ends with a token that can end an expression."""
    last = sm[-1]
    if last in ")]'\"`" or (last.isdigit()):
        return True
    if not _js_word_char(last):
        return False
    word = re.search(r"[\w$\u0080-\U0010ffff]+$", sm)
    return word is None or word.group(0) not in _JS_OPERATOR_WORDS


def _js_continues(nxt: str | None) -> bool:
    """The next (masked) line could continue the expression of the line before it."""
    if nxt is None:
        return False
    return nxt[0] in ".([`+-*/%&|^<>=?:," or bool(re.match(r"(?:in|instanceof|of)(?![\w$])", nxt))
