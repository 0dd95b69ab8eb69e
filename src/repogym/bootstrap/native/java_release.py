"""Compiling a raised project against Java 8's class library (``--release 8``).

A project raised from Java 5/6 to :data:`RAISED_LEVEL` (:mod:`.pom_edits`) is compiled by javac
17 or newer. With ``-source 8 -target 8`` javac still compiles against its own JDK's class
library, where ``java.lang.Record`` (16+) makes a project's own wildcard-imported ``Record``
ambiguous (univocity-parsers: "reference to Record is ambiguous"). ``--release 8`` compiles
against Java 8's API instead, but it also hides the JDK's internal packages (``sun.misc`` …),
so it is used only when no Java source of the reactor names one.

How (all in the image, noted in the recipe):

* ``-Dmaven.compiler.release=8`` in ``.mvn/maven.config`` (read by Maven 3.3.1+ in every mvn
  call, an agent's own included). maven-compiler-plugin 3.6+ reads it, and then hands javac
  ``--release 8`` *instead of* ``-source``/``-target`` (plexus-compiler-javac's
  ``buildCompilerArguments``: release set → ``--release`` only; ``mvn -X`` with plugin 3.14.1
  and ``<source>8</source>`` in the POM shows ``-g --release 8`` and no ``-source``); older
  plugins ignore the property and compile as before.
* maven-compiler-plugin versions older than :data:`RELEASE_PLUGIN_FLOOR` pinned in the POMs
  (literally after its ``<artifactId>``, or through a property the reactor defines) are raised
  to :func:`current_plugin` for the chosen Maven. A pin the recipe cannot edit (in a parent POM
  outside the repository) stays, and the build compiles as before.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from repogym.bootstrap._files import read_text
from repogym.bootstrap.native.pom import Pom, version_key
from repogym.bootstrap.native.pom_edits import RAISED_LEVEL, _ere

RELEASE_PROPERTY = "maven.compiler.release"
MAVEN_CONFIG = ".mvn/maven.config"
MAVEN_CONFIG_FROM = (3, 3, 1)
"""The first Maven that reads ``.mvn/maven.config``."""
RELEASE_PLUGIN_FLOOR = (3, 8)
"""Compiler plugin pins older than this are raised: ``release`` came in 3.6 (3.6 and 3.7 hand
javac ``--release`` too; the floor keeps clear of those first versions)."""
CURRENT_PLUGINS = (((3, 6, 3), "3.14.1"), ((3, 2, 5), "3.12.1"), ((3, 0), "3.8.1"))
"""(oldest Maven it runs on, maven-compiler-plugin release on Maven Central), newest first."""
MAX_SOURCE_FILES = 30_000
_INTERNAL = re.compile(r"(?<![\w.$])(?:sun|com\.sun|jdk\.internal)\.[A-Za-z_$]")
_NOT_CODE = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
_CLASH = re.compile(
    r"bootclasspath|extdirs|endorseddirs|--add-|--system"
    r"|(?:^|\s)--?(?:source|target|release)(?:[\s=]|$)"
)
"""Compiler arguments javac refuses beside ``--release`` (or that already choose a level)."""
_REF = re.compile(r"^\$\{([^}]+)\}$")


def current_plugin(maven: str) -> str:
    """The maven-compiler-plugin release old pins are raised to: the newest one ``maven``
    runs."""
    for floor, plugin in CURRENT_PLUGINS:
        if version_key(maven) >= floor:
            return plugin
    return CURRENT_PLUGINS[-1][1]


def _code(text: str) -> str:
    """Java source without comments and string/char literals (``Class.forName("sun.…")``
    needs nothing at compile time)."""
    return _NOT_CODE.sub(" ", text)


def _source_roots(pom: Pom) -> list[str]:
    base = Path(pom.path).parent
    roots = {"src/main/java", "src/test/java"}
    for key in ("build/sourceDirectory", "build/testSourceDirectory"):
        value = pom.resolve(pom.find(key))
        if value and "${" not in value and not value.startswith("/"):
            roots.add(value.strip().strip("/"))
    return sorted((base / r).as_posix() for r in roots)


def internal_api_users(repo: Path, poms: list[Pom]) -> list[str] | None:
    """Java sources of the reactor (main and test roots of every module) whose code names a
    ``sun.``/``com.sun.``/``jdk.internal.`` package; None when there are too many to read."""
    found: list[str] = []
    count = 0
    top = repo.resolve()
    for rel in sorted({r for pom in poms for r in _source_roots(pom)}):
        root = (repo / rel).resolve()
        if not root.is_dir() or not root.is_relative_to(top):
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(filenames):
                if not name.endswith(".java"):
                    continue
                count += 1
                if count > MAX_SOURCE_FILES:
                    return None
                path = Path(dirpath) / name
                if _INTERNAL.search(_code(read_text(path) or "")):
                    found.append(path.relative_to(top).as_posix())
    return found


def _clashing_compiler_args(poms: list[Pom]) -> list[str]:
    """Compiler plugin arguments that do not go with ``--release``; and compilers other than
    javac (error-prone's becomes plain javac, :mod:`.pom_edits`)."""
    out = []
    for pom in poms:
        for config in pom.plugin_configs("maven-compiler-plugin", profiles=True):
            compiler = (config.findtext("compilerId") or "javac").strip()
            if compiler not in ("javac", "javac-with-errorprone"):
                out.append(f"compilerId {compiler} ({pom.path})")
            args = [config.findtext("compilerArgument") or ""]
            args += [a.text or "" for a in config.findall("compilerArgs/arg")]
            for node in config.findall("compilerArguments/*"):
                args += [f"-{node.tag}", node.text or ""]
            out += [f"{a.strip()} ({pom.path})" for a in args if _CLASH.search(a)]
    return out


@dataclass(frozen=True)
class ReleasePlan:
    """What the recipe edits to compile with ``--release 8``."""

    plugin: str
    """The maven-compiler-plugin version old pins become."""
    literal: tuple[str, ...] = ()
    """Old versions written after the plugin's ``<artifactId>``."""
    properties: tuple[tuple[str, str], ...] = ()
    """(property, old version) of pins through a property the reactor defines."""
    poms: tuple[str, ...] = ()
    """The POM files the version edits go to."""

    def describe(self) -> str:
        raised = [*self.literal, *(f"${{{n}}}={v}" for n, v in self.properties)]
        if not raised:
            return ""
        return f"; maven-compiler-plugin {', '.join(raised)} raised to {self.plugin}"


def _pin_regex(old: list[str], space: str) -> str:
    """A plugin's artifactId, an optional groupId, then one of the ``old`` versions; groups:
    1 what comes before the version, 3 the version (the same in Python and POSIX ERE)."""
    alternatives = "|".join(_ere(v) for v in old)
    artifact = f"<artifactId>{space}maven-compiler-plugin{space}</artifactId>{space}"
    group = f"(<groupId>[^<]*</groupId>{space})?"
    return f"({artifact}{group}<version>){space}({alternatives}){space}</version>"


def _old(version: str | None) -> bool:
    return bool(version) and version_key(version or "") < RELEASE_PLUGIN_FLOOR


def plan_release(repo: Path, poms: list[Pom], maven: str) -> ReleasePlan:
    """The edits that compile a raised reactor with ``--release 8``: the old compiler plugin
    pins the recipe can raise (checked against the POM text, so that the edit is known to
    apply)."""
    plugin = current_plugin(maven)
    literal: set[str] = set()
    properties: dict[str, str] = {}
    files: set[str] = set()
    for pom in poms:
        for node in pom.plugins("maven-compiler-plugin", profiles=True):
            text = (node.findtext("version") or "").strip()
            ref = _REF.match(text)
            if ref and _old(pom.resolve(text)):
                properties[ref[1]] = pom.resolve(text) or ""
            elif not ref and _old(text):
                literal.add(text)
    if literal:
        pattern = re.compile(_pin_regex(sorted(literal), r"\s*"))
        seen: set[str] = set()
        for pom in poms:
            found = pattern.findall(read_text(repo / pom.path, limit=2_000_000) or "")
            if found:
                files.add(pom.path)
                seen.update(m[2] for m in found)
        literal &= seen
    for name in list(properties):
        where = [p.path for p in poms if (p.root.findtext(f"properties/{name}") or "").strip()]
        if not where or _shared_with_other_plugins(poms, name):
            del properties[name]
        else:
            files.update(where)
    edited = tuple(p.path for p in poms if p.path in files)
    return ReleasePlan(plugin, tuple(sorted(literal)), tuple(sorted(properties.items())), edited)


def _shared_with_other_plugins(poms: list[Pom], name: str) -> bool:
    """Whether ``${name}`` is the version of a plugin other than the compiler's too."""
    for pom in poms:
        for node in pom.root.iter("plugin"):
            artifact = (node.findtext("artifactId") or "").strip()
            if artifact != "maven-compiler-plugin" and node.findtext("version") == f"${{{name}}}":
                return True
    return False


def release_script(plan: ReleasePlan) -> str:
    """Shell: the version edits of ``plan`` (``sed``), then the release property appended to
    ``.mvn/maven.config`` once (after a newline when the file does not end with one)."""
    files = " ".join(shlex.quote(p) for p in plan.poms)
    commands = []
    if plan.literal:
        expr = f"s#{_pin_regex(list(plan.literal), '[[:space:]]*')}#\\1{plan.plugin}</version>#g"
        commands.append(f"sed -z -i -E {shlex.quote(expr)} {files}")
    for name, value in plan.properties:
        old, prop = _ere(value), _ere(name)
        expr = f"s#<{prop}>[[:space:]]*{old}[[:space:]]*</{prop}>#<{name}>{plan.plugin}</{name}>#g"
        commands.append(f"sed -i -E {shlex.quote(expr)} {files}")
    line = f"-D{RELEASE_PROPERTY}={RAISED_LEVEL}"
    config = MAVEN_CONFIG
    commands.append(
        f"mkdir -p .mvn && touch {config} && {{ grep -qxF -- {line} {config} || {{ [ -z"
        f' "$(tail -c 1 {config})" ] || echo; echo {line}; }} >> {config}; }}'
    )
    return " && ".join(commands)


def release_refusal(repo: Path, poms: list[Pom], maven: str) -> str:
    """Why the raised project keeps ``-source``/``-target`` (empty: ``--release`` fits)."""
    if version_key(maven) < MAVEN_CONFIG_FROM:
        return f"Maven {maven} reads no {MAVEN_CONFIG}"
    clashes = _clashing_compiler_args(poms)
    if clashes:
        return f"compiler settings that do not go with --release: {', '.join(clashes[:3])}"
    users = internal_api_users(repo, poms)
    if users is None:
        return f"more than {MAX_SOURCE_FILES} Java sources to read for JDK-internal packages"
    if users:
        more = f" and {len(users) - 3} more" if len(users) > 3 else ""
        return (
            "the sources name JDK-internal packages (sun.*, com.sun.*, jdk.internal.*), which"
            f" --release hides: {', '.join(users[:3])}{more}"
        )
    return ""
