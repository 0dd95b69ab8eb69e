"""Java (Maven): detection from the POMs, the language guess, the recipe, test selection, the
compiled-class test lister, and (slow) a real Maven build in the local sandbox."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from repogym.bootstrap import UnsupportedRepo, check_recipe, detect, guess_language, make_recipe
from repogym.bootstrap.model import count_collected, select_tests
from repogym.bootstrap.native import java
from repogym.shipped.parsers import ERROR, FAILED, PASSED, SKIPPED, parse_log

from .conftest import local_backend_with_private_cache, write_tree

MakeRepo = Callable[..., Path]
JDKS = {"17": Path("/fake/jvm/java-17"), "25": Path("/fake/jvm/temurin-25")}


@pytest.fixture(autouse=True)
def fake_host(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """JDKs 17 and 25 and a reachable Maven Central, whatever the host has (unit tests)."""
    if "local_backend" in request.fixturenames:
        return
    import repogym.sandbox

    monkeypatch.setattr(repogym.sandbox, "host_jdks", lambda: dict(JDKS))
    monkeypatch.setattr(java, "reachable", lambda host, port=443, timeout=3.0: True)
    monkeypatch.setattr(java, "on_central", lambda url: False)  # no release of a snapshot


def pom(body: str = "", *, artifact: str = "demo", parent: bool = False) -> str:
    head = (
        "<parent><groupId>com.example</groupId><artifactId>root</artifactId>"
        "<version>1.0</version></parent>"
        if parent
        else "<groupId>com.example</groupId><version>1.0</version>"
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
        f"  <modelVersion>4.0.0</modelVersion>{head}<artifactId>{artifact}</artifactId>\n"
        f"  {body}\n</project>\n"
    )


def props(**values: str) -> str:
    inner = "".join(f"<{k}>{v}</{k}>" for k, v in values.items())
    return f"<properties>{inner}</properties>"


def compiler(**config: str) -> str:
    inner = "".join(f"<{k}>{v}</{k}>" for k, v in config.items())
    return (
        "<build><pluginManagement><plugins><plugin>"
        "<artifactId>maven-compiler-plugin</artifactId>"
        f"<configuration>{inner}</configuration></plugin></plugins></pluginManagement></build>"
    )


# ------------------------------------------------------------------------------- detection


@pytest.mark.parametrize(
    ("body", "wanted", "jdk", "where"),
    [
        (props(**{"maven.compiler.release": "17"}), 17, "17", "property maven.compiler.release"),
        (props(**{"maven.compiler.release": "21"}), 21, "25", "property maven.compiler.release"),
        (compiler(release="11"), 11, "17", "maven-compiler-plugin <release>"),
        (
            props(**{"jdk": "1.8", "maven.compiler.source": "${jdk}"}),
            8,
            "17",
            "property maven.compiler.source",
        ),
        (compiler(source="1.7", target="1.7"), 7, "17", "maven-compiler-plugin <source>"),
        (props(**{"java.version": "25"}), 25, "25", "property java.version"),
        ("", None, "17", ""),
    ],
)
def test_java_release_maps_onto_the_lowest_host_jdk(
    make_repo: MakeRepo, body: str, wanted: int | None, jdk: str, where: str
) -> None:
    repo = make_repo({"pom.xml": pom(body)})
    d = detect(repo)
    assert d.supported, d.reason
    assert d.language == "java" and d.runner == "maven"
    assert d.base_image == f"eclipse-temurin:{jdk}"
    assert isinstance(d.native, java.JavaProject)
    assert d.native.java_wanted == wanted
    assert d.native.java_from.startswith(where)


def test_java_8_notes_the_newer_jdk(make_repo: MakeRepo) -> None:
    d = detect(make_repo({"pom.xml": pom(props(**{"maven.compiler.target": "1.8"}))}))
    assert any("Java 8 → JDK 17 (no JDK 8 here" in n for n in d.notes)


@pytest.mark.parametrize(
    ("level", "why"),
    [("26", "the host's JDKs (17, 25) are older")],
)  # a release too old for javac 17 is raised in the POMs (test_java_survey)
def test_java_release_no_host_jdk_can_build_is_refused(
    make_repo: MakeRepo, level: str, why: str
) -> None:
    d = detect(make_repo({"pom.xml": pom(props(**{"maven.compiler.release": level}))}))
    assert not d.supported and why in d.reason
    with pytest.raises(UnsupportedRepo, match="Java"):
        make_recipe(make_repo({"pom.xml": pom(props(**{"maven.compiler.release": level}))}))


def test_unresolvable_property_is_not_a_version(make_repo: MakeRepo) -> None:
    d = detect(make_repo({"pom.xml": pom(props(**{"maven.compiler.release": "${from.parent}"}))}))
    assert d.supported and d.native is not None
    assert getattr(d.native, "java_wanted", "?") is None


def test_multi_module_reactor_and_the_highest_release(make_repo: MakeRepo) -> None:
    root_body = (
        "<packaging>pom</packaging><modules><module>core</module><module>apps</module>"
        "</modules>"
        + props(**{"maven.compiler.release": "11"})
        + "<profiles><profile><id>extra</id><activation><activeByDefault>true</activeByDefault>"
        "</activation><modules><module>extra/pom-extra.xml</module></modules></profile>"
        "<profile><id>off</id><modules><module>off</module></modules></profile></profiles>"
    )
    repo = make_repo(
        {
            "pom.xml": pom(root_body, artifact="root"),
            "core/pom.xml": pom(artifact="core", parent=True),
            "apps/pom.xml": pom(
                "<packaging>pom</packaging><modules><module>web</module><module>gone</module>"
                "</modules>",
                artifact="apps",
                parent=True,
            ),
            "apps/web/pom.xml": pom(
                props(**{"maven.compiler.release": "21"}), artifact="web", parent=True
            ),
            "extra/pom-extra.xml": pom(artifact="extra", parent=True),
            "off/pom.xml": pom(artifact="off", parent=True),
        }
    )
    d = detect(repo)
    assert isinstance(d.native, java.JavaProject)
    assert d.native.modules == [
        "pom.xml",
        "core/pom.xml",
        "apps/pom.xml",
        "extra/pom-extra.xml",
        "apps/web/pom.xml",
    ]
    assert d.native.java_wanted == 21 and d.native.java_from.endswith("apps/web/pom.xml")
    assert d.base_image == "eclipse-temurin:25"
    assert any("module POMs not read: apps/gone/pom.xml" in n for n in d.notes)
    # the module inherits the aggregator's properties
    assert any("multi-module build: 5 POMs" in n for n in d.notes)


@pytest.mark.parametrize(
    ("files", "version", "source"),
    [
        ({}, java.DEFAULT_MAVEN, "default"),
        (
            {
                ".mvn/wrapper/maven-wrapper.properties": "distributionUrl=https\\://repo.maven."
                "apache.org/maven2/org/apache/maven/apache-maven/3.8.6/apache-maven-3.8.6-bin.zip"
            },
            "3.8.6",
            "the Maven wrapper",
        ),
        (
            {
                ".mvn/wrapper/maven-wrapper.properties": "distributionUrl=https://repo.maven."
                "apache.org/maven2/org/apache/maven/apache-maven/4.0.0-rc-4/"
                "apache-maven-4.0.0-rc-4-bin.tar.gz"
            },
            "4.0.0-rc-4",
            "the Maven wrapper",
        ),
    ],
)
def test_maven_version_from_the_wrapper(
    make_repo: MakeRepo, files: dict[str, str], version: str, source: str
) -> None:
    d = detect(make_repo({"pom.xml": pom(), **files}))
    assert isinstance(d.native, java.JavaProject)
    assert d.native.maven_version == version
    assert d.native.maven_from.startswith(source)


def _enforcer(version: str) -> str:
    return (
        "<build><plugins><plugin><artifactId>maven-enforcer-plugin</artifactId><executions>"
        "<execution><configuration><rules><requireMavenVersion>"
        f"<version>{version}</version></requireMavenVersion></rules></configuration>"
        "</execution></executions></plugin></plugins></build>"
    )


@pytest.mark.parametrize(
    ("body", "version"),
    [
        (_enforcer("[3.6.3,)"), java.DEFAULT_MAVEN),
        (props(**{"mvn.min": "3.9.14"}) + _enforcer("${mvn.min}"), "3.9.14"),
        ("<prerequisites><maven>4.0.0</maven></prerequisites>", "4.0.0"),
    ],
)
def test_maven_version_floor_from_enforcer_or_prerequisites(
    make_repo: MakeRepo, body: str, version: str
) -> None:
    d = detect(make_repo({"pom.xml": pom(body)}))
    assert isinstance(d.native, java.JavaProject)
    assert d.native.maven_version == version


@pytest.mark.parametrize("name", ["build.gradle", "build.gradle.kts", "settings.gradle"])
def test_gradle_without_pom_is_refused_with_the_reason(make_repo: MakeRepo, name: str) -> None:
    repo = make_repo({name: "plugins { id 'java' }\n", "src/main/java/A.java": "class A {}\n"})
    assert guess_language(repo) == ("java", [f"java: {name}"])
    d = detect(repo)
    assert not d.supported
    assert d.reason.startswith(f"Gradle build ({name}) without a pom.xml")
    assert "services.gradle.org" in d.reason and "\n" not in d.reason
    with pytest.raises(UnsupportedRepo, match="Gradle"):
        make_recipe(repo, d)


def test_gradle_beside_a_pom_builds_with_maven(make_repo: MakeRepo) -> None:
    d = detect(make_repo({"pom.xml": pom(), "build.gradle": ""}))
    assert d.supported and any("also has build.gradle: built with Maven" in n for n in d.notes)


@pytest.mark.parametrize(
    "text",
    [
        '<?xml version="1.0"?><!DOCTYPE p [<!ENTITY x "y">]><project>&x;</project>',
        "<project><unclosed></project>",
        "<notaproject/>",
    ],
)
def test_unreadable_pom_is_refused(make_repo: MakeRepo, text: str) -> None:
    d = detect(make_repo({"pom.xml": text}))
    assert not d.supported and "not a readable Maven POM" in d.reason


def test_unreachable_maven_central_is_refused(
    make_repo: MakeRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(java, "reachable", lambda host, port=443, timeout=3.0: False)
    d = detect(make_repo({"pom.xml": pom()}))
    assert not d.supported and "Maven Central" in d.reason


SUBFOLDER_CI = {
    "travis": (".travis.yml", "script:\n  - sh -c 'cd lib && mvn test'\n"),
    "workflow": (
        ".github/workflows/ci.yml",
        "jobs:\n  t:\n    steps:\n      - run: mvn test\n        working-directory: ./lib\n",
    ),
    "file option": (".gitlab-ci.yml", "test:\n  script: mvn -B -f lib/pom.xml test\n"),
}


@pytest.mark.parametrize("ci", SUBFOLDER_CI, ids=list(SUBFOLDER_CI))
def test_maven_project_one_folder_down_is_the_one_the_ci_builds(
    make_repo: MakeRepo, ci: str
) -> None:
    """No build at the root, two Maven projects side by side (jOOQ/jOOL): the CI's folder is
    built, never the other one whose name starts the same; recipe steps and commands run in
    it, and its paths are the repository's."""
    name, text = SUBFOLDER_CI[ci]
    repo = make_repo(
        {
            "lib/pom.xml": pom(props(**{"maven.compiler.release": "11"})),
            "lib/.mvn/maven.config": "-B\n",
            "lib-java-8/pom.xml": pom(props(**{"maven.compiler.release": "8"})),
            "lib/src/main/java/A.java": "class A {}\n",
            name: text,
        }
    )
    assert guess_language(repo) == ("java", ["java: lib/pom.xml, lib-java-8/pom.xml"])
    d = detect(repo)
    assert d.supported, d.reason
    assert d.native.root == "lib" and d.native.java_wanted == 11
    assert d.manifests == ["lib/pom.xml", "lib/.mvn/"]
    assert any(
        n.startswith(f"Maven project in lib/, the one the CI builds ({name})") for n in d.notes
    )
    recipe = make_recipe(repo, d)
    lines = recipe.dockerfile.splitlines()
    assert "COPY repo/lib/pom.xml /workspace/lib/pom.xml" in lines
    assert "COPY repo/lib/.mvn/ /workspace/lib/.mvn/" in lines
    assert lines.index("WORKDIR /workspace/lib") < lines.index("COPY repo/ /workspace/")
    assert lines[-1] == "WORKDIR /workspace"  # sessions start at the repository root
    assert "lib-java-8" not in recipe.dockerfile
    for command in (recipe.test_command, recipe.collect_command):
        assert command.startswith("cd lib && ")
    assert recipe.test_command_for(["demo.ATest#a"]).startswith("cd lib && ")


def test_a_lone_maven_project_one_folder_down_is_built(make_repo: MakeRepo) -> None:
    d = detect(make_repo({"core/pom.xml": pom(), "README.md": "x\n"}))
    assert d.supported and d.native.root == "core"
    assert "Maven project in core/ (no pom.xml at the repository root)" in d.notes


@pytest.mark.parametrize(
    ("ci", "says"),
    [({}, "none"), ({".travis.yml": "script: cd a && mvn test; cd b && mvn test\n"}, "several")],
)
def test_maven_projects_side_by_side_that_the_ci_does_not_tell_apart_are_refused(
    make_repo: MakeRepo, ci: dict[str, str], says: str
) -> None:
    d = detect(make_repo({"a/pom.xml": pom(), "b/pom.xml": pom(), **ci}))
    assert not d.supported
    assert d.reason == (
        "no pom.xml at the repository root, and 2 folders hold a Maven project (a/, b/) of"
        f" which the CI builds {says}"
    )


def test_a_maven_folder_loses_to_any_root_build(make_repo: MakeRepo) -> None:
    """A C library's Java bindings (``java/pom.xml``) do not make it a Java repository."""
    repo = make_repo({"CMakeLists.txt": "project(x C)\n", "x.c": "", "java/pom.xml": pom()})
    assert guess_language(repo)[0] == "c"
    assert guess_language(make_repo({"java/pom.xml": pom(), "setup.py": ""}))[0] == "python"


# --------------------------------------------------------------------------- language guess


@pytest.mark.parametrize(
    ("files", "language"),
    [
        ({"pom.xml": "", "tools/release.py": "", "scripts/x.py": ""}, "java"),
        ({"pom.xml": "", "package.json": "{}"}, "java"),
        ({"pom.xml": "", "requirements.txt": "", "tox.ini": ""}, "java"),
        ({"pom.xml": "", "setup.py": "", "src/main/java/A.java": ""}, "java"),
        ({"pom.xml": "", "pyproject.toml": "", "core/src/test/java/ATest.java": ""}, "java"),
        ({"pom.xml": "", "pyproject.toml": "", "mypkg/__init__.py": ""}, "python"),
        ({"build.gradle.kts": "", "meson/version.py": ""}, "java"),
        ({"tools/gen.py": ""}, "python"),
    ],
)
def test_build_system_markers_come_before_python_files(
    make_repo: MakeRepo, files: dict[str, str], language: str
) -> None:
    assert guess_language(make_repo(files))[0] == language


# ------------------------------------------------------------------------------------ recipe


def test_recipe_layers_and_commands(make_repo: MakeRepo) -> None:
    repo = make_repo(
        {
            "pom.xml": pom(
                "<packaging>pom</packaging><modules><module>core</module></modules>"
                + props(**{"maven.compiler.release": "17"}),
                artifact="root",
            ),
            "core/pom.xml": pom(artifact="core", parent=True),
            ".mvn/maven.config": "-T1\n",
        }
    )
    recipe = make_recipe(repo)
    df = recipe.dockerfile
    assert recipe.language == "java" and recipe.runner == "maven"
    assert "FROM eclipse-temurin:17" in df
    assert "apache-maven-3.9.11-bin.tar.gz" in df and java.DEFAULT_MAVEN_SHA512 in df
    lines = df.splitlines()
    order = [
        next(i for i, ln in enumerate(lines) if ln.startswith(prefix))
        for prefix in (
            "COPY repo/pom.xml /workspace/pom.xml",
            "COPY repo/core/pom.xml /workspace/core/pom.xml",
            "COPY repo/.mvn/ /workspace/.mvn/",
            "RUN /opt/maven/bin/mvn -B -ntp -q -fae",
            "COPY repo/ /workspace/",
        )
    ]
    assert order == sorted(order)
    dependency_layer = " ".join(lines[order[3] : order[4]])
    assert "dependency:go-offline" in dependency_layer and "repogymNoSuchTest" in dependency_layer
    assert " -o " in recipe.test_command and "-fae" in recipe.test_command
    assert "-Dmaven.test.failure.ignore=true" in recipe.test_command
    for skip in ("-Drat.skip=true", "-Denforcer.skip=true", "-Djacoco.skip=true"):
        assert skip in recipe.test_command
    assert recipe.test_command.endswith("; repogym_mvn")
    assert recipe.select_command == recipe.test_command
    assert "RepogymListTests" in recipe.collect_command
    assert recipe.env == {"LANG": "C.UTF-8"}
    assert any("Maven 3.9.11" in n for n in recipe.notes)


def test_recipe_for_another_maven_checks_centrals_sha1(make_repo: MakeRepo) -> None:
    wrapper = (
        "distributionUrl=https://repo.maven.apache.org/maven2/org/apache/maven/"
        "apache-maven/3.6.0/apache-maven-3.6.0-bin.zip\n"
    )
    recipe = make_recipe(
        make_repo({"pom.xml": pom(), ".mvn/wrapper/maven-wrapper.properties": wrapper})
    )
    assert "apache-maven-3.6.0-bin.tar.gz.sha1" in recipe.dockerfile
    assert "-ntp" not in recipe.test_command  # Maven 3.6.0 does not know it


@pytest.mark.parametrize(
    ("ids", "expected"),
    [
        (["a.BTest#m"], "-Dtest=a.BTest#m"),
        (
            ["a.BTest#m(int)[1]", "a.BTest#m(int)[2]", "a.BTest#n", "a.C$Inner#z"],
            "-Dtest=a.BTest#m+n,a.C$Inner#z",
        ),
        (["a.BTest#m{int}[1]", "a.BTest"], "-Dtest=a.BTest"),
        (["Top#m", "mm-util", "core"], "-Dtest=Top#m"),
    ],
)
def test_select_tests_builds_surefire_filters(ids: list[str], expected: str) -> None:
    lenient = " -Dsurefire.failIfNoSpecifiedTests=false -DfailIfNoTests=false"
    assert select_tests("maven", "run", ids) == f"run {shlex.quote(expected)}{lenient}"
    assert select_tests("maven", "run", ["mm-util"]) == "run"


def test_count_collected_reads_the_summary_or_the_ids() -> None:
    ids = "REPOGYM-COLLECT-ID a.BTest#m\nREPOGYM-COLLECT-ID a.BTest#n\n"
    assert count_collected("maven", ids) == 2
    assert count_collected("maven", ids + 'REPOGYM-COLLECT {"collected": 7}\n') == 7


# --------------------------------------------------------------------------- the test lister

FAKE_ANNOTATIONS = {
    "org/junit/jupiter/api/Test.java": "package org.junit.jupiter.api;\n"
    "@java.lang.annotation.Retention(java.lang.annotation.RetentionPolicy.RUNTIME)\n"
    "public @interface Test {}\n",
    "org/junit/jupiter/api/Nested.java": "package org.junit.jupiter.api;\n"
    "@java.lang.annotation.Retention(java.lang.annotation.RetentionPolicy.RUNTIME)\n"
    "public @interface Nested {}\n",
    "org/junit/Test.java": "package org.junit;\n"
    "@java.lang.annotation.Retention(java.lang.annotation.RetentionPolicy.RUNTIME)\n"
    "public @interface Test { Class<?> expected() default Void.class; long timeout() default 0; }\n",
    "junit/framework/TestCase.java": "package junit.framework;\npublic class TestCase {}\n",
    "org/junitpioneer/jupiter/cartesian/CartesianTest.java": "package"
    " org.junitpioneer.jupiter.cartesian;\n"
    "@java.lang.annotation.Retention(java.lang.annotation.RetentionPolicy.RUNTIME)\n"
    "public @interface CartesianTest {}\n",
}
LISTED = {
    "p/AbstractBase.java": "package p;\nimport org.junit.jupiter.api.Test;\n"
    "public abstract class AbstractBase { @Test void inherited() {} }\n",
    "p/ChildTest.java": "package p;\nimport org.junit.jupiter.api.*;\n"
    "class ChildTest extends AbstractBase {\n  @Test void own() {}\n  void helper() {}\n"
    "  @Nested class Inner { @Test void deep() {} }\n  static class NotNested { @Test void x() {} }\n}\n",
    "p/OldStyleTestCase.java": "package p;\npublic class OldStyleTestCase extends"
    " junit.framework.TestCase {\n  public void testOne() {}\n  public void helper() {}\n"
    "  public void testArgs(int x) {}\n}\n",
    "p/Junit4Tests.java": "package p;\npublic class Junit4Tests {\n"
    "  @org.junit.Test(expected = IllegalStateException.class, timeout = 5) public void a() {}\n}\n",
    "p/Helper.java": "package p;\nclass Helper { @org.junit.jupiter.api.Test void notRun() {} }\n",
    "p/MyTest.java": "package p;\n@java.lang.annotation.Retention(java.lang.annotation."
    "RetentionPolicy.RUNTIME)\n@org.junit.jupiter.api.Test\n@interface MyTest {}\n",
    "p/MetaTest.java": "package p;\nclass MetaTest { @MyTest void viaMeta() {} }\n",
    "p/PioneerTest.java": "package p;\nclass PioneerTest {\n"
    "  @org.junitpioneer.jupiter.cartesian.CartesianTest void cartesian(int a, int b) {}\n}\n",
}


@pytest.mark.skipif(shutil.which("javac") is None, reason="no JDK on this host")
def test_lister_counts_test_methods_of_compiled_classes(tmp_path: Path) -> None:
    src = write_tree(tmp_path / "src", {**FAKE_ANNOTATIONS, **LISTED})
    classes = tmp_path / "repo" / "mod" / "target" / "test-classes"
    lister = tmp_path / "lister"
    sources = [str(p) for p in src.rglob("*.java")]
    subprocess.run(["javac", "-nowarn", "-d", str(classes), *sources], check=True)
    subprocess.run(["javac", "-d", str(lister), str(java.LISTER_SOURCE)], check=True)
    out = subprocess.run(
        ["java", "-cp", str(lister), "RepogymListTests", str(tmp_path / "repo")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    ids = [ln.split(" ", 1)[1] for ln in out.splitlines() if ln.startswith("REPOGYM-COLLECT-ID ")]
    assert sorted(ids) == [
        "p.ChildTest#inherited",
        "p.ChildTest#own",
        "p.ChildTest$Inner#deep",
        "p.Junit4Tests#a",
        "p.MetaTest#viaMeta",
        "p.OldStyleTestCase#testOne",
        "p.PioneerTest#cartesian",
    ]
    assert count_collected("maven", out) == 7


# ------------------------------------------------------------------- real build (slow, network)

JUNIT5_PROJECT = {
    "pom.xml": pom(
        props(**{"maven.compiler.release": "17", "project.build.sourceEncoding": "UTF-8"})
        + "<dependencies><dependency><groupId>org.junit.jupiter</groupId>"
        "<artifactId>junit-jupiter</artifactId><version>5.10.2</version><scope>test</scope>"
        "</dependency></dependencies>"
    ),
    "src/main/java/demo/Calc.java": """
        package demo;

        public class Calc {
            public static int add(int a, int b) { return a + b; }
        }
    """,
    "src/test/java/demo/CalcTest.java": """
        package demo;

        import static org.junit.jupiter.api.Assertions.assertEquals;

        import org.junit.jupiter.api.Disabled;
        import org.junit.jupiter.api.Nested;
        import org.junit.jupiter.api.Test;
        import org.junit.jupiter.params.ParameterizedTest;
        import org.junit.jupiter.params.provider.ValueSource;

        class CalcTest {
            @Test
            void adds() { assertEquals(3, Calc.add(1, 2)); }

            @Test
            void failsOnPurpose() { assertEquals(4, Calc.add(1, 2), "one plus two"); }

            @Test
            @Disabled("not today")
            void skipped() { }

            @ParameterizedTest
            @ValueSource(ints = {0, 5})
            void identity(int n) { assertEquals(n, Calc.add(n, 0)); }

            @Nested
            class Inner {
                @Test
                void zero() { assertEquals(0, Calc.add(0, 0)); }
            }
        }
    """,
}


@pytest.fixture(scope="module")
def local_backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    yield from local_backend_with_private_cache(tmp_path_factory, "java-sandbox-cache")


@pytest.mark.slow
def test_junit5_project_builds_collects_runs_and_parses(
    make_repo: MakeRepo, local_backend: None
) -> None:
    from repogym.bootstrap.check import write_build_context
    from repogym.sandbox import EnvironmentSpec, get_backend

    if not java.reachable(java.CENTRAL_HOST):
        pytest.skip("Maven Central is not reachable")
    repo = make_repo(JUNIT5_PROJECT)
    recipe = make_recipe(repo, detect(repo))
    result = check_recipe(repo, recipe)
    assert result.ok, (result.failed_step, result.reason, result.log_tail)
    assert result.tests_collected == 5
    assert result.sample_ids == [
        "demo.CalcTest#adds",
        "demo.CalcTest#failsOnPurpose",
        "demo.CalcTest#skipped",
        "demo.CalcTest#identity",
        "demo.CalcTest$Inner#zero",
    ]
    context = write_build_context(repo, recipe, repo.parent / "environment")
    backend = get_backend("local")
    spec = EnvironmentSpec(context_dir=context, workdir=recipe.workdir, network_mode="no-network")
    built = backend.build(spec)  # every step is cached by the check above
    with backend.start(built, spec) as session:
        full = session.exec(recipe.test_command, timeout_s=600, cwd=recipe.workdir, network=False)
        chosen = recipe.test_command_for(
            ["demo.CalcTest#identity(int)[2]", "demo.CalcTest$Inner#zero"]
        )
        some = session.exec(chosen, timeout_s=600, cwd=recipe.workdir, network=False)
    parsed = parse_log(full.stdout, "maven")
    assert parsed.tests == {
        "demo.CalcTest#adds": PASSED,
        "demo.CalcTest#failsOnPurpose": FAILED,
        "demo.CalcTest#skipped": SKIPPED,
        "demo.CalcTest#identity(int)[1]": PASSED,
        "demo.CalcTest#identity(int)[2]": PASSED,
        "demo.CalcTest$Inner#zero": PASSED,
    }, full.stdout[-3000:]
    assert parsed.failures["demo.CalcTest#failsOnPurpose"].startswith("one plus two ==>")
    assert ERROR not in parsed.tests.values()
    assert parse_log(some.stdout).tests == {
        "demo.CalcTest#identity(int)[1]": PASSED,
        "demo.CalcTest#identity(int)[2]": PASSED,
        "demo.CalcTest$Inner#zero": PASSED,
    }


MAVEN_COMPILE_FAILURE = """\
[INFO] BUILD FAILURE
[INFO] ------------------------------------------------------------------------
[ERROR] Failed to execute goal org.apache.maven.plugins:maven-compiler-plugin:3.12.1:compile \
(default-compile) on project javapoet: Compilation failure
[ERROR] /workspace/src/main/java/com/squareup/javapoet/MethodSpec.java:[18,15] cannot access \
java.io.IOException
[ERROR]   bad class file: /modules/java.base/java/io/IOException.class
[ERROR]     class file has wrong version 61.0, should be 53.0
[ERROR] -> [Help 1]
[ERROR] After correcting the problems, you can resume the build with the command
[ERROR]   mvn <args> -rf :javapoet
"""


def test_check_reason_of_a_maven_failure_is_its_first_compiler_error() -> None:
    from repogym.bootstrap.check import _reason_from

    assert _reason_from(MAVEN_COMPILE_FAILURE, "x") == (
        "mvn compile failed on project javapoet: src/main/java/com/squareup/javapoet/"
        "MethodSpec.java:[18,15] cannot access java.io.IOException (bad class file:"
        " /modules/java.base/java/io/IOException.class)"
    )
    offline = (
        "[ERROR] Failed to execute goal org.apache.maven.plugins:maven-surefire-plugin:3.2.5:test"
        " (default-test) on project demo: The following artifacts could not be resolved:"
        " x:y:jar:1 (absent): Cannot access central in offline mode -> [Help 1]\n"
    )
    assert _reason_from(offline, "x").startswith(
        "mvn test failed on project demo: The following artifacts could not be resolved"
    )


def _parent(version: str, relative: str = "") -> str:
    rel = f"<relativePath>{relative}</relativePath>" if relative else ""
    return (
        "<parent><groupId>org.x</groupId><artifactId>base</artifactId>"
        f"<version>{version}</version>{rel}</parent>"
    )


def test_snapshot_parent_outside_the_repository_is_refused(make_repo: MakeRepo) -> None:
    d = detect(make_repo({"pom.xml": pom(_parent("2.20.0-SNAPSHOT"))}))
    assert not d.supported
    assert d.reason.startswith("the parent POM org.x:base:2.20.0-SNAPSHOT is a snapshot")
    assert detect(make_repo({"pom.xml": pom(_parent("2.19"))})).supported
    local = make_repo(
        {
            "pom.xml": pom(_parent("1-SNAPSHOT", "build/base")),
            "build/base/pom.xml": pom(artifact="base"),
        }
    )
    assert detect(local).supported


def test_multi_module_tests_run_in_the_package_phase(make_repo: MakeRepo) -> None:
    single = make_recipe(make_repo({"pom.xml": pom()}))
    assert single.test_command.split('"$@"')[0].endswith(" test ")
    repo = make_repo(
        {
            "pom.xml": pom("<modules><module>a</module></modules>", artifact="root"),
            "a/pom.xml": pom(artifact="a", parent=True),
        }
    )
    multi = make_recipe(repo)
    assert multi.test_command.split('"$@"')[0].endswith(" package ")
    flat = " ".join(multi.dockerfile.replace("\\\n", " ").split())
    assert "package '-Dtest=Test*#repogymNoSuchTest,*Test#repogymNoSuchTest," in flat
