"""The host's routed (non-loopback) address: what a networked sandbox can reach of the host.

Networked sandboxes get user-mode networking that refuses the host's loopback, so a test
service a sandbox must reach (an LLM judge stub, say) listens on this address instead."""

from __future__ import annotations

import socket
import subprocess


def routed_ipv4() -> str | None:
    """A non-loopback IPv4 address of this host (e.g. eth0's)."""
    try:
        out = subprocess.run(
            ["ip", "-4", "-o", "addr", "show", "scope", "global"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    for line in out.splitlines():
        fields = line.split()
        if "inet" in fields:
            return fields[fields.index("inet") + 1].split("/")[0]
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("192.0.2.1", 9))  # no packet is sent: only the route is looked up
        addr = s.getsockname()[0]
    except OSError:
        return None
    finally:
        s.close()
    return None if addr.startswith("127.") else addr
