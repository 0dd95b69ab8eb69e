"""Turning the recorded events into items: modules, names, class members and keyword arguments
resolved in base then head; CLI options and error messages checked against the source text.
"""

from __future__ import annotations

import ast
import re

from repogym.pipelines._instructions.interface.context import Ctx
from repogym.pipelines._instructions.interface.model import cap_items
from repogym.pipelines._instructions.interface.pyast import (
    FUNCS,
    accepts_call,
    expr_text,
    is_property,
    is_static,
    signature_text,
)
from repogym.pipelines._instructions.interface.snapshot import ABSENT, FOUND, UNKNOWN, Def, Snap
from repogym.pipelines._instructions.interface.strings import display_regex, regex_fragments

_CLI_LIBS = re.compile(
    r"^\s*(?:import|from)\s+(?:typer|fire|cyclopts|defopt|jsonargparse|clize|plac|argh)\b", re.M
)


def _guess_kind(name: str, called: bool) -> str:
    if called:
        return "class" if name[:1].isupper() else "function"
    return "attribute"


def _def_signature(d: Def, short: str, snap: Snap) -> str | None:
    node = d.node
    if d.kind == "function" and isinstance(node, FUNCS):
        return signature_text(short, node, d.source, drop_first=False)
    if d.kind == "class":
        return _ctor_signature(d, short, snap)
    return None


def _ctor_signature(d: Def, short: str, snap: Snap) -> str | None:
    found = snap.ctor(d)
    if found[0] == "fns":
        fn, owner = found[1][-1], found[2]
        if isinstance(fn, FUNCS):
            return signature_text(short, fn, owner.source, drop_first=True)
    elif found[0] == "fields":
        owner = found[2]
        parts = [
            name if value is None else f"{name}={expr_text(value, owner.source)}"
            for name, value in found[1]
        ]
        return cap_items(f"{short}({', '.join(parts)})")
    elif found[0] == "none":
        return f"{short}()"
    return None


def resolve_python(ctx: Ctx) -> None:
    for key, rel, bound in ctx.file_imports:
        ids = ctx.usage.get((rel, bound)) if bound else None
        ctx.event(key, ids or ctx.file_ids.get(rel, set()))
    for key in sorted(ctx.events, key=repr):
        ids = ctx.events[key]
        if not ids:
            continue
        kind = key[0]
        if kind == "module":
            _resolve_module(ctx, key[1], ids)
        elif kind == "name":
            _resolve_name(ctx, key[1], key[2], ids)
        elif kind == "member":
            _resolve_member(ctx, key[1], key[2], key[3], ids)
        elif kind == "kw":
            _resolve_kw(ctx, key[1], key[2], key[3], key[4], ids)
        elif kind == "cli":
            _resolve_cli(ctx, key[1], ids)
        elif kind == "msg":
            resolve_message(ctx, key[1], key[2], key[3], ids)


def _resolve_module(ctx: Ctx, dotted: str, ids: set[str]) -> None:
    if ctx.base.module_file(dotted) is not None:
        return
    hf = ctx.head.module_file(dotted)
    if hf is None or ctx.is_test_file(hf):
        return
    ctx.add("module", dotted, dotted.rpartition(".")[0] or None, None, hf.rstrip("/"), ids)


def _resolve_name(ctx: Ctx, module: str, name: str, ids: set[str]) -> None:
    if name.startswith("__") and name.endswith("__"):
        return  # __file__, __version__, ...: every module has (or may have) them
    if ctx.base.module_file(module) is None:
        if ctx.head.module_file(module) is None:
            return  # third-party
    elif ctx.base.has_name(module, name) is not False:
        return
    hd = ctx.head.definition(module, name)
    if hd is not None and ctx.is_test_file(hd.file):
        return
    hmod = ctx.head.module_file(module)
    if hd is None and ctx.is_test_file(hmod):
        return
    if hd is not None and hd.kind == "external":
        return  # head imports it from a third-party module: nothing to write
    if hd is None:
        kind = _guess_kind(name, ("name", module, name) in ctx.called)
        ctx.add(kind, f"{module}.{name}", module, None, None, ids)
    elif hd.kind == "module":
        where = (hd.file or "").rstrip("/") or None
        ctx.add("module", hd.module, hd.module.rpartition(".")[0] or None, None, where, ids)
    else:
        sig = _def_signature(hd, name, ctx.head)
        ctx.add(hd.kind, f"{module}.{name}", module, sig, hd.file, ids)


def _resolve_member(ctx: Ctx, module: str, cls: str, attr: str, ids: set[str]) -> None:
    if attr.startswith("__") and attr.endswith("__"):
        return
    bd = ctx.base.definition(module, cls)
    if bd is None or bd.kind != "class" or ctx.is_test_file(bd.file):
        return
    if ctx.base.member(bd, attr)[0] != ABSENT:
        return
    hd = ctx.head.definition(module, cls)
    status, owner_def, fns = (
        ctx.head.member(hd, attr) if hd is not None and hd.kind == "class" else (UNKNOWN, None, [])
    )
    name = f"{bd.name}.{attr}"
    owner = bd.dotted
    if status == FOUND and owner_def is not None:
        if ctx.is_test_file(owner_def.file):
            return
        fn = fns[-1] if fns else None
        if fn is not None and isinstance(fn, FUNCS) and not is_property(fn):
            sig = signature_text(attr, fn, owner_def.source, drop_first=not is_static(fn))
            ctx.add("method", name, owner, sig, owner_def.file, ids)
        elif fn is not None and isinstance(fn, ast.ClassDef):
            ctx.add("class", name, owner, None, owner_def.file, ids)
        else:
            ctx.add("attribute", name, owner, None, owner_def.file, ids)
        return
    called = ("member", module, cls, attr) in ctx.called
    ctx.add("method" if called else "attribute", name, owner, None, None, ids)


def _resolve_kw(ctx: Ctx, module: str, name: str, attr: str | None, kw: str, ids: set[str]) -> None:
    bd = ctx.base.definition(module, name)
    if bd is None or bd.rebound or ctx.is_test_file(bd.file):
        return
    if attr is None:
        if bd.kind == "function":
            accepted = accepts_call(bd.nodes, kw)
        elif bd.kind == "class":
            found = ctx.base.ctor(bd)
            if found[0] == "fns":
                accepted = accepts_call(found[1], kw)
            elif found[0] == "fields":
                accepted = kw in {f[0] for f in found[1]}
            elif found[0] == "none":
                accepted = False
            else:
                accepted = None
        else:
            accepted = None
        owner = bd.dotted
    else:
        if bd.kind != "class":
            return
        status, owner_def, fns = ctx.base.member(bd, attr)
        if status != FOUND or owner_def is None or not fns:
            return
        accepted = accepts_call(fns, kw)
        owner = f"{owner_def.dotted}.{attr}"
    if accepted is not False:
        return
    sig = where = None
    hd = ctx.head.definition(module, name)
    if hd is not None and attr is None:
        sig, where = _def_signature(hd, hd.name or name, ctx.head), hd.file
    elif hd is not None and hd.kind == "class":
        status, owner_def, fns = ctx.head.member(hd, attr or "")
        if status == FOUND and owner_def is not None and fns and isinstance(fns[-1], FUNCS):
            sig = signature_text(attr or "", fns[-1], owner_def.source, not is_static(fns[-1]))
            where = owner_def.file
    ctx.add("parameter", kw, owner, sig, where, ids)


def _cli_known(snap: Snap, option: str) -> str | None:
    """The file of ``snap`` that mentions ``option`` (or, with typer-like libraries that derive
    options from parameter names, the bare identifier)."""
    where = snap.find_text(option)
    if where is not None or not _CLI_LIBS.search(snap.blob()):
        return where
    word = option.lstrip("-")
    word = word[3:] if word.startswith("no-") else word
    pattern = re.compile(rf"\b{re.escape(word.replace('-', '_'))}\b")
    for rel, text in snap.corpus():
        if rel.endswith(".py") and pattern.search(text):
            return rel
    return None


def _resolve_cli(ctx: Ctx, option: str, ids: set[str]) -> None:
    """An option counts when head's non-test source mentions it and base's does not (options of
    other programs and deliberately bogus ones are mentioned by neither)."""
    where = _cli_known(ctx.head, option)
    if where is None or _cli_known(ctx.base, option) is not None:
        return
    ctx.add("cli_option", option, None, None, where, ids)


def resolve_message(ctx: Ctx, owner: str | None, text: str, regex: bool, ids: set[str]) -> None:
    """A message counts when head's source can produce it and base's cannot."""
    frags = [f.strip() for f in regex_fragments(text, regex)]
    frags = [f for f in frags if len(f) >= 4]
    if not frags:
        return
    places = [ctx.head.locate(f) for f in frags]
    if None in places or all(ctx.base.has_text(f) for f in frags):
        return
    name = display_regex(text) if regex else text
    ctx.add("error_message", name, owner, None, places[0], ids)
