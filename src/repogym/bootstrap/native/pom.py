"""Reading Maven POMs without running Maven: the reactor's modules, properties, the Java release
and the Maven version a project asks for.

POMs come from the repository (untrusted): documents with a DOCTYPE (the only way to declare
entities) or over :data:`MAX_POM_BYTES` are not read at all.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from repogym.bootstrap._files import read_text

MAX_POM_BYTES = 2_000_000
MAX_MODULES = 500
_PROPERTY = re.compile(r"\$\{([^}]+)\}")


@dataclass
class Pom:
    """One POM: where it is (relative to the repository), its properties and its XML."""

    path: str
    root: ET.Element
    properties: dict[str, str] = field(default_factory=dict)

    def resolve(self, text: str | None, depth: int = 0) -> str | None:
        """``text`` with ``${name}`` replaced from this POM's properties (None: unresolvable)."""
        if text is None:
            return None
        text = text.strip()
        if "${" not in text:
            return text
        if depth > 10:
            return None
        missing = False

        def sub(m: re.Match[str]) -> str:
            nonlocal missing
            value = self.properties.get(m[1])
            if value is None:
                missing = True
                return m[0]
            return value

        out = _PROPERTY.sub(sub, text)
        return None if missing else self.resolve(out, depth + 1)

    def find(self, path: str) -> str | None:
        node = self.root.find(path)
        return node.text.strip() if node is not None and node.text else None

    def plugins(self, artifact_id: str, *, profiles: bool = False) -> list[ET.Element]:
        """``<plugin>`` elements of a plugin: build plugins and plugin management, and with
        ``profiles`` those of every profile too (whether or not it would be active)."""
        bases = [self.root]
        if profiles:
            bases += self.root.findall("profiles/profile")
        found = []
        for base in bases:
            for plugins in ("build/plugins", "build/pluginManagement/plugins"):
                for plugin in base.findall(f"{plugins}/plugin"):
                    if (plugin.findtext("artifactId") or "").strip() == artifact_id:
                        found.append(plugin)
        return found

    def plugin_configs(self, artifact_id: str, *, profiles: bool = False) -> list[ET.Element]:
        """``<configuration>`` elements of a plugin (build plugins and plugin management,
        executions included; with ``profiles``, those of every profile too)."""
        found = []
        for plugin in self.plugins(artifact_id, profiles=profiles):
            found += plugin.findall("configuration")
            found += plugin.findall("executions/execution/configuration")
        return found


def _strip_namespaces(root: ET.Element) -> ET.Element:
    for node in root.iter():
        if isinstance(node.tag, str) and node.tag.startswith("{"):
            node.tag = node.tag.split("}", 1)[1]
    return root


def read_pom(repo: Path, rel: str, parent: Pom | None = None) -> Pom | None:
    """The POM at ``repo/rel`` (None: missing, too big, with a DOCTYPE, or not XML).

    Properties: the parent's (when given), overridden by this POM's own, plus
    ``project.groupId``/``version``/``artifactId``.
    """
    text = read_text(repo / rel, limit=MAX_POM_BYTES)
    if text is None or re.search(r"<!DOCTYPE|<!ENTITY", text, re.I):
        return None
    try:
        root = _strip_namespaces(ET.fromstring(text))
    except ET.ParseError:
        return None
    if root.tag != "project":
        return None
    pom = Pom(rel, root, dict(parent.properties) if parent else {})
    for node in root.findall("properties/*"):
        if isinstance(node.tag, str):
            pom.properties[node.tag] = (node.text or "").strip()
    for key in ("version", "groupId", "artifactId"):
        value = pom.find(key) or pom.find(f"parent/{key}")
        if value and key != "artifactId":
            pom.properties.setdefault(f"project.{key}", value)
    if pom.find("artifactId"):
        pom.properties["project.artifactId"] = pom.find("artifactId") or ""
    return pom


def _module_poms(pom: Pom) -> list[str]:
    """Paths of the module POMs ``pom`` lists (default build: ``<modules>`` plus those of
    profiles active by default), relative to the repository."""
    entries = [m.text.strip() for m in pom.root.findall("modules/module") if m.text]
    for profile in pom.root.findall("profiles/profile"):
        if (profile.findtext("activation/activeByDefault") or "").strip() == "true":
            entries += [m.text.strip() for m in profile.findall("modules/module") if m.text]
    base = Path(pom.path).parent
    out = []
    for entry in entries:
        rel = (base / entry).as_posix()
        if not rel.endswith(".xml"):
            rel = f"{rel}/pom.xml"
        out.append(_normalise(rel))
    return out


def _normalise(rel: str) -> str:
    parts: list[str] = []
    for part in rel.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return "../"  # outside the repository
            parts.pop()
        else:
            parts.append(part)
    return "/".join(parts)


def reactor(repo: Path) -> tuple[list[Pom], list[str]]:
    """The root POM and its modules, recursively (root first); and the module POMs listed but
    not readable (missing, outside the repository, not XML)."""
    root = read_pom(repo, "pom.xml")
    if root is None:
        return [], ["pom.xml"]
    poms, unreadable, seen = [root], [], {"pom.xml"}
    queue = [root]
    while queue and len(poms) < MAX_MODULES:
        pom = queue.pop(0)
        for rel in _module_poms(pom):
            if rel in seen:
                continue
            seen.add(rel)
            # The aggregator is usually the module's parent too: its properties are inherited.
            module = None if rel.startswith("../") else read_pom(repo, rel, pom)
            if module is None:
                unreadable.append(rel)
                continue
            poms.append(module)
            queue.append(module)
    return poms, unreadable


def snapshot_parents(repo: Path, poms: list[Pom]) -> dict[tuple[str, str, str], list[str]]:
    """``(group, artifact, version)`` of each ``-SNAPSHOT`` parent POM that is neither in the
    reactor nor at its ``relativePath`` in the repository (it would come from a snapshot
    repository, which Maven Central is not) → the reactor POMs naming it as their parent."""
    inside = {(p.find("groupId") or p.find("parent/groupId"), p.find("artifactId")) for p in poms}
    found: dict[tuple[str, str, str], list[str]] = {}
    for pom in poms:
        version = pom.find("parent/version") or ""
        key = (pom.find("parent/groupId"), pom.find("parent/artifactId"))
        if not version.endswith("-SNAPSHOT") or key in inside:
            continue
        rel = (Path(pom.path).parent / (pom.find("parent/relativePath") or "../pom.xml")).as_posix()
        rel = _normalise(rel if rel.endswith(".xml") else f"{rel}/pom.xml")
        local = None if rel.startswith("../") else read_pom(repo, rel)
        if local is None or local.find("artifactId") != key[1]:
            found.setdefault((key[0] or "", key[1] or "", version), []).append(pom.path)
    return found


# ------------------------------------------------------------------------- what is asked for

_RELEASE_PROPS = ("maven.compiler.release",)
_SOURCE_PROPS = ("maven.compiler.source", "maven.compiler.target", "maven.compiler.testSource")
_CONVENTION_PROPS = ("java.version", "java.release", "jdk.version", "javaVersion")


def java_level(text: str | None) -> int | None:
    """``"1.8"`` → 8, ``"17"`` → 17; None for anything else."""
    m = re.fullmatch(r"\s*(?:1\.(\d+)|(\d+))(?:\.\d+)*\s*", text or "")
    if not m:
        return None
    return int(m[1] or m[2])


def wanted_java(pom: Pom) -> tuple[int | None, str]:
    """The Java release a POM compiles for and where that was read (``(None, "")``: not said)."""
    candidates: list[tuple[str, str | None]] = []
    candidates += [(f"property {p}", pom.properties.get(p)) for p in _RELEASE_PROPS]
    for config in pom.plugin_configs("maven-compiler-plugin"):
        candidates.append(("maven-compiler-plugin <release>", config.findtext("release")))
    source_levels: list[tuple[str, str | None]] = [
        (f"property {p}", pom.properties.get(p)) for p in _SOURCE_PROPS
    ]
    for config in pom.plugin_configs("maven-compiler-plugin"):
        for key in ("source", "target", "testSource", "testTarget"):
            source_levels.append((f"maven-compiler-plugin <{key}>", config.findtext(key)))
    convention = [(f"property {p}", pom.properties.get(p)) for p in _CONVENTION_PROPS]
    for group in (candidates, source_levels, convention):
        levels: list[tuple[int, str]] = []
        for where, value in group:
            level = java_level(pom.resolve(value)) if value else None
            if level is not None:
                levels.append((level, where))
        if levels:
            best, where = max(levels, key=lambda lw: lw[0])
            return best, f"{where} in {pom.path}"
    return None, ""


_WRAPPER_VERSION = re.compile(r"apache-maven[/-](\d+\.\d+\.\d+(?:-[\w.-]+?)?)(?:-bin\.|/)")


def wrapper_maven(repo: Path) -> str | None:
    """The Maven version ``.mvn/wrapper/maven-wrapper.properties`` downloads."""
    text = read_text(repo / ".mvn/wrapper/maven-wrapper.properties") or ""
    m = re.search(r"^\s*distributionUrl\s*=\s*(\S+)", text, re.M)
    if not m:
        return None
    found = _WRAPPER_VERSION.search(m[1].replace("\\:", ":"))
    return found[1] if found else None


def required_maven(pom: Pom) -> str | None:
    """The lowest Maven version the POM's enforcer rule (``requireMavenVersion``) or
    ``<prerequisites>`` allows (``"[3.6.3,)"`` → ``"3.6.3"``)."""
    ranges = []
    for config in pom.plugin_configs("maven-enforcer-plugin"):
        ranges += [v.text for v in config.findall("rules/requireMavenVersion/version") if v.text]
    prerequisite = pom.find("prerequisites/maven")
    if prerequisite:
        ranges.append(prerequisite)
    lows = []
    for text in ranges:
        value = pom.resolve(text) or ""
        m = re.match(r"^\s*[\[(]?\s*(\d+(?:\.\d+){0,2})", value)
        if m:
            lows.append(m[1])
    return max(lows, key=version_key) if lows else None


def version_key(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text)[:3])
