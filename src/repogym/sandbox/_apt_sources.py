"""Why an ``apt-get install`` on a host-mapped base found no package, when the base is not
the reason: an apt source an earlier step added (a vendor's ``curl … | bash`` setup script
writing ``/etc/apt/sources.list.d/*``) whose host apt could not reach.

:func:`added_sources` compares the sandbox's ``sources.list.d`` with the host's (the mapped
base's own); :func:`unreachable_hosts` reads apt's ``Err:`` / ``W: Failed to fetch`` lines;
:func:`explain` joins the two into the one-line cause.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

SOURCES_DIR = "/etc/apt/sources.list.d"
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s\]]+", re.I)
_ERR = re.compile(r"^Err:\d+ (\S+)[^\n]*\n\s+(\S[^\n]*)", re.M)
_FETCH = re.compile(r"^W: Failed to fetch (\S+)\s+(\S[^\n]*)", re.M)


def source_hosts(text: str) -> list[str]:
    """The hosts of a ``.list`` or deb822 ``.sources`` file's URLs (comments skipped)."""
    hosts: list[str] = []
    for line in text.splitlines():
        line = line.split("#", 1)[0]
        for url in _URL.findall(line):
            host = urlsplit(url).hostname
            if host and host not in hosts:
                hosts.append(host)
    return hosts


def added_sources(
    list_dir: Callable[[str], list[str]], read: Callable[[str], str]
) -> dict[str, list[str]]:
    """Apt source files of the sandbox that the host (the mapped base) does not have, with
    their hosts; ``list_dir``/``read`` see the sandbox's files. Failures give {}."""
    host_dir = Path(SOURCES_DIR)
    out: dict[str, list[str]] = {}
    try:
        names = list_dir(SOURCES_DIR)
    except Exception:  # noqa: BLE001 - no such folder, or the sandbox is gone
        return {}
    for name in sorted(names):
        if not name.endswith((".list", ".sources")):
            continue
        path = f"{SOURCES_DIR}/{name}"
        try:
            text = read(path)
            if (host_dir / name).is_file() and (host_dir / name).read_text() == text:
                continue  # the base's own
        except Exception:  # noqa: BLE001 - unreadable: not ours to judge
            continue
        out[path] = source_hosts(text)
    return out


def unreachable_hosts(output: str) -> dict[str, str]:
    """Hosts apt could not fetch from, with apt's reason (first seen)."""
    out: dict[str, str] = {}
    for pattern in (_ERR, _FETCH):
        for url, why in pattern.findall(output):
            host = urlsplit(url).hostname
            if host:
                out.setdefault(host, why.strip()[:160])
    return out


def explain(missing: str, output: str, added: dict[str, list[str]]) -> str | None:
    """The one-line cause when apt sources added by earlier steps are involved, else None
    (the mapped base is then the likely cause)."""
    if not added:
        return None
    failed = unreachable_hosts(output)
    for path, hosts in added.items():
        for host in hosts:
            if host in failed:
                return (
                    f"apt-get cannot install {missing}: apt could not reach {host} "
                    f"({failed[host]}), the source an earlier step added in {path}"
                )
    listed = ", ".join(
        f"{path} ({', '.join(hosts)})" if hosts else path for path, hosts in added.items()
    )
    return (
        f"apt-get cannot install {missing}: neither the mapped base's archive nor the apt "
        f"sources earlier steps added provide it: {listed}"
    )
