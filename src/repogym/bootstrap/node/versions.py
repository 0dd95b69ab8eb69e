"""Which Node.js a project asks for, npm-style semver ranges, and the host install to use.

Sources, strongest first: ``package.json`` ``volta.node`` (an exact pin), ``.node-version``,
``.nvmrc`` (pins or nvm aliases such as ``20``, ``v20.11.1``, ``lts/iron``), then
``engines.node`` (a range). A pin is a *preference* (the image tag and, on the local backend,
the closest host install); ``engines.node`` is a *requirement*, with one concession: a range
that only excludes newer releases (``^18``, ``12.x``) is usually stale, so when the host only has
newer Node the closest newer one is used, with a note. A range that needs a newer Node than any
installed one (``>=22.12`` on a host with Node 20) is refused with a reason.

Ranges follow node-semver for release versions: ``||`` alternatives of space-separated
comparator sets; ``< <= > >= =`` with partial versions (``>=22.12`` is ``>=22.12.0``, ``<=20``
is ``<21.0.0``, ``>1.2`` is ``>=1.3.0``); x-ranges (``*``, ``x``, ``20``, ``20.x``, ``18.2.x``);
tilde (``~1.2.3`` ``>=1.2.3 <1.3.0``, ``~1`` ``<2.0.0``); caret (``^1.2.3`` ``<2.0.0``,
``^0.2.3`` ``<0.3.0``, ``^0.0.3`` ``<0.0.4``); hyphen ranges (``18 - 20`` is ``>=18.0.0
<21.0.0``). Pre-release tags are ignored (installed Node versions are releases).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repogym.errors import RepogymError

Version = tuple[int, int, int]
INF = 10**9
"""A component larger than any real one (upper bounds of open ranges)."""

LTS_CODENAMES = {
    "argon": 4,
    "boron": 6,
    "carbon": 8,
    "dubnium": 10,
    "erbium": 12,
    "fermium": 14,
    "gallium": 16,
    "hydrogen": 18,
    "iron": 20,
    "jod": 22,
    "krypton": 24,
}
"""nvm's ``lts/<codename>`` aliases and their majors."""

_PARTIAL = r"v?(\d+|[xX*])(?:\.(\d+|[xX*]))?(?:\.(\d+|[xX*]))?(?:[-+][0-9A-Za-z.+-]*)?"
_COMPARATOR = re.compile(r"^(<=|>=|<|>|=|\^|~>?)?\s*" + _PARTIAL + r"$")
_HYPHEN = re.compile(r"^(\S+)\s+-\s+(\S+)$")


class RangeError(RepogymError, ValueError):
    """A version range this module cannot read."""


# ------------------------------------------------------------------------------ versions


def parse_version(text: str) -> Version:
    """``"v20.11.1"`` → ``(20, 11, 1)``; missing parts are 0; raises :class:`RangeError`."""
    m = re.match(r"^\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?", text)
    if not m:
        raise RangeError(f"not a version: {text!r}")
    return (int(m[1]), int(m[2] or 0), int(m[3] or 0))


def format_version(v: Version) -> str:
    return ".".join(str(x) for x in v)


# ------------------------------------------------------------------------------ ranges

Bound = tuple[Version, bool]
"""A version and whether the bound includes it."""


@dataclass(frozen=True)
class Interval:
    """One comparator set as an interval: ``low`` (inclusive flag) to ``high``."""

    low: Bound
    high: Bound

    def contains(self, v: Version) -> bool:
        (lo, lo_inc), (hi, hi_inc) = self.low, self.high
        above = v > lo or (lo_inc and v == lo)
        below = v < hi or (hi_inc and v == hi)
        return above and below

    def empty(self) -> bool:
        (lo, lo_inc), (hi, hi_inc) = self.low, self.high
        return lo > hi or (lo == hi and not (lo_inc and hi_inc))


_ANY = Interval(((0, 0, 0), True), ((INF, INF, INF), True))


def _parts(m: re.Match[str]) -> list[int | None]:
    """The numeric parts given (``None`` for a missing or wildcard part, and all after it)."""
    out: list[int | None] = []
    for raw in m.groups()[1:4]:
        if raw is None or raw in ("x", "X", "*") or (out and out[-1] is None):
            out.append(None)
        else:
            out.append(int(raw))
    return out


def _floor(parts: list[int | None]) -> Version:
    a, b, c = (p or 0 for p in parts)
    return (a, b, c)


def _next_up(parts: list[int | None]) -> Version:
    """The first version above everything a partial version covers (``1.2`` → ``1.3.0``)."""
    known = [p for p in parts if p is not None]
    if not known:
        return (INF, INF, INF)
    if len(known) == 1:
        return (known[0] + 1, 0, 0)
    if len(known) == 2:
        return (known[0], known[1] + 1, 0)
    return (known[0], known[1], known[2] + 1)


def _comparator(text: str) -> Interval:
    m = _COMPARATOR.match(text)
    if not m:
        raise RangeError(f"cannot read version comparator {text!r}")
    op = m[1] or ""
    parts = _parts(m)
    known = [p for p in parts if p is not None]
    low, up = _floor(parts), _next_up(parts)
    top: Bound = ((INF, INF, INF), True)
    if op in ("", "="):
        if len(known) == 3:
            return Interval((low, True), (low, True))
        return Interval((low, True), (up, False))
    if op == ">=":
        return Interval((low, True), top)
    if op == ">":
        if len(known) == 3:
            return Interval((low, False), top)
        return Interval((up, True), top)
    if op == "<":
        return Interval(((0, 0, 0), True), (low, False))
    if op == "<=":
        if len(known) == 3:
            return Interval(((0, 0, 0), True), (low, True))
        return Interval(((0, 0, 0), True), (up, False))
    if op.startswith("~"):
        if len(known) <= 1:
            return Interval((low, True), (up, False))
        return Interval((low, True), ((known[0], known[1] + 1, 0), False))
    # caret: the first non-zero part given is not allowed to change
    if not known:
        return _ANY
    a = known[0]
    if a > 0 or len(known) == 1:
        return Interval((low, True), ((a + 1, 0, 0), False))
    b = known[1]
    if b > 0 or len(known) == 2:
        return Interval((low, True), ((0, b + 1, 0), False))
    return Interval((low, True), ((0, 0, known[2] + 1), False))


def _intersect(a: Interval, b: Interval) -> Interval:
    low = max(a.low, b.low, key=lambda x: (x[0], not x[1]))
    high = min(a.high, b.high, key=lambda x: (x[0], x[1]))
    return Interval(low, high)


def _hyphen(lo: str, hi: str) -> Interval:
    ml, mh = _COMPARATOR.match(lo), _COMPARATOR.match(hi)
    if not ml or not mh or ml[1] or mh[1]:
        raise RangeError(f"cannot read hyphen range {lo} - {hi}")
    hp = _parts(mh)
    exact = all(p is not None for p in hp)
    high: Bound = (_floor(hp), True) if exact else (_next_up(hp), False)
    return Interval((_floor(_parts(ml)), True), high)


def parse_range(text: str) -> list[Interval]:
    """The intervals (alternatives) of an npm range; raises :class:`RangeError`."""
    text = text.strip()
    if text in ("", "*", "x", "X", "latest", "node", "current"):
        return [_ANY]
    out = []
    for alt in text.split("||"):
        alt = alt.strip()
        if not alt:
            out.append(_ANY)
            continue
        hy = _HYPHEN.match(alt)
        if hy:
            out.append(_hyphen(hy[1], hy[2]))
            continue
        # ">= 18" → ">=18": operators may be followed by spaces
        alt = re.sub(r"(<=|>=|<|>|=|\^|~>?)\s+", r"\1", alt)
        interval = _ANY
        for word in alt.split():
            interval = _intersect(interval, _comparator(word))
        out.append(interval)
    return [i for i in out if not i.empty()] or [Interval(((1, 0, 0), True), ((0, 0, 0), True))]


def satisfies(version: str | Version, range_text: str) -> bool:
    """Whether ``version`` is in the npm range ``range_text`` (raises :class:`RangeError`)."""
    v = parse_version(version) if isinstance(version, str) else version
    return any(i.contains(v) for i in parse_range(range_text))


def range_floor(range_text: str) -> Version | None:
    """The lowest version a range allows (None when it allows none)."""
    lows = [i.low[0] for i in parse_range(range_text) if not i.empty()]
    return min(lows) if lows else None


def allowed_majors(range_text: str, limit: int = 100) -> list[int]:
    """The majors (below ``limit``) with at least one release the range allows."""
    out: set[int] = set()
    for i in parse_range(range_text):
        if i.empty():
            continue
        (hi, inclusive) = i.high
        last = hi[0] if inclusive or hi > (hi[0], 0, 0) else hi[0] - 1
        out.update(range(i.low[0][0], min(last, limit - 1) + 1))
    return sorted(out)


# ------------------------------------------------------------------------------ declarations


@dataclass(frozen=True)
class Declared:
    """What a project says about its Node version."""

    pin: str | None = None
    """A preferred version or major (``"20"``, ``"20.11.1"``), from ``pin_source``."""
    pin_source: str | None = None
    engines: str | None = None
    """The ``engines.node`` range, as written."""
    notes: tuple[str, ...] = ()

    @property
    def pin_major(self) -> int | None:
        return parse_version(self.pin)[0] if self.pin else None


def _pin_text(text: str) -> str | None:
    """A version from an ``.nvmrc``/``.node-version`` line; None for aliases without one."""
    word = text.strip().split()[0] if text.strip() else ""
    word = word.lower()
    if word.startswith("lts/"):
        return str(LTS_CODENAMES[word[4:]]) if word[4:] in LTS_CODENAMES else None
    if re.match(r"^v?\d+(\.\d+){0,2}$", word):
        return word.lstrip("v")
    return None


def declared_node(repo: Path, pkg: dict[str, Any]) -> Declared:
    """Read ``volta.node``, ``.node-version``, ``.nvmrc`` and ``engines.node``."""
    notes: list[str] = []
    pin = source = None
    volta = pkg.get("volta")
    if isinstance(volta, dict) and isinstance(volta.get("node"), str):
        pin, source = _pin_text(volta["node"]), "package.json volta.node"
    for name in (".node-version", ".nvmrc"):
        if pin is not None:
            break
        try:
            text = (repo / name).read_text(errors="replace")[:200]
        except OSError:
            continue
        value = _pin_text(text)
        if value is None:
            if text.strip():
                notes.append(f"{name} {text.strip()[:40]!r} names no version (ignored)")
            continue
        pin, source = value, name
    engines = pkg.get("engines")
    rng = engines.get("node") if isinstance(engines, dict) else None
    if rng is not None and not isinstance(rng, str):
        notes.append(f"engines.node is not a string ({json.dumps(rng)[:40]}): ignored")
        rng = None
    if isinstance(rng, str):
        try:
            parse_range(rng)
        except RangeError:
            notes.append(f"engines.node {rng!r} is not a range this reader understands: ignored")
            rng = None
    return Declared(pin=pin, pin_source=source, engines=rng, notes=tuple(notes))


# ------------------------------------------------------------------------------ choice


@dataclass(frozen=True)
class Choice:
    """The Node a recipe asks for (``major``: the image tag) and the host install that runs it
    on the local backend (``host``); ``problem`` is set when nothing fits."""

    major: int | None
    host: str | None
    reason: str
    notes: tuple[str, ...] = ()
    problem: str = ""


def _closest(versions: list[str], major: int) -> str:
    """The install whose major is nearest ``major`` (a newer one wins a tie; newest patch)."""

    def key(v: str) -> tuple[int, int, Version]:
        pv = parse_version(v)
        return (abs(pv[0] - major), 0 if pv[0] >= major else 1, tuple(-x for x in pv))  # type: ignore[return-value]

    return min(versions, key=key)


def choose_node(declared: Declared, hosts: list[str], default: str | None) -> Choice:
    """Decide the image major and host install from a project's declarations.

    ``hosts`` are the Node versions the local sandbox can map onto (``default``, the one on
    ``PATH``, among them).
    """
    notes = list(declared.notes)
    hosts = sorted(dict.fromkeys(h for h in [*hosts, default] if h), key=parse_version)
    rng = declared.engines
    installed = ", ".join(hosts) or "none"
    if not hosts:
        return Choice(None, None, "", tuple(notes), "Node.js is not installed on this host")
    pin_major = declared.pin_major
    if rng is None:
        if pin_major is None:
            host = default or hosts[-1]
            return Choice(parse_version(host)[0], host, "the host's default Node", tuple(notes))
        host = _closest(hosts, pin_major)
        if parse_version(host)[0] != pin_major:
            notes.append(
                f"{declared.pin_source} asks for Node {declared.pin}; this host has {installed}:"
                f" the local sandbox maps node:{pin_major} to the closest, Node {host}"
            )
        return Choice(pin_major, host, f"{declared.pin_source} {declared.pin}", tuple(notes))
    fitting = [h for h in hosts if satisfies(h, rng)]
    if fitting:
        pinned = [h for h in fitting if pin_major is not None and parse_version(h)[0] == pin_major]
        if pinned:
            host = pinned[-1]
            why = f"{declared.pin_source} {declared.pin}, within engines.node {rng!r}"
        else:
            if pin_major is not None:
                notes.append(
                    f"{declared.pin_source} asks for Node {declared.pin}, not installed here or"
                    f" outside engines.node {rng!r}: the engines range decides"
                )
            host = default if default in fitting else fitting[-1]
            why = f"engines.node {rng!r}"
        return Choice(parse_version(host)[0], host, why, tuple(notes))
    floor = range_floor(rng)
    if floor is not None and all(parse_version(h) < floor for h in hosts):
        return Choice(
            None,
            None,
            "",
            tuple(notes),
            f"engines.node {rng!r} needs Node ≥ {format_version(floor)}; this host has"
            f" {installed} (the local sandbox maps node:* onto host installs under /usr or /opt;"
            " install a newer Node there)",
        )
    majors = allowed_majors(rng)
    newest = parse_version(hosts[-1])[0]
    if pin_major in majors:
        major: int | None = pin_major
    else:
        major = max((m for m in majors if m <= newest), default=majors[0] if majors else None)
    if major is None:
        return Choice(None, None, "", tuple(notes), f"engines.node {rng!r} allows no version")
    host = _closest(hosts, major)
    notes.append(
        f"engines.node {rng!r} excludes every Node on this host ({installed}), which are newer:"
        f" node:{major} is recorded and the local sandbox runs the closest, Node {host}"
    )
    return Choice(major, host, f"engines.node {rng!r}", tuple(notes))
