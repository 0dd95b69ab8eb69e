"""Edits a Maven recipe makes to the repository's POMs inside the image (``sed``, after every
copy of the POMs), each one noted in the recipe:

* **A Java release no host javac compiles for any more** (``1.5``/``1.6``; JDK 12+ dropped 6,
  JDK 20+ dropped 7): the compiler settings that say it are raised to :data:`RAISED_LEVEL` —
  the compiler plugin's ``<source>``/``<target>``/``<release>`` values and the properties they
  (or Maven's ``maven.compiler.*``, ``java.version``-style conventions) read. Code written for
  Java 5 compiles as Java 8 nearly always; the tests then run on the host JDK as for any other
  project.
* **A ``-SNAPSHOT`` parent POM from outside the repository** (jackson-* between releases): only
  Maven Central is reachable here, never a snapshot repository, so the parent becomes the
  release of that version when Central has it (what the snapshot turned into).
* **exec-maven-plugin running git** (handlebars.java's ``git submodule update --init``): the
  image holds an exported snapshot without ``.git`` and the repository's host is not reachable,
  so git fails (exit 128) and so does the build; the executable becomes ``true``.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from repogym.bootstrap.native.pom import (
    _CONVENTION_PROPS,
    _RELEASE_PROPS,
    _SOURCE_PROPS,
    Pom,
    java_level,
)

RAISED_LEVEL = 8
"""The release old projects are raised to: the oldest every host JDK here compiles for without
an 'obsolete' warning (javac 17 still takes 7, with a warning; javac 20+ does not)."""
_COMPILER_KEYS = ("source", "target", "testSource", "testTarget", "release")
_REF = re.compile(r"^\$\{([^}]+)\}$")


def _ere(text: str) -> str:
    """``text`` as a literal in a POSIX extended regular expression (sed -E)."""
    return re.sub(r"([.\[\]()*+?{}|^$\\])", r"\\\1", text)


def _referenced(pom: Pom, text: str | None, names: set[str], depth: int = 0) -> None:
    """Add to ``names`` the properties ``text`` reads, following ``${a}`` → ``${b}`` chains."""
    m = _REF.match((text or "").strip())
    if not m or depth > 10:
        return
    names.add(m[1])
    _referenced(pom, pom.properties.get(m[1]), names, depth + 1)


def level_elements(poms: list[Pom], below: int) -> list[str]:
    """Element names whose Java level values below ``below`` the recipe raises: compiler plugin
    keys holding a literal level, and the properties compiler settings read (sorted)."""
    names: set[str] = set()
    for pom in poms:
        for config in pom.plugin_configs("maven-compiler-plugin"):
            for key in _COMPILER_KEYS:
                text = (config.findtext(key) or "").strip()
                level = java_level(pom.resolve(text)) if text else None
                if level is None or level >= below:
                    continue
                if _REF.match(text):
                    _referenced(pom, text, names)
                else:
                    names.add(key)
        for prop in (*_RELEASE_PROPS, *_SOURCE_PROPS, *_CONVENTION_PROPS):
            level = java_level(pom.resolve(pom.properties.get(prop)))
            if level is not None and level < below:
                names.add(prop)
                _referenced(pom, pom.properties.get(prop), names)
        # Properties a parent POM outside the repository reads (jackson-parent's compiler
        # settings read ``javac.src.version``): named like a Java level, valued like an old one.
        for prop, value in pom.properties.items():
            level_like = _LEVEL_NAME.search(prop) and "plugin" not in prop.lower()
            if level_like and _OLD_LEVEL.fullmatch((pom.resolve(value) or "").strip()):
                names.add(prop)
    return sorted(names)


_LEVEL_NAME = re.compile(r"(?i)java|jdk|jre|javac|\bsource\b|\btarget\b|\brelease\b|src")
_OLD_LEVEL = re.compile(r"(1\.)?[1-7]")
ERRORPRONE_COMPILER = "javac-with-errorprone"


def errorprone_javac(poms: list[Pom]) -> list[str]:
    """The POMs whose compiler plugin runs plexus' ``javac-with-errorprone``: it bundles a javac
    9, which cannot read the class files of JDK 10+ (``class file has wrong version 61.0,
    should be 53.0``)."""
    found = []
    for pom in poms:
        configs = pom.plugin_configs("maven-compiler-plugin")
        if any((c.findtext("compilerId") or "").strip() == ERRORPRONE_COMPILER for c in configs):
            found.append(pom.path)
    return found


def plain_javac_script(poms: list[str]) -> str:
    """``sed`` that sets ``<compilerId>javac-with-errorprone</compilerId>`` to ``javac`` run as
    the JDK's own ``javac`` program (``<fork>true</fork>``), and ``forceJavacCompilerUse`` to
    false. In-process, the compiler is found on the plugin's class path, where error-prone's
    javac 9 still is: forced, that one again; else none at all ("No compiler is provided in
    this environment", javapoet)."""
    compiler = (
        f"s#<compilerId>[[:space:]]*{_ere(ERRORPRONE_COMPILER)}[[:space:]]*</compilerId>"
        "#<compilerId>javac</compilerId><fork>true</fork>#g"
    )
    force = (
        "s#<forceJavacCompilerUse>[[:space:]]*true[[:space:]]*</forceJavacCompilerUse>"
        "#<forceJavacCompilerUse>false</forceJavacCompilerUse>#g"
    )
    files = " ".join(shlex.quote(p) for p in poms)
    return f"sed -i -E -e {shlex.quote(compiler)} -e {shlex.quote(force)} {files}"


_GIT = re.compile(r"(?:[^<]*/)?git(?:\.exe)?")
NO_GIT = "true"
"""What runs instead of git: a command of every image that takes any arguments and exits 0."""


def git_exec(poms: list[Pom]) -> dict[str, list[str]]:
    """POM path → the git command lines its exec-maven-plugin runs (``<executable>git``,
    literal, in the plugin's or an execution's configuration, profiles included)."""
    found: dict[str, list[str]] = {}
    for pom in poms:
        for config in pom.plugin_configs("exec-maven-plugin", profiles=True):
            if not _GIT.fullmatch((config.findtext("executable") or "").strip()):
                continue
            args = [(a.text or "").strip() for a in config.findall("arguments/argument")]
            found.setdefault(pom.path, []).append(" ".join(["git", *args]).strip())
    return found


def no_git_script(poms: list[str]) -> str:
    """``sed`` that sets ``<executable>git</executable>`` (a path to git too) to :data:`NO_GIT`
    in the POM files ``poms``."""
    expr = (
        "s#<executable>[[:space:]]*([^<]*/)?git(\\.exe)?[[:space:]]*</executable>"
        f"#<executable>{NO_GIT}</executable>#g"
    )
    return f"sed -i -E {shlex.quote(expr)} {' '.join(shlex.quote(p) for p in poms)}"


def raise_level_script(elements: list[str], poms: list[str]) -> str:
    """``sed`` that sets ``<name>1.5</name>``-style values (below 8) of ``elements`` to
    :data:`RAISED_LEVEL` in the POM files ``poms``."""
    alternatives = "|".join(_ere(e) for e in elements)
    old = f"<({alternatives})>[[:space:]]*(1\\.)?[1-7][[:space:]]*</\\1>"
    expr = f"s#{old}#<\\1>{RAISED_LEVEL}</\\1>#g"
    return f"sed -i -E {shlex.quote(expr)} {' '.join(shlex.quote(p) for p in poms)}"


@dataclass(frozen=True)
class ParentRelease:
    """A snapshot parent POM and the release that replaces it."""

    group: str
    artifact: str
    snapshot: str
    release: str
    poms: tuple[str, ...]
    """The reactor POMs whose parent it is."""

    @property
    def coordinates(self) -> str:
        return f"{self.group}:{self.artifact}:{self.snapshot}"


def release_pom_url(central: str, group: str, artifact: str, version: str) -> str:
    path = group.replace(".", "/")
    return f"{central}/{path}/{artifact}/{version}/{artifact}-{version}.pom"


def on_central(url: str) -> bool:
    """Whether Maven Central serves ``url`` (a HEAD request; False on any error)."""
    from repogym.http import client

    try:
        with client(timeout=15.0) as c:
            return c.head(url).status_code == 200
    except Exception:  # noqa: BLE001 - any failure means "not known to be there"
        return False


def parent_release_script(parents: list[ParentRelease]) -> str:
    """``sed`` that replaces, inside ``<parent>`` of the POMs naming it, each snapshot parent's
    version by its release."""
    commands = []
    for p in parents:
        expr = (
            f"/<parent>/,/<\\/parent>/ s#<version>[[:space:]]*{_ere(p.snapshot)}[[:space:]]*"
            f"</version>#<version>{p.release}</version>#"
        )
        files = " ".join(shlex.quote(f) for f in p.poms)
        commands.append(f"sed -i -E {shlex.quote(expr)} {files}")
    return " && ".join(commands)
