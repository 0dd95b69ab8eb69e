"""The shared state of one :func:`required_interface` call (:class:`Ctx`: both snapshots, the
events recorded while reading tests, the items found) and the abstract values of test code.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from repogym.pipelines._instructions.interface.model import KIND_ORDER, Required
from repogym.pipelines._instructions.interface.snapshot import Snap
from repogym.shipped.testfiles import is_test_source


@dataclass(frozen=True)
class Mod:
    dotted: str


@dataclass(frozen=True)
class NameRef:
    module: str
    name: str


@dataclass(frozen=True)
class Attr:
    cls: NameRef
    attr: str


@dataclass(frozen=True)
class Inst:
    cls: NameRef


Ref = Mod | NameRef | Attr | Inst


class Ctx:
    """Shared state of one :func:`required_interface` call."""

    def __init__(self, base: Path, head: Path, test_files: list[str], f2p: list[str]) -> None:
        self.test_files = frozenset(posixpath.normpath(t.strip("/")) for t in test_files if t)
        self.base = Snap(base, self.test_files)
        self.head = Snap(head, self.test_files)
        self.f2p = list(f2p)
        self.events: dict[tuple, set[str]] = {}
        self.called: set[tuple] = set()
        self.usage: dict[tuple[str, str], set[str]] = {}
        self.file_imports: list[tuple[tuple, str, str]] = []  # (event, test file, bound name)
        self.file_ids: dict[str, set[str]] = {}
        self.items: dict[tuple[str, str, str | None], list] = {}

    def event(self, key: tuple, ids: Iterable[str]) -> None:
        self.events.setdefault(key, set()).update(ids)

    def is_module(self, dotted: str) -> bool:
        return (
            self.base.module_file(dotted) is not None or self.head.module_file(dotted) is not None
        )

    def is_class(self, ref: NameRef) -> bool:
        for snap in (self.base, self.head):
            d = snap.definition(ref.module, ref.name)
            if d is not None:
                return d.kind == "class"
        return False

    def is_test_file(self, rel: str | None) -> bool:
        if not rel:
            return False
        rel = rel.strip("/")
        return rel in self.test_files or is_test_source(rel)

    def add(
        self,
        kind: str,
        name: str,
        owner: str | None,
        signature: str | None,
        where: str | None,
        ids: Iterable[str],
    ) -> None:
        key = (kind, name, owner)
        cur = self.items.get(key)
        if cur is None:
            self.items[key] = [signature, where, set(ids)]
        else:
            cur[0] = cur[0] or signature
            cur[1] = cur[1] or where
            cur[2].update(ids)

    def result(self) -> list[Required]:
        order = {tid: i for i, tid in enumerate(self.f2p)}
        messages = [k for k in self.items if k[0] == "error_message"]
        for key in messages:  # "must be positive" adds nothing to "width must be positive."
            longer = [k for k in messages if k != key and k[2] == key[2] and key[1] in k[1]]
            if longer and key in self.items:
                target = max(longer, key=lambda k: (len(k[1]), k[1]))
                if target in self.items:
                    self.items[target][2].update(self.items.pop(key)[2])
        out = []
        for (kind, name, owner), (sig, where, ids) in self.items.items():
            tests = sorted(ids, key=lambda t: (order.get(t, len(order)), t))
            out.append(Required(kind, name, owner, sig, where, tests))
        out.sort(
            key=lambda r: (
                r.where is None,
                r.where or "",
                KIND_ORDER[r.kind],
                r.name,
                r.owner or "",
            )
        )
        return out
