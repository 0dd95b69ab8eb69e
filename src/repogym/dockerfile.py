"""Dockerfile parsing and variable substitution, shared by the local sandbox (which replays
Dockerfiles) and `validate --deep` (which checks them): the subset of BuildKit syntax repogym reads.

Handles parser directives (``# escape=``), line continuations (with comment and blank lines in
between), JSON (exec) and shell forms, ``--flag`` options, heredocs (``RUN <<EOF``), and word
expansion with ``$VAR`` / ``${VAR}`` / ``${VAR:-x}`` / ``${VAR:+x}`` / ``${VAR#p}`` … plus quote
removal, as Docker does for ``ENV``, ``ARG``, ``COPY``, ``WORKDIR``, ``USER`` and friends.
"""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass, field

from repogym.errors import RepogymError

KNOWN = {
    "ADD",
    "ARG",
    "CMD",
    "COPY",
    "ENTRYPOINT",
    "ENV",
    "EXPOSE",
    "FROM",
    "HEALTHCHECK",
    "LABEL",
    "MAINTAINER",
    "ONBUILD",
    "RUN",
    "SHELL",
    "STOPSIGNAL",
    "USER",
    "VOLUME",
    "WORKDIR",
}
_FLAG_INSTRUCTIONS = {"ADD", "COPY", "FROM", "HEALTHCHECK", "RUN"}
_HEREDOC_INSTRUCTIONS = {"ADD", "COPY", "RUN"}
# A heredoc word as BuildKit reads it: optional fd, ``<<``, optional ``-``, optional blanks
# (``<< 'EOF'`` is one word), then the delimiter (quotes anywhere in it: no expansion).
_HEREDOC_WORD = re.compile(r"^(\d*)<<(-?)[ \t]*([^<]+)$")
_DIRECTIVE_RE = re.compile(r"^#\s*([a-zA-Z][a-zA-Z0-9_]*)\s*=\s*(.+?)\s*$")


class DockerfileError(RepogymError, ValueError):
    """A syntax error; ``lineno`` and ``line`` locate it."""

    def __init__(self, message: str, lineno: int = 0, line: str = "") -> None:
        self.lineno = lineno
        self.line = line
        where = f"line {lineno}: " if lineno else ""
        text = f" ({line.strip()[:160]})" if line else ""
        super().__init__(f"{where}{message}{text}")


@dataclass(frozen=True)
class Heredoc:
    name: str
    body: str
    expand: bool
    """False when the delimiter was quoted: the body is taken literally."""


@dataclass
class Instruction:
    lineno: int
    keyword: str
    raw: str
    """Everything after the keyword (continuations joined)."""
    flags: dict[str, str] = field(default_factory=dict)
    args: str = ""
    """``raw`` without the leading ``--flags``."""
    json: list[str] | None = None
    """The exec (JSON array) form, when used."""
    heredocs: list[Heredoc] = field(default_factory=list)
    args_without_heredocs: str = ""
    """``args`` with the heredoc words (``<<EOF``, ``<< 'EOF'``) removed (``COPY`` sources)."""

    @property
    def text(self) -> str:
        """The instruction as written (first line of it), for error messages."""
        first = f"{self.keyword} {self.raw}".strip().splitlines()[0] if self.raw else self.keyword
        return first if len(first) <= 200 else first[:197] + "..."


@dataclass
class Dockerfile:
    instructions: list[Instruction]
    directives: dict[str, str]
    escape: str = "\\"


def parse(text: str) -> Dockerfile:
    """Parse Dockerfile text into instructions (no variable expansion yet)."""
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.splitlines()
    directives: dict[str, str] = {}
    i = 0
    while i < len(lines):
        m = _DIRECTIVE_RE.match(lines[i].strip())
        if not m or m.group(1).lower() in directives:
            break
        directives[m.group(1).lower()] = m.group(2)
        i += 1
    escape = directives.get("escape", "\\")
    if escape not in ("\\", "`"):
        raise DockerfileError(f"invalid escape token {escape!r}, must be ` or \\", 1)
    out: list[Instruction] = []
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            i += 1
            continue
        lineno = i + 1
        parts: list[str] = []
        cur = line
        while True:
            body = cur.rstrip()
            if body.endswith(escape):
                parts.append(body[:-1])
                i += 1
                # Skip comment and empty lines inside a continuation, like Docker.
                while i < len(lines) and (
                    not lines[i].strip() or lines[i].lstrip().startswith("#")
                ):
                    i += 1
                if i >= len(lines):
                    break
                cur = lines[i]
                continue
            parts.append(cur)
            i += 1
            break
        logical = "".join(parts).strip()
        keyword, _, raw = logical.partition(" ")
        if "\t" in keyword:
            keyword, _, rest = keyword.partition("\t")
            raw = rest + (" " + raw if raw else "")
        keyword = keyword.upper()
        raw = raw.strip()
        ins = Instruction(lineno=lineno, keyword=keyword, raw=raw)
        _split_flags(ins, escape)
        ins.args_without_heredocs = ins.args
        if keyword in _HEREDOC_INSTRUCTIONS and ins.json is None and "<<" in ins.args:
            i = _collect_heredocs(ins, lines, i)
        out.append(ins)
    return Dockerfile(out, directives, escape)


def _heredoc_words(text: str) -> list[tuple[str, int, int]]:
    """Shell words of ``text`` with quotes kept, as ``(word, start, end)``; ``<<`` (and a
    ``-``) followed by blanks joins the next word, as BuildKit's lexer does."""
    words: list[tuple[str, int, int]] = []
    i, n = 0, len(text)
    while i < n:
        if text[i] in " \t\r\n":
            i += 1
            continue
        start = i
        quote = ""
        while i < n:
            ch = text[i]
            if quote:
                if ch == "\\" and quote == '"' and i + 1 < n:
                    i += 2
                    continue
                if ch == quote:
                    quote = ""
                i += 1
            elif ch in "'\"":
                quote = ch
                i += 1
            elif ch == "\\" and i + 1 < n:
                i += 2
            elif ch in " \t\r\n":
                break
            elif text.startswith("<<", i):
                i += 2
                if i < n and text[i] == "-":
                    i += 1
                while i < n and text[i] in " \t":
                    i += 1
            else:
                i += 1
        words.append((text[start:i], start, i))
    return words


def _heredoc_name(rest: str) -> tuple[str, bool] | None:
    """The delimiter of a heredoc word's tail and whether its body expands (no quotes)."""
    out: list[str] = []
    quoted = False
    quote = ""
    i = 0
    while i < len(rest):
        ch = rest[i]
        if quote:
            if ch == quote:
                quote = ""
            else:
                out.append(ch)
        elif ch in "'\"":
            quote, quoted = ch, True
        elif ch == "\\" and i + 1 < len(rest):
            quoted = True
            i += 1
            out.append(rest[i])
        elif ch in " \t":
            return None  # two words: not a heredoc
        else:
            out.append(ch)
        i += 1
    name = "".join(out)
    return (name, not quoted) if name and not quote else None


def _collect_heredocs(ins: Instruction, lines: list[str], i: int) -> int:
    kept: list[str] = []
    last = 0
    for word, start, end in _heredoc_words(ins.args):
        m = _HEREDOC_WORD.match(word)
        found = _heredoc_name(m.group(3)) if m else None
        if m is None or found is None:
            continue
        name, expand = found
        strip_tabs = m.group(2) == "-"
        body: list[str] = []
        while True:
            if i >= len(lines):
                raise DockerfileError(f"unterminated heredoc {name}", ins.lineno, ins.text)
            line = lines[i]
            i += 1
            check = line.lstrip("\t") if strip_tabs else line
            if check == name:
                break
            body.append(check)
        ins.heredocs.append(Heredoc(name, "\n".join(body) + "\n" if body else "", expand=expand))
        kept.append(ins.args[last:start])
        last = end
    kept.append(ins.args[last:])
    ins.args_without_heredocs = " ".join(p.strip() for p in kept if p.strip())
    return i


def _split_flags(ins: Instruction, escape: str) -> None:
    rest = ins.raw
    if ins.keyword in _FLAG_INSTRUCTIONS:
        while rest.startswith("--"):
            m = re.match(r"--([A-Za-z][A-Za-z0-9-]*)(?:=(\"[^\"]*\"|'[^']*'|\S*))?\s*", rest)
            if not m:
                break
            value = m.group(2) or ""
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            ins.flags[m.group(1).lower()] = value
            rest = rest[m.end() :]
    ins.args = rest.strip()
    if ins.args.startswith("["):
        try:
            parsed = json.loads(ins.args)
        except ValueError:
            parsed = None
        if isinstance(parsed, list) and all(isinstance(x, str) for x in parsed):
            ins.json = parsed


# ------------------------------------------------------------------------------ expansion


class _Lexer:
    def __init__(self, text: str, env: dict[str, str], escape: str, lineno: int) -> None:
        self.s = text
        self.pos = 0
        self.env = env
        self.esc = escape
        self.lineno = lineno

    def peek(self) -> str:
        return self.s[self.pos] if self.pos < len(self.s) else ""

    def words(self, *, split: bool) -> list[str]:
        """Expand; with ``split`` return the whitespace-separated words, else one word."""
        words: list[str] = []
        cur: list[str] = []
        started = False
        while self.pos < len(self.s):
            ch = self.s[self.pos]
            if split and ch in " \t\r\n":
                if started:
                    words.append("".join(cur))
                    cur, started = [], False
                self.pos += 1
                continue
            started = True
            if ch == self.esc:
                self.pos += 1
                if self.pos < len(self.s):
                    cur.append(self.s[self.pos])
                    self.pos += 1
                else:
                    cur.append(ch)
            elif ch == "'":
                self.pos += 1
                end = self.s.find("'", self.pos)
                if end < 0:
                    raise DockerfileError(
                        "unexpected end of statement while looking for matching '"
                    )
                cur.append(self.s[self.pos : end])
                self.pos = end + 1
            elif ch == '"':
                self.pos += 1
                cur.append(self._double())
            elif ch == "$":
                cur.append(self._dollar())
            else:
                cur.append(ch)
                self.pos += 1
        if started or not split:
            words.append("".join(cur))
        return words

    def _double(self) -> str:
        out: list[str] = []
        while True:
            if self.pos >= len(self.s):
                raise DockerfileError('unexpected end of statement while looking for matching "')
            ch = self.s[self.pos]
            if ch == '"':
                self.pos += 1
                return "".join(out)
            if (
                ch == self.esc
                and self.pos + 1 < len(self.s)
                and self.s[self.pos + 1] in '"$' + self.esc
            ):
                out.append(self.s[self.pos + 1])
                self.pos += 2
            elif ch == "$":
                out.append(self._dollar())
            else:
                out.append(ch)
                self.pos += 1

    def _dollar(self) -> str:
        self.pos += 1
        ch = self.peek()
        if ch == "{":
            end = self._matching_brace(self.pos)
            inner = self.s[self.pos + 1 : end]
            self.pos = end + 1
            return self._braced(inner)
        m = re.match(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]", self.s[self.pos :])
        if not m:
            return "$"
        self.pos += m.end()
        return self.env.get(m.group(0), "")

    def _matching_brace(self, start: int) -> int:
        depth = 0
        for j in range(start, len(self.s)):
            if self.s[j] == "{":
                depth += 1
            elif self.s[j] == "}":
                depth -= 1
                if depth == 0:
                    return j
        raise DockerfileError("missing '}' in variable substitution")

    def _braced(self, inner: str) -> str:
        m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)(.*)$", inner, re.S)
        if not m:
            raise DockerfileError(f"bad substitution: ${{{inner}}}")
        name, op = m.group(1), m.group(2)
        val = self.env.get(name)
        if not op:
            return val or ""

        def word(w: str) -> str:
            return _Lexer(w, self.env, self.esc, self.lineno).words(split=False)[0]

        for sym in (":-", ":+", ":?", "-", "+", "?"):
            if op.startswith(sym):
                arg = op[len(sym) :]
                unset_or_empty = val is None or (sym.startswith(":") and val == "")
                if sym in (":-", "-"):
                    return word(arg) if unset_or_empty else (val or "")
                if sym in (":+", "+"):
                    return "" if unset_or_empty else word(arg)
                if unset_or_empty:
                    raise DockerfileError(f"{name}: {word(arg) or 'is not allowed to be unset'}")
                return val or ""
        for sym in ("##", "#", "%%", "%"):
            if op.startswith(sym):
                return _trim(val or "", word(op[len(sym) :]), sym)
        if op.startswith("/"):
            every = op.startswith("//")
            pat, _, rep = op[2 if every else 1 :].partition("/")
            if not pat:
                return val or ""
            return (val or "").replace(word(pat), word(rep), -1 if every else 1)
        raise DockerfileError(f"unsupported modifier ({op[:1]}) in substitution ${{{inner}}}")


def _trim(value: str, pattern: str, sym: str) -> str:
    idx = range(len(value) + 1)
    if sym in ("#", "##"):
        order = idx if sym == "#" else reversed(idx)
        for k in order:
            if fnmatch.fnmatchcase(value[:k], pattern):
                return value[k:]
    else:
        order = reversed(idx) if sym == "%" else idx
        for k in order:
            if fnmatch.fnmatchcase(value[k:], pattern):
                return value[:k]
    return value


def expand(text: str, env: dict[str, str], escape: str = "\\", lineno: int = 0) -> str:
    """Expand variables and remove quotes in one word (whitespace kept)."""
    return _Lexer(text, env, escape, lineno).words(split=False)[0]


def expand_words(text: str, env: dict[str, str], escape: str = "\\") -> list[str]:
    """Expand variables, remove quotes, split on unquoted whitespace."""
    return _Lexer(text, env, escape, 0).words(split=True)


def split_raw(text: str, escape: str = "\\") -> list[str]:
    """Split on unquoted whitespace keeping quotes and ``$`` untouched (for ``k=v`` pairs)."""
    out: list[str] = []
    cur: list[str] = []
    quote = ""
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == escape and i + 1 < len(text) and quote != "'":
            cur.append(text[i : i + 2])
            i += 2
            continue
        if quote:
            if ch == quote:
                quote = ""
            cur.append(ch)
        elif ch in "\"'":
            quote = ch
            cur.append(ch)
        elif ch in " \t\r\n":
            if cur:
                out.append("".join(cur))
                cur = []
        else:
            cur.append(ch)
        i += 1
    if quote:
        raise DockerfileError(f"unterminated quote {quote}")
    if cur:
        out.append("".join(cur))
    return out


def parse_key_values(
    ins: Instruction, env: dict[str, str], escape: str, *, allow_bare: bool = False
) -> list[tuple[str, str | None]]:
    """``ENV``/``LABEL``/``ARG`` arguments: ``k=v`` pairs, or the legacy ``k value`` form."""
    raw = ins.args
    tokens = split_raw(raw, escape)
    if not tokens:
        raise DockerfileError(f"{ins.keyword} requires at least one argument", ins.lineno, ins.text)
    if "=" not in tokens[0] and not allow_bare:
        # Legacy: ``ENV key value with spaces``.
        key = tokens[0]
        value = raw[len(key) :].strip()
        if not value:
            raise DockerfileError(f"{ins.keyword} names can not be blank", ins.lineno, ins.text)
        return [(key, expand(value, env, escape, ins.lineno))]
    out: list[tuple[str, str | None]] = []
    for tok in tokens:
        if "=" not in tok:
            if allow_bare:
                out.append((expand(tok, env, escape), None))
                continue
            raise DockerfileError(
                f"syntax error - can't find = in {tok!r}. Must be of the form: name=value",
                ins.lineno,
                ins.text,
            )
        key, _, value = tok.partition("=")
        if not key:
            raise DockerfileError(f"{ins.keyword} names can not be blank", ins.lineno, ins.text)
        out.append((expand(key, env, escape), expand(value, env, escape, ins.lineno)))
    return out
