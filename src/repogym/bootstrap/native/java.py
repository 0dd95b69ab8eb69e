"""Java projects built with Maven (``mvn test``, Surefire's XML reports as the results).

Detection reads the POMs (:mod:`.pom`): the reactor's modules, the Java release the project
compiles for (mapped onto the lowest host JDK that can compile it) and the Maven version it asks
for (the wrapper's, else an enforcer ``requireMavenVersion`` / ``<prerequisites>`` floor, else
:data:`DEFAULT_MAVEN`). Maven itself is downloaded from Maven Central in the first build step:
Debian's Maven 3.8.7 on the host is too old for many current plugins, and a downloaded Maven is
the same under Docker and the local sandbox. Gradle builds are refused: no Gradle distribution
server is reachable from these machines.
"""

from __future__ import annotations

import base64
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from repogym.bootstrap._files import read_text
from repogym.bootstrap.model import WORKDIR, DockerfileWriter, Recipe
from repogym.bootstrap.native.java_release import (
    RELEASE_PROPERTY,
    ReleasePlan,
    plan_release,
    release_refusal,
    release_script,
)
from repogym.bootstrap.native.maven_root import maven_root, maven_subfolder
from repogym.bootstrap.native.pom import (
    java_level,
    reactor,
    required_maven,
    snapshot_parents,
    version_key,
    wanted_java,
    wrapper_maven,
)
from repogym.bootstrap.native.pom_edits import (
    RAISED_LEVEL,
    ParentRelease,
    errorprone_javac,
    git_exec,
    level_elements,
    no_git_script,
    on_central,
    parent_release_script,
    plain_javac_script,
    raise_level_script,
    release_pom_url,
)
from repogym.bootstrap.native.project import NativeProject, reachable

CENTRAL = "https://repo.maven.apache.org/maven2"
CENTRAL_HOST = "repo.maven.apache.org"
DEFAULT_MAVEN = "3.9.11"
DEFAULT_MAVEN_SHA512 = (
    "bcfe4fe305c962ace56ac7b5fc7a08b87d5abd8b7e89027ab251069faebee516"
    "b0ded8961445d6d91ec1985dfe30f8153268843c89aa392733d1a3ec956c9978"
)
"""sha512 of ``apache-maven-3.9.11-bin.tar.gz`` (as published beside it on Maven Central); other
versions are checked against the ``.sha1`` Central serves."""
MAVEN_HOME = "/opt/maven"
LOCAL_REPO = "/opt/m2"
"""Maven's local repository inside the image (set in Maven's global settings.xml), so offline
runs, and an agent's own ``mvn`` calls, find what the build downloaded."""
LISTER_DIR = "/opt/repogym-java"
LISTER_SOURCE = Path(__file__).with_name("RepogymListTests.java")
GRADLE_FILES = ("build.gradle", "build.gradle.kts", "settings.gradle", "settings.gradle.kts")
SKIPS = (
    "-Drat.skip=true",
    "-Dcheckstyle.skip=true",
    "-Dspotless.check.skip=true",
    "-Dspotless.apply.skip=true",
    "-Denforcer.skip=true",
    "-Djacoco.skip=true",
    "-Dgpg.skip=true",
    "-Dmaven.javadoc.skip=true",
    "-Dmaven.source.skip=true",
    "-Danimal.sniffer.skip=true",
    "-Dpmd.skip=true",
    "-Dcpd.skip=true",
    "-Dspotbugs.skip=true",
    "-Dlicense.skip=true",
    "-Djapicmp.skip=true",
    "-Drevapi.skip=true",
    "-Dformatter.skip=true",
    "-Dimpsort.skip=true",
    "-Dgitbuildhook.install.skip=true",
    "-Dgitbuildhook.gitconfig.skip=true",
    "-Dgitbuildhook.init.skip=true",
)
"""Plugins that are not about tests and break or slow offline runs (license headers, style,
coverage, signing, API compatibility against released artifacts, git hooks and configuration:
the image holds a snapshot without ``.git``): skipped in every mvn call."""
NO_TESTS = "-Dtest=" + ",".join(
    f"{p}#repogymNoSuchTest" for p in ("Test*", "*Test", "*Tests", "*TestCase")
)
"""A filter no test matches: the build runs Surefire once so that it resolves its test-framework
provider (resolved only when tests run) while no test runs. Its classes are Surefire's default
includes (``*`` would take ``module-info`` for a test class)."""
LENIENT = (
    "-Dsurefire.failIfNoSpecifiedTests=false",
    "-DfailIfNoTests=false",
    "-Dmaven.test.failure.ignore=true",
)
"""The no-test runs of the build: no failure for the filter matching nothing, nor for tests that
run all the same (a POM's literal ``<test>`` suite, which ``-Dtest`` does not override:
jackson-databind's ``PrimarySuite``, whose network tests fail here)."""
ENV = {"LANG": "C.UTF-8"}
"""A UTF-8 locale (the official images set en_US.UTF-8; without one Java's default charset is
ASCII and tests with non-ASCII text fail)."""
REPORT_MARK = "REPOGYM-SUREFIRE-REPORT"
REPORT_END = "REPOGYM-SUREFIRE-END"


@dataclass
class JavaProject(NativeProject):
    """A Maven repository: the reactor's POMs, the JDK and the Maven version chosen."""

    build: str = "maven"
    modules: list[str] = field(default_factory=list)
    """The reactor's POMs, relative to the repository (root first)."""
    java_wanted: int | None = None
    java_from: str = ""
    maven_version: str = DEFAULT_MAVEN
    maven_from: str = ""
    phase: str = "test"
    """The lifecycle phase tests run in: ``package`` for a multi-module reactor, so that modules
    see each other's jars (test-jar dependencies, module descriptors added when packaging)."""
    raise_elements: list[str] = field(default_factory=list)
    """POM elements whose too-old Java level the recipe raises (:mod:`.pom_edits`)."""
    parent_releases: list[ParentRelease] = field(default_factory=list)
    """Snapshot parent POMs the recipe replaces by their releases (:mod:`.pom_edits`)."""
    plain_javac: list[str] = field(default_factory=list)
    """POMs whose compiler runs error-prone's bundled javac 9: set to plain javac."""
    no_git: list[str] = field(default_factory=list)
    """POMs whose exec-maven-plugin runs git: set to run ``true``."""
    release: ReleasePlan | None = None
    """A raised project compiled against Java 8's API (:mod:`.java_release`)."""
    root: str = ""
    """The folder the Maven project is in, relative to the repository ("": the root); the
    other paths of the project (``modules``, POM edits) are relative to it, ``manifests`` to
    the repository (:mod:`.maven_root`)."""

    def to_json(self) -> dict[str, Any]:
        out = super().to_json()
        out["parent_releases"] = [asdict(p) for p in self.parent_releases]
        out["release"] = asdict(self.release) if self.release else None
        return out


def java_markers(repo: Path, *, beside_python: bool = False) -> list[str]:
    """The Java build files at the root that make it a Java repository (for the language guess):
    a pom.xml, else Gradle's files; with strong Python markers beside them (``beside_python``)
    only when Java or Kotlin sources are in the usual layout (``src/main/java``, one module
    down too)."""
    found = ["pom.xml"] if (repo / "pom.xml").is_file() else []
    found = found or [n for n in GRADLE_FILES if (repo / n).is_file()]
    if found and beside_python and not _has_java_sources(repo):
        return []
    return found


def _has_java_sources(repo: Path) -> bool:
    for pattern in ("src/main/*", "src/test/*", "*/src/main/*", "*/src/test/*"):
        for path in repo.glob(pattern):
            if path.name in ("java", "kotlin") and path.is_dir():
                return True
    return False


def _oldest_target(jdk: int) -> int:
    """The oldest release javac of JDK ``jdk`` compiles for: 12+ dropped 6, 20+ dropped 7."""
    return 6 if jdk < 12 else 7 if jdk < 20 else 8


def _pick_jdk(wanted: int | None, jdks: dict[str, Path]) -> tuple[str | None, str]:
    """``(host JDK major, note or refusal)``: the lowest host JDK >= ``wanted``."""
    majors = sorted(int(k) for k in jdks)
    if not majors:
        return None, "Java project, but no JDK on this host (/usr/lib/jvm)"
    have = ", ".join(str(m) for m in majors)
    if wanted is None:
        return str(majors[0]), f"no Java release named in the POMs: JDK {majors[0]}"
    fits = [m for m in majors if m >= wanted]
    if not fits:
        return None, f"the project compiles for Java {wanted}; the host's JDKs ({have}) are older"
    oldest_ok = _oldest_target(fits[0])
    if wanted < oldest_ok:
        return None, (
            f"the project compiles for Java {wanted}; JDK {fits[0]} (the oldest here) compiles"
            f" for Java {oldest_ok} and newer"
        )
    note = f"Java {wanted} → JDK {fits[0]}"
    if fits[0] != wanted:
        note += f" (no JDK {wanted} here: javac {fits[0]} compiles for {wanted}, tests run on"
        note += f" {fits[0]})"
    return str(fits[0]), note


def _raise_old_release(project: JavaProject, poms: list, jdks: dict[str, Path]) -> None:
    """A release older than the oldest host JDK compiles for: raised to :data:`RAISED_LEVEL`
    in the POMs when the compiler settings that name it are found (else left to refuse)."""
    wanted = project.java_wanted
    majors = sorted(int(k) for k in jdks)
    if wanted is None or not majors or wanted >= _oldest_target(majors[0]):
        return
    elements = level_elements(poms, RAISED_LEVEL)
    if not elements:
        return
    project.raise_elements = elements
    project.notes.append(
        f"the project compiles for Java {wanted} ({project.java_from}), older than javac"
        f" {majors[0]} compiles for: raised to Java {RAISED_LEVEL} in the POMs (sed in the"
        f" image: {', '.join(f'<{e}>' for e in elements)})"
    )
    project.java_wanted, project.java_from = RAISED_LEVEL, "raised"


def _snapshot_parents(project: JavaProject, repo: Path, poms: list) -> str:
    """Snapshot parents outside the repository → their releases on Central (noted), or the
    refusal when one has none there."""
    for (group, artifact, version), paths in snapshot_parents(repo, poms).items():
        release = version.removesuffix("-SNAPSHOT")
        if not on_central(release_pom_url(CENTRAL, group, artifact, release)):
            return (
                f"the parent POM {group}:{artifact}:{version} is a snapshot outside the"
                " repository: snapshot repositories are not reachable here (only Maven"
                f" Central), and Maven Central has no release {release} of it"
            )
        parent = ParentRelease(group, artifact, version, release, tuple(paths))
        project.parent_releases.append(parent)
        project.notes.append(
            f"the parent POM {parent.coordinates} is a snapshot (snapshot repositories are not"
            f" reachable here): replaced by its release {release} from Maven Central"
        )
    return ""


def _compile_for_release(project: JavaProject, repo: Path, poms: list) -> None:
    """A raised project compiles against Java 8's API (``--release 8``) unless something in it
    stands against that (:mod:`.java_release`); noted either way."""
    refusal = release_refusal(repo, poms, project.maven_version)
    if refusal:
        project.notes.append(
            f"compiled with -source/-target {RAISED_LEVEL} against the JDK's own class library,"
            f" not --release {RAISED_LEVEL}: {refusal}"
        )
        return
    project.release = plan_release(repo, poms, project.maven_version)
    project.notes.append(
        f"compiled against Java {RAISED_LEVEL}'s API (--release {RAISED_LEVEL}: newer JDK"
        " classes such as java.lang.Record would clash with the project's own names):"
        f" -D{RELEASE_PROPERTY}={RAISED_LEVEL} in .mvn/maven.config"
        f"{project.release.describe()} (in the image)"
    )


def _no_git(project: JavaProject, poms: list) -> None:
    """exec-maven-plugin runs of git → ``true`` (noted with the commands)."""
    runs = git_exec(poms)
    if not runs:
        return
    project.no_git = list(runs)
    commands = "; ".join(f"{c} ({path})" for path, cs in runs.items() for c in dict.fromkeys(cs))
    project.notes.append(
        f"the build runs git through exec-maven-plugin: {commands}. The image holds a snapshot"
        " without .git and the repository's host is not reachable, so the executable is set to"
        " `true` (sed in the image); submodules from the repository's host are not there, and"
        " tests that read them fail at every revision and are therefore never graded"
    )


def _pick_maven(repo: Path, poms: list) -> tuple[str, str]:
    """``(Maven version, where it was read)``."""
    wrapper = wrapper_maven(repo)
    if wrapper:
        return wrapper, "the Maven wrapper (.mvn/wrapper/maven-wrapper.properties)"
    floors = [(v, p.path) for p in poms for v in [required_maven(p)] if v]
    if floors:
        floor, where = max(floors, key=lambda f: version_key(f[0]))
        if version_key(floor) > version_key(DEFAULT_MAVEN):
            return floor, f"the lowest version {where} allows"
        return DEFAULT_MAVEN, f"default ({where} asks for >= {floor})"
    return DEFAULT_MAVEN, "default (the project names no Maven version)"


def detect_java(
    repo: Path, *, jdks: dict[str, Path] | None = None, central: bool | None = None
) -> JavaProject:
    """Detect a Maven project (``jdks``/``central`` replace host discovery, for tests)."""
    project = JavaProject("java")
    gradle = [g for g in GRADLE_FILES if (repo / g).is_file()]
    if not (repo / "pom.xml").is_file():
        folder, why = (None, "") if gradle else maven_subfolder(repo)
        if folder:
            project = detect_java(repo / folder, jdks=jdks, central=central)
            project.root = folder
            project.manifests = [f"{folder}/{m}" for m in project.manifests]
            project.notes.insert(0, why)
            return project
        project.build = "gradle" if gradle else "none"
        project.manifests = gradle
        project.problem = (
            f"Gradle build ({', '.join(gradle)}) without a pom.xml: no Gradle distribution can be"
            " downloaded here (services.gradle.org is not reachable); only Maven is supported"
            if gradle
            else why or "no pom.xml at the repository root"
        )
        return project
    poms, unreadable = reactor(repo)
    if not poms:
        project.problem = "pom.xml is not a readable Maven POM (not XML, a DOCTYPE, or too big)"
        return project
    project.modules = [p.path for p in poms]
    project.manifests = list(project.modules)
    if (repo / ".mvn").is_dir():
        project.manifests.append(".mvn/")
    if unreadable:
        project.notes.append(f"module POMs not read: {', '.join(unreadable[:5])}")
    if len(poms) > 1:
        project.phase = "package"
        project.notes.append(
            f"multi-module build: {len(poms)} POMs; tests run in the package phase (modules use"
            " each other's jars)"
        )
    project.problem = _snapshot_parents(project, repo, poms)
    if project.problem:
        return project
    if gradle:
        project.notes.append(f"also has {', '.join(gradle)}: built with Maven")
    levels = [(lvl, where) for p in poms for lvl, where in [wanted_java(p)] if lvl is not None]
    if not levels:
        level = _java_from_files(repo)
        if level:
            levels = [level]
    if levels:
        project.java_wanted, project.java_from = max(levels, key=lambda x: x[0])
    if jdks is None:
        from repogym.sandbox import host_jdks

        jdks = host_jdks()
    _raise_old_release(project, poms, jdks)
    project.plain_javac = errorprone_javac(poms)
    if project.plain_javac:
        project.notes.append(
            "the compiler plugin runs error-prone's bundled javac 9 (compilerId"
            " javac-with-errorprone), which cannot read the class files of JDK 10+: set to plain"
            f" javac in {', '.join(project.plain_javac)} (no error-prone checks)"
        )
    _no_git(project, poms)
    major, note = _pick_jdk(project.java_wanted, jdks)
    if major is None:
        project.problem = note
        return project
    project.toolchain, project.toolchain_version = str(jdks[major]), major
    where = project.java_from if project.java_from not in ("", "raised") else ""
    project.notes.append(note + (f" ({where})" if where else ""))
    project.maven_version, project.maven_from = _pick_maven(repo, poms)
    project.notes.append(
        f"Maven {project.maven_version} from Maven Central at build time: {project.maven_from}"
    )
    if project.raise_elements:
        _compile_for_release(project, repo, poms)
    if not (reachable(CENTRAL_HOST) if central is None else central):
        project.problem = (
            "Maven project, but Maven Central (repo.maven.apache.org) is not reachable from this"
            " machine: Maven, its plugins and the dependencies cannot be downloaded"
        )
        return project
    project.fetch = True
    return project


def built_folders(repo: Path) -> list[str] | None:
    """The folders of the Maven modules a build of ``repo`` compiles, repository-relative
    (``""``: the root), the project one folder down included (:mod:`.maven_root`); None when
    no Maven project is found. Sources elsewhere (a second project beside it, a module the
    reactor does not list) are never built, so their code is not under test."""
    root, _ = maven_root(repo)
    if root is None:
        return None
    poms, _ = reactor(repo / root if root else repo)
    if not poms:
        return None
    return sorted(
        {"/".join(x for x in (root, str(Path(p.path).parent)) if x not in ("", ".")) for p in poms}
    )


def _java_from_files(repo: Path) -> tuple[int, str] | None:
    """The Java version ``.java-version`` or ``.sdkmanrc`` names (jenv, SDKMAN!)."""
    text = (read_text(repo / ".java-version") or "").strip()
    level = java_level(text.split("-")[0]) if text else None
    if level:
        return level, ".java-version"
    for line in (read_text(repo / ".sdkmanrc") or "").splitlines():
        if line.strip().startswith("java="):
            level = java_level(line.split("=", 1)[1].split("-")[0])
            if level:
                return level, ".sdkmanrc"
    return None


# ------------------------------------------------------------------------------------ recipe


def _mvn_flags(version: str) -> str:
    """Batch mode, and no download progress where Maven knows ``-ntp`` (3.6.1+)."""
    return "-B -ntp" if version_key(version) >= (3, 6, 1) else "-B"


def _mvn(version: str) -> str:
    """The ``mvn`` invocation of commands (a login shell resets PATH: name the folders)."""
    path = f'PATH="{MAVEN_HOME}/bin:${{JAVA_HOME:+$JAVA_HOME/bin:}}$PATH"'
    return f"{path} mvn {_mvn_flags(version)}"


def _maven_url(version: str) -> str:
    return f"{CENTRAL}/org/apache/maven/apache-maven/{version}/apache-maven-{version}-bin.tar.gz"


def _fetch_maven_words(version: str) -> list[str]:
    """``RUN`` words: download Maven, check its digest, unpack it, point it at the local repo."""
    url = _maven_url(version)
    get = 'get() { curl -fsSL -o "$2" "$1" || wget -qO "$2" "$1"; }'
    if version == DEFAULT_MAVEN:
        check = f'echo "{DEFAULT_MAVEN_SHA512}  /tmp/maven.tgz" | sha512sum -c -'
    else:
        check = (
            f'get {url}.sha1 /tmp/maven.sha1 && echo "$(head -c 40 /tmp/maven.sha1)  '
            '/tmp/maven.tgz" | sha1sum -c -'
        )
    mirror = ""
    if version_key(version) < (3, 2, 3):  # older Mavens name Central by http://, refused since 2020
        mirror = (
            "<mirrors><mirror><id>central-https</id><mirrorOf>central</mirrorOf>"
            f"<url>{CENTRAL}</url></mirror></mirrors>"
        )
    settings = f"<settings><localRepository>{LOCAL_REPO}</localRepository>{mirror}</settings>"
    script = "; ".join(
        [
            "set -e",
            get,
            f"get {url} /tmp/maven.tgz",
            check,
            f"mkdir -p {MAVEN_HOME} {LOCAL_REPO}",
            f"tar -xzf /tmp/maven.tgz -C {MAVEN_HOME} --strip-components=1",
            "rm -f /tmp/maven.tgz /tmp/maven.sha1",
            f"printf '%s\\n' '{settings}' > {MAVEN_HOME}/conf/settings.xml",
            f"ln -sf {MAVEN_HOME}/bin/mvn /usr/local/bin/mvn || true",
        ]
    )
    return [script]


def _lister_words() -> list[str]:
    """``RUN`` words: write the test lister's source (base64, wrapped) and compile it."""
    encoded = base64.b64encode(LISTER_SOURCE.read_bytes()).decode()
    chunks = [encoded[i : i + 88] for i in range(0, len(encoded), 88)]
    src = f"{LISTER_DIR}/RepogymListTests.java"
    return [
        f"mkdir -p {LISTER_DIR} && printf %s",
        *chunks,
        f"| base64 -d > {src} && javac -nowarn -d {LISTER_DIR} {src}",
    ]


def _report_loop() -> str:
    """Shell that prints every Surefire XML report between marker lines (sorted by path),
    without its ``<property>`` lines (the test JVM's system properties, one per line)."""
    return (
        "find . -type f -path '*/target/surefire-reports/TEST-*.xml' | LC_ALL=C sort"
        ' | while IFS= read -r f; do echo "'
        + REPORT_MARK
        + ' $f"; sed '
        + shlex.quote(r"/^ *<property name=.*\/>$/d")
        + ' "$f"; echo; echo "'
        + REPORT_END
        + '"; done'
    )


def _dependency_layer_words(mvn: str) -> list[str]:
    """``RUN`` words of the dependency layer (the POMs only, no source): the test lifecycle with
    the no-test filter, then ``dependency:go-offline``, both allowed to fail, then the
    ``target`` folders they left removed.

    Measured: ``go-offline`` alone stops at the first plugin it cannot resolve even when the
    build never runs it (commons-cli: 78 of 255 jars); the lifecycle run alone stops at the
    first module whose plugins need its classes (gson); together they fetch 95-98% of what the
    full build needs, and the step after the source fetches the rest.
    """
    skips = " ".join(SKIPS)
    lifecycle = f"{mvn} -q -fae {skips} test {shlex.quote(NO_TESTS)} {' '.join(LENIENT)}"
    offline = f"{mvn} -q -fae {skips} dependency:go-offline"
    done = shlex.quote("repogym: dependency layer incomplete (the next steps fetch the rest)")
    return [
        f"{lifecycle} || true;",
        f"{offline} || echo {done};",
        "find . -name target -type d -prune -exec rm -rf {} +",
    ]


def maven_test_function(version: str, phase: str = "test") -> str:
    """``repogym_mvn() {…}; repogym_mvn``: runs the tests offline, then prints the reports.

    Arguments appended to it (test selection) reach ``mvn``; stale reports are removed first.
    """
    mvn = " ".join(
        [
            _mvn(version),
            "-o -fae",
            *SKIPS,
            "-Dmaven.test.failure.ignore=true",
            "-Dmaven.test.redirectTestOutputToFile=true",
            "-DenableOutErrElements=false",
            phase,
        ]
    )
    body = (
        "find . -type d -path '*/target/surefire-reports' -prune -exec rm -rf {} +; "
        f'{mvn} "$@"; rc=$?; {_report_loop()}; return $rc'
    )
    return f"repogym_mvn() {{ {body}; }}; repogym_mvn"


def _pom_edit_words(project: JavaProject) -> list[str]:
    """``RUN`` words of the POM edits (:mod:`.pom_edits`); empty when there are none."""
    scripts = []
    if project.parent_releases:
        scripts.append(parent_release_script(project.parent_releases))
    if project.raise_elements:
        scripts.append(raise_level_script(project.raise_elements, project.modules))
    if project.plain_javac:
        scripts.append(plain_javac_script(project.plain_javac))
    if project.no_git:
        scripts.append(no_git_script(project.no_git))
    if project.release:
        scripts.append(release_script(project.release))
    return [" && ".join(scripts)] if scripts else []


def java_recipe(project: JavaProject) -> Recipe:
    if project.problem:
        raise ValueError(project.problem)
    jdk = project.toolchain_version or "17"
    image = f"eclipse-temurin:{jdk}"
    mvn = f"{MAVEN_HOME}/bin/mvn {_mvn_flags(project.maven_version)}"  # RUN keeps the PATH
    df = DockerfileWriter(
        f"repogym bootstrap recipe: JDK {jdk}, Maven {project.maven_version} (downloaded from"
        f" Maven Central), mvn {project.phase}.\nThe POMs come before the source snapshot so"
        " that tasks of one repository share the dependency layer; tests run offline (mvn -o)."
    )
    df.from_(image)
    df.workdir(WORKDIR)
    df.env(ENV)
    df.run(_fetch_maven_words(project.maven_version))
    sub = f"{project.root}/" if project.root else ""
    base = f"{WORKDIR}/{project.root}".rstrip("/")
    if project.root:
        df.workdir(base)  # the build steps run in the project's folder
    for rel in project.modules:
        df.copy([f"repo/{sub}{rel}"], f"{base}/{rel}")
    if f"{sub}.mvn/" in project.manifests:
        df.copy([f"repo/{sub}.mvn/"], f"{base}/.mvn/")
    edits = _pom_edit_words(project)
    if edits:
        df.run(edits)
    df.run(_dependency_layer_words(mvn))
    df.copy(["repo/"], f"{WORKDIR}/")
    if edits:
        df.run(edits)
    df.run([mvn, *SKIPS, project.phase, shlex.quote(NO_TESTS), *LENIENT])
    df.run([mvn, "-o", "-q", *SKIPS, project.phase, shlex.quote(NO_TESTS), *LENIENT])
    df.run(_lister_words())  # last: a new lister version rebuilds only this layer
    cd = f"cd {shlex.quote(project.root)} && " if project.root else ""
    if project.root:
        df.workdir(WORKDIR)
        notes = [f"build steps and test commands run in {project.root}/"]
    else:
        notes = []
    test = cd + maven_test_function(project.maven_version, project.phase)
    java = cd + 'PATH="${JAVA_HOME:+$JAVA_HOME/bin:}$PATH" java'
    return Recipe(
        language="java",
        runner="maven",
        base_image=image,
        dockerfile=df.render(),
        test_command=test,
        collect_command=f"{java} -cp {LISTER_DIR} RepogymListTests .",
        select_command=test,
        workdir=WORKDIR,
        env=ENV,
        notes=[
            *project.notes,
            *notes,
            "tests and main code are compiled in the image; Surefire's providers are resolved"
            " there by one run that selects no test; tests then run offline",
            "skipped in every mvn call (not about tests, break offline runs): "
            + " ".join(s.split("=")[0].removeprefix("-D") for s in SKIPS),
            "results: Surefire's XML reports, printed after mvn between "
            f"{REPORT_MARK} / {REPORT_END} lines",
            "collect: test methods of the compiled test classes (a parameterised method counts"
            " once)",
        ],
    )
