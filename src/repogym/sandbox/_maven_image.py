"""``maven:<tag>`` images: Maven on an official JDK image (``maven:3.9.6-eclipse-temurin-17``,
``maven:3.8.5-openjdk-17``, ``maven:3-jdk-11``, ``maven:latest``).

The JDK maps as for the JDK image the tag names (the host's JDK of that major; no JDK in the tag:
the newest host JDK, as for ``eclipse-temurin:latest``). ``mvn`` on ``PATH`` is a Maven the
host has under ``/usr`` (the folders sandboxes see): the image's own version when the host has
it, else the closest one (on a Debian host, Debian's Maven 3.8.7 in ``/usr/share/maven``), and
the mapping notes the difference.
"""

from __future__ import annotations

import functools
import glob
import re
import zipfile
from pathlib import Path

from repogym.sandbox import _toolchains
from repogym.sandbox._toolchains import BaseImage, UnsupportedBase

MAVEN_HOMES = (
    "/usr/share/maven",
    "/usr/share/maven3",
    "/usr/share/apache-maven*",
    "/usr/local/maven*",
    "/usr/local/apache-maven*",
    "/usr/local/lib/maven*",
    "/usr/local/lib/apache-maven*",
)
"""Where a host Maven may live (``bin/mvn`` and ``lib/maven-core*.jar`` inside)."""
_POM_PROPERTIES = "META-INF/maven/org.apache.maven/maven-core/pom.properties"
_TAG = re.compile(r"^(\d+(?:\.\d+){0,2})?(?:-(.*))?$")


def _core_version(home: Path) -> str | None:
    """The version of the Maven at ``home``, read from its ``maven-core`` jar."""
    for jar in sorted(home.glob("lib/maven-core*.jar")):
        try:
            with zipfile.ZipFile(jar) as z:
                text = z.read(_POM_PROPERTIES).decode("utf-8", "replace")
        except (OSError, KeyError, zipfile.BadZipFile):
            continue
        m = re.search(r"^version=(\S+)", text, re.M)
        if m:
            return m.group(1)
    return None


@functools.lru_cache(maxsize=1)
def host_mavens() -> dict[str, Path]:
    """Maven version → its home on this host (only under ``/usr``)."""
    found: dict[str, Path] = {}
    for pattern in MAVEN_HOMES:
        for name in sorted(glob.glob(pattern)):
            home = Path(name).resolve()
            if not (home / "bin" / "mvn").is_file():
                continue
            version = _core_version(home)
            if version:
                found.setdefault(version, home)
    return found


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version)[:3])


def pick_maven(wanted: str, mavens: dict[str, Path]) -> tuple[str, Path] | None:
    """The host Maven for an image's Maven version ``wanted`` (``"3.9.6"``, ``"3"``, ``""``):
    the newest that shares the longest version prefix with it (3.8.5 → a 3.8.x before a 3.9.x),
    else the newest host Maven."""
    if not mavens:
        return None
    ordered = sorted(mavens, key=_key, reverse=True)
    prefix = _key(wanted)
    for size in range(len(prefix), 0, -1):
        for version in ordered:
            if _key(version)[:size] == prefix[:size]:
                return version, mavens[version]
    return ordered[0], mavens[ordered[0]]


def maven_image(image: str, tag: str, host: str) -> BaseImage:
    """Map ``maven:<tag>``: the JDK as for its JDK image, ``mvn`` from a host Maven."""
    m = _TAG.match(tag if tag != "latest" else "")
    wanted, rest = (m.group(1) or "", m.group(2) or "") if m else ("", tag)
    jdk = re.search(r"(?<![\d.])(\d+)(?:[.\d]*)((?:-[a-z][\w.]*)*)$", rest)
    base = _toolchains._jdk(image, f"{jdk.group(1)}{jdk.group(2)}" if jdk else "latest", host)
    found = pick_maven(wanted, host_mavens())
    if found is None:
        raise UnsupportedBase(
            f"{image} needs Maven; this host has none under /usr (apt-get install maven)"
        )
    version, home = found
    notes = [base.mapping.get("note", "")]
    if wanted and _key(version)[: len(_key(wanted))] == _key(wanted):
        notes.append(f"mvn is the host's Maven {version} ({home})")
    else:
        stands = f"Maven {wanted}" if wanted else "the newest Maven"
        mvn = f"mvn on PATH is the host's Maven {version} ({home})"
        notes.append(f"{image} stands for {stands}; {mvn}")
    base.mapping["maven"] = version
    base.mapping["note"] = "; ".join(n for n in notes if n)
    base.env = {
        **base.env,
        "MAVEN_HOME": str(home),
        "PATH": f"{home}/bin:{base.env['PATH']}",
    }
    base.fingerprint = _toolchains._fingerprint(base.fingerprint, "maven", str(home), version)
    return base
