"""JavaScript/TypeScript by regex: comments stripped, imports and exports read, signatures
rendered, and the new modules, exports, members and thrown messages a test file uses.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from repogym.pipelines._instructions.interface.context import Ctx
from repogym.pipelines._instructions.interface.model import (
    DEFAULT_MAX,
    JS_EXTS,
    cap_items,
    collapse,
    split_words,
)
from repogym.pipelines._instructions.interface.pyresolve import resolve_message
from repogym.pipelines._instructions.interface.snapshot import Snap

_JS_SPECIAL = re.compile(r"['\"`/]")


_JS_IMPORT = re.compile(
    r"\bimport\s+(?:type\s+)?(?P<clause>[\w$\s{},*]+?)\s+from\s*(?P<q>['\"])(?P<spec>[^'\"\n]+)(?P=q)"
)
_JS_IMPORT_BARE = re.compile(r"\bimport\s*(?P<q>['\"])(?P<spec>[^'\"\n]+)(?P=q)")
_JS_DYNAMIC = re.compile(r"\bimport\s*\(\s*(?P<q>['\"])(?P<spec>[^'\"\n]+)(?P=q)\s*\)")
_JS_REQUIRE = re.compile(
    r"(?:\b(?:const|let|var)\s+(?P<lhs>[\w$]+|\{[^}]*\})\s*=\s*)?"
    r"\brequire\s*\(\s*(?P<q>['\"])(?P<spec>[^'\"\n]+)(?P=q)\s*\)"
)
_JS_THROW = re.compile(
    r"\.toThrow(?:Error)?\(\s*(?:(?P<q>['\"])(?P<lit>(?:\\.|(?!(?P=q)).)*)(?P=q)"
    r"|/(?P<re>(?:\\.|[^/\n])+)/[a-z]*)\s*\)"
)


# Methods every string, array, function, promise or plain object has: never "new".
_JS_BUILTIN_MEMBERS = split_words(
    "apply bind call toString valueOf hasOwnProperty isPrototypeOf propertyIsEnumerable "
    "toLocaleString constructor then catch finally at charAt charCodeAt codePointAt concat "
    "endsWith includes indexOf lastIndexOf localeCompare match matchAll normalize padEnd "
    "padStart repeat replace replaceAll search slice split startsWith substring substr "
    "toLowerCase toUpperCase trim trimEnd trimStart copyWithin entries every fill filter find "
    "findIndex findLast findLastIndex flat flatMap forEach join keys map pop push reduce "
    "reduceRight reverse shift some sort splice unshift values get set has delete clear "
    "toJSON"
)


def _strip_js_comments(text: str) -> str:
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        m = _JS_SPECIAL.search(text, i)
        if m is None:
            out.append(text[i:])
            break
        j = m.start()
        out.append(text[i:j])
        c = text[j]
        if c == "/":
            nxt = text[j + 1 : j + 2]
            if nxt == "/":
                k = text.find("\n", j)
                i = n if k < 0 else k
            elif nxt == "*":
                k = text.find("*/", j + 2)
                out.append(" ")
                i = n if k < 0 else k + 2
            else:
                out.append(c)
                i = j + 1
            continue
        k = j + 1
        while k < n and text[k] != c:
            if text[k] == "\\":
                k += 1
            elif c != "`" and text[k] == "\n":
                break
            k += 1
        out.append(text[j : k + 1])
        i = k + 1
    return "".join(out)


def _balanced(text: str, start: int, limit: int = 20000) -> int:
    """Index of the bracket closing ``text[start]``; -1 when not found."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    stack = [pairs[text[start]]]
    i, end = start + 1, min(len(text), start + limit)
    while i < end:
        c = text[i]
        if c in "'\"`":
            k = i + 1
            while k < end and text[k] != c:
                k += 2 if text[k] == "\\" else 1
            i = k + 1
            continue
        if c in pairs:
            stack.append(pairs[c])
        elif c in ")]}":
            if c != stack[-1]:
                return -1
            stack.pop()
            if not stack:
                return i
        i += 1
    return -1


def _top_level(text: str) -> list[int]:
    """Indexes of the characters of ``text`` outside strings and brackets."""
    out: list[int] = []
    depth, i, n = 0, 0, len(text)
    while i < n:
        c = text[i]
        if c in "'\"`":
            k = i + 1
            while k < n and text[k] != c:
                k += 2 if text[k] == "\\" else 1
            i = k + 1
            continue
        if c in "([{<":
            depth += 1
        elif c in ")]}" or (c == ">" and text[i - 1 : i] != "="):
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(i)
        i += 1
    return out


def _split_top(text: str, sep: str) -> list[str]:
    cuts = [i for i in _top_level(text) if text[i] == sep]
    bounds = [-1, *cuts, len(text)]
    return [text[bounds[k] + 1 : bounds[k + 1]] for k in range(len(bounds) - 1)]


def _js_params(text: str) -> str:
    """A TypeScript/JavaScript parameter list without annotations: ``a, b = 1, ...rest``."""
    out = []
    for raw in _split_top(text, ","):
        param = collapse(raw)
        if not param:
            continue
        top = _top_level(param)
        eq = next(
            (
                i
                for i in top
                if param[i] == "="
                and param[i + 1 : i + 2] not in ("=", ">")
                and param[i - 1 : i] not in ("=", "!", "<", ">")
            ),
            None,
        )
        left = param if eq is None else param[:eq]
        colon = next((i for i in _top_level(left) if left[i] == ":"), None)
        if colon is not None:
            left = left[:colon]
        left = re.sub(r"^(?:(?:public|private|protected|readonly|override)\s+)+", "", left.strip())
        left = left.rstrip("?").strip()
        if eq is not None:
            out.append(f"{left} = {cap_items(collapse(param[eq + 1 :]), DEFAULT_MAX)}")
        else:
            out.append(left)
    return ", ".join(out)


def _js_signature(text: str | None, name: str) -> str | None:
    if not text:
        return None
    code = _strip_js_comments(text)
    n = re.escape(name)
    generic = r"(?:<[^>()]*>)?"
    patterns = (
        (rf"\bfunction\b\s*\*?\s*{n}\s*{generic}\s*(\()", "decl"),
        (
            rf"\b(?:const|let|var)\s+{n}\s*(?::[^=;]+)?=\s*(?:async\s+)?"
            rf"(?:function\b\s*\*?\s*[\w$]*\s*)?{generic}\s*(\()",
            "expr",
        ),
        (
            rf"(?:^|[\s;{{}},])(?:(?:async|static|public|private|protected)\s+)*\*?{n}\s*{generic}\s*(\()",
            "method",
        ),
        (rf"(?<![\w$.]){n}\s*[:=]\s*(?:async\s+)?(?:function\b\s*\*?\s*[\w$]*\s*)?(\()", "expr"),
    )
    for pattern, style in patterns:
        for m in re.finditer(pattern, code):
            open_i = m.start(1)
            close = _balanced(code, open_i)
            if close < 0:
                continue
            after = code[close + 1 : close + 300].lstrip()
            if after.startswith(":"):  # a TypeScript return type
                ends = [x for x in (after.find("=>"), after.find("{")) if x >= 0]
                after = after[min(ends) :] if ends else ""
            if style == "expr":
                if "function" not in m.group(0) and not after.startswith("=>"):
                    continue
            elif not after.startswith("{"):
                continue
            return cap_items(f"{name}({_js_params(code[open_i + 1 : close])})")
    arrow = re.search(rf"\b(?:const|let|var)\s+{n}\s*=\s*(?:async\s+)?([\w$]+)\s*=>", code)
    if arrow:
        return f"{name}({arrow.group(1)})"
    return None


def _js_resolve(snap: Snap, target: str) -> str | None:
    cands: list[str] = []
    stem, ext = posixpath.splitext(target)
    if ext:
        cands.append(target)
        if ext in (".js", ".jsx", ".mjs", ".cjs"):
            cands += [stem + e for e in (".ts", ".tsx", ".mts", ".cts")]
    cands += [target + e for e in (*JS_EXTS, ".d.ts", ".json")]
    cands += [f"{target}/index{e}" for e in JS_EXTS]
    for cand in cands:
        if snap.is_file(cand):
            return cand
    return None


@dataclass
class _Exports:
    names: set[str]
    complete: bool  # False when the module may export more than the regexes see
    reexports: bool  # the module re-exports another module wholesale


def _js_exports(snap: Snap, rel: str, depth: int = 0) -> _Exports:
    text = snap.read(rel)
    if text is None:
        return _Exports(set(), False, True)
    code = _strip_js_comments(text)
    names: set[str] = set()
    complete, reexports = True, False
    simple = (
        r"\bexport\s+(?:declare\s+)?(?:default\s+)?(?:async\s+)?function\b\s*\*?\s*([\w$]+)",
        r"\bexport\s+(?:declare\s+)?(?:default\s+)?(?:abstract\s+)?class\s+([\w$]+)",
        r"\bexport\s+(?:declare\s+)?(?:const|let|var)\s+([\w$]+)",
        r"\bexport\s+(?:declare\s+)?(?:const\s+)?(?:enum|interface|type|namespace|module)\s+([\w$]+)",
        r"\bexport\s+\*\s+as\s+([\w$]+)",
        r"\b(?:module\.)?exports\.([\w$]+)\s*=",
        r"\bObject\.defineProperty\(\s*(?:module\.)?exports\s*,\s*['\"]([\w$]+)['\"]",
    )
    for pattern in simple:
        names.update(m.group(1) for m in re.finditer(pattern, code))
    for m in re.finditer(r"\bexport\s+(?:const|let|var)\s+[{\[]([^}\]]*)[}\]]", code):
        for item in m.group(1).split(","):
            word = item.split(":")[-1].split("=")[0].strip().lstrip(".")
            if word:
                names.add(word)
    for m in re.finditer(r"\bexport\s+(?:type\s+)?\{([^}]*)\}", code):
        for item in m.group(1).split(","):
            words = item.replace("type ", " ").split()
            if words:
                names.add(words[-1])
    if re.search(r"\bexport\s+default\b", code):
        names.add("default")
    for m in re.finditer(r"\bexport\s+\*\s+from\s*(['\"])([^'\"]+)\1", code):
        reexports = True
        spec = m.group(2)
        sub = None
        if spec.startswith(".") and depth < 3:
            target = posixpath.normpath(posixpath.join(posixpath.dirname(rel), spec))
            sub = _js_resolve(snap, target)
        if sub is None:
            complete = False
            continue
        inner = _js_exports(snap, sub, depth + 1)
        names |= inner.names - {"default"}
        complete = complete and inner.complete
    if re.search(r"\bexport\s*=", code):
        complete = False
    for m in re.finditer(r"\bmodule\.exports\s*=\s*", code):
        rest = code[m.end() :]
        if rest.startswith("{"):
            close = _balanced(code, m.end())
            if close < 0:
                complete = False
                continue
            for item in _split_top(code[m.end() + 1 : close], ","):
                item = item.strip()
                if item.startswith("..."):
                    complete = False
                    continue
                km = re.match(r"(?:(?:async|get|set)\s+)?\*?\s*([\w$]+|'[^']*'|\"[^\"]*\")", item)
                if km:
                    names.add(km.group(1).strip("'\""))
        else:
            complete = False
            if rest.startswith("require"):
                reexports = True
    return _Exports(names, complete, reexports)


def _js_imports(code: str) -> list[tuple[str, list[str], list[str]]]:
    """(specifier, named imports, local names of whole-module bindings)."""
    out: list[tuple[str, list[str], list[str]]] = []
    for m in _JS_IMPORT.finditer(code):
        clause, spec = m.group("clause").strip(), m.group("spec")
        named: list[str] = []
        whole: list[str] = []
        brace = re.search(r"\{([^}]*)\}", clause)
        if brace:
            for item in brace.group(1).split(","):
                words = re.sub(r"^\s*type\s+", "", item).split()
                if words:
                    named.append(words[0])
            clause = clause[: brace.start()] + clause[brace.end() :]
        star = re.search(r"\*\s*as\s+([\w$]+)", clause)
        if star:
            whole.append(star.group(1))
            clause = clause[: star.start()] + clause[star.end() :]
        default = re.match(r"\s*([\w$]+)\s*(?:,|$)", clause)
        if default and default.group(1) != "type":
            whole.append(default.group(1))
        out.append((spec, named, whole))
    for m in _JS_IMPORT_BARE.finditer(code):
        out.append((m.group("spec"), [], []))
    for m in _JS_DYNAMIC.finditer(code):
        out.append((m.group("spec"), [], []))
    for m in _JS_REQUIRE.finditer(code):
        lhs = m.group("lhs") or ""
        named, whole = [], []
        if lhs.startswith("{"):
            for item in lhs.strip("{}").split(","):
                word = item.split(":")[0].split("=")[0].strip()
                if word and not word.startswith("..."):
                    named.append(word)
        elif lhs:
            whole.append(lhs)
        out.append((m.group("spec"), named, whole))
    return out


def read_js(ctx: Ctx, rel: str, ids: set[str]) -> None:
    text = ctx.head.read(rel)
    if text is None:
        return
    code = _strip_js_comments(text)
    for spec, named, whole in _js_imports(code):
        if not spec.startswith("."):
            continue
        target = posixpath.normpath(posixpath.join(posixpath.dirname(rel), spec))
        if target.startswith(".."):
            continue
        bfile = _js_resolve(ctx.base, target)
        hfile = _js_resolve(ctx.head, target)
        if bfile is None:
            if hfile is None or ctx.is_test_file(hfile):
                continue
            ctx.add("module", hfile, None, None, hfile, ids)
            htext = ctx.head.read(hfile)
            for name in named:
                if name != "default":
                    ctx.add("export", name, hfile, _js_signature(htext, name), hfile, ids)
            continue
        if ctx.is_test_file(bfile):
            continue
        where = hfile or bfile
        htext = ctx.head.read(where)
        exports = _js_exports(ctx.base, bfile)
        bcode = _strip_js_comments(ctx.base.read(bfile) or "")
        for name in named:
            if name == "default" or name in exports.names or not exports.complete:
                continue
            word = re.escape(name)
            if re.search(rf"^.*\bexports?\b.*(?<![\w$]){word}(?![\w$])", bcode, re.M):
                continue
            ctx.add("export", name, where, _js_signature(htext, name), where, ids)
        if exports.reexports:
            continue
        for local in whole:
            for m in re.finditer(rf"(?<![\w$.]){re.escape(local)}\.([A-Za-z_$][\w$]*)\s*\(", code):
                meth = m.group(1)
                if meth in _JS_BUILTIN_MEMBERS or re.search(
                    rf"(?<![\w$]){re.escape(meth)}(?![\w$])", bcode
                ):
                    continue
                ctx.add("method", meth, where, _js_signature(htext, meth), where, ids)
    for m in _JS_THROW.finditer(code):
        if m.group("lit") is not None:
            lit, regex = re.sub(r"\\(.)", r"\1", m.group("lit")), False
        else:
            lit, regex = m.group("re"), True
        if lit and lit.strip():
            resolve_message(ctx, None, lit, regex, ids)
