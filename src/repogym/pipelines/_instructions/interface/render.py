"""The Markdown "Required interface" section of an instruction: names, files and signatures
only, never a body.
"""

from __future__ import annotations

from repogym.pipelines._instructions.interface.model import Required, cap_items

_LABELS = {
    "module": "new module",
    "function": "new function",
    "class": "new class",
    "method": "new method",
    "attribute": "new attribute",
    "export": "new export",
}
_LINE_TEXT_MAX = 160


def _code(text: str) -> str:
    text = text.replace("\r", "\\r").replace("\n", "\\n")
    text = cap_items(text, _LINE_TEXT_MAX)
    if "`" in text:
        return f"`` {text} ``"
    return f"`{text}`"


def _module_of(path: str) -> str:
    stem = path[:-3] if path.endswith(".py") else path
    stem = stem[: -len("/__init__")] if stem.endswith("/__init__") else stem
    return stem.replace("/", ".")


_NATIVE_LABELS = {"class": "new type", "attribute": "new constant or variable"}


def _render_native(item: Required) -> str:
    """A Go or Rust item: its declaration as head writes it (``func NewV6WithTime(t
    *time.Time) (UUID, error)``, ``pub fn sum(&self) -> u32``), a method with its type."""
    label = _NATIVE_LABELS.get(item.kind) or _LABELS.get(item.kind, "new " + item.kind)
    line = f"- {_code(item.where or '')}: {label} "
    if item.kind == "method":
        return line + f"{_code(item.name)}: {_code(item.signature or '')}"
    return line + _code(item.signature or item.name)


def _render_item(item: Required) -> str:
    if item.signature and item.where and item.where.endswith((".go", ".rs")):
        return _render_native(item)
    kind, name, owner = item.kind, item.name, item.owner
    if kind == "parameter":
        line = f"- {_code(owner or '?')}: new keyword argument {_code(name)}"
        return line + (f" ({_code(item.signature)})" if item.signature else "")
    if kind == "cli_option":
        where = f"{_code(item.where)}: " if item.where else ""
        return f"- {where}new command-line option {_code(name)}"
    if kind == "error_message":
        who = _code(owner) if owner else "An error"
        return f"- {who} with a message matching {_code(name)}"
    if kind == "module":
        if item.where and _module_of(item.where).endswith(name.replace("/", ".")):
            return f"- {_code(item.where)}: new module {_code(name)}"
        if item.where and item.where != name:
            return f"- new module {_code(name)} ({_code(item.where)})"
        return f"- new module {_code(name)}"
    short = name[len(owner) + 1 :] if owner and name.startswith(owner + ".") else name
    shown = short
    if item.signature:
        prefix = short.rpartition(".")[0]
        shown = f"{prefix}.{item.signature}" if prefix else item.signature
    place = item.where or owner or ""
    line = f"- {_code(place)}: " if place else "- "
    line += f"{_LABELS.get(kind, 'new ' + kind)} {_code(shown)}"
    if (
        kind in ("function", "class", "attribute")
        and owner
        and item.where
        and item.where.endswith(".py")
        and name.startswith(owner + ".")
        and not (_module_of(item.where) == owner or _module_of(item.where).endswith("." + owner))
    ):
        line += f", importable from {_code(owner)}"
    return line


def render_interface(items: list[Required]) -> str:
    """The "Required interface" Markdown section of an instruction ("" when nothing is new)."""
    if not items:
        return ""
    lines = [
        "## Required interface",
        "",
        "The hidden tests use these names, which do not exist yet:",
        "",
    ]
    seen: set[str] = set()
    for item in items:
        line = _render_item(item)
        if line not in seen:
            seen.add(line)
            lines.append(line)
    return "\n".join(lines) + "\n"
