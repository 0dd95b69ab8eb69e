"""Java (Maven) fixes found by the bootstrap survey of public Maven repositories: each test
rebuilds, in a fixture, the layout that made a real repository fail (junit4/joda-time's Java 5,
univocity's literal 1.6, jackson's snapshot parents, commons-io's ``build`` package)."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from repogym.bootstrap import detect, make_recipe
from repogym.bootstrap.native import java

from .conftest import checked_project, git_commit, local_backend_with_private_cache
from .test_java import JDKS, compiler, pom, props

MakeRepo = Callable[..., Path]


@pytest.fixture(autouse=True)
def fake_host(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """JDKs 17 and 25, a reachable Maven Central that has every release asked for, whatever
    the host has (unit tests); the real host for the build test."""
    if "local_backend" in request.fixturenames:
        return
    import repogym.sandbox

    monkeypatch.setattr(repogym.sandbox, "host_jdks", lambda: dict(JDKS))
    monkeypatch.setattr(java, "reachable", lambda host, port=443, timeout=3.0: True)
    monkeypatch.setattr(java, "on_central", lambda url: True)


def _run_edits(repo: Path, dockerfile: str) -> None:
    """Run the recipe's POM edit step (its first ``RUN sed``) in ``repo`` with the real sed."""
    line = next(ln for ln in dockerfile.splitlines() if ln.startswith("RUN sed "))
    subprocess.run(line.removeprefix("RUN "), shell=True, cwd=repo, check=True)


# ----------------------------------------------------------------- Java releases too old


def test_java_5_named_through_a_property_is_raised_to_8(make_repo: MakeRepo) -> None:
    """junit4: ``<source>${jdkVersion}</source>`` with ``<jdkVersion>1.5</jdkVersion>``."""
    body = props(jdkVersion="1.5") + compiler(source="${jdkVersion}", target="${jdkVersion}")
    dep = "<dependencies><dependency><version>1.5</version></dependency></dependencies>"
    repo = make_repo({"pom.xml": pom(body + dep)})
    d = detect(repo)
    assert d.supported, d.reason
    assert d.base_image == "eclipse-temurin:17"
    assert any("compiles for Java 5" in n and "raised to Java 8" in n for n in d.notes)
    recipe = make_recipe(repo, d)
    assert recipe.dockerfile.count("RUN sed -i -E") == 2  # after the POMs, after the source
    _run_edits(repo, recipe.dockerfile)
    text = (repo / "pom.xml").read_text()
    assert "<jdkVersion>8</jdkVersion>" in text
    assert "<source>${jdkVersion}</source>" in text  # the reference itself is left alone
    assert "<version>1.5</version>" in text  # not a Java level: untouched


def test_literal_java_6_in_the_compiler_plugin_is_raised(make_repo: MakeRepo) -> None:
    """univocity-parsers: ``<source>1.6</source>`` written in the plugin's configuration."""
    repo = make_repo({"pom.xml": pom(compiler(source="1.6", target="1.6", encoding="UTF-8"))})
    d = detect(repo)
    assert d.supported, d.reason
    _run_edits(repo, make_recipe(repo, d).dockerfile)
    text = (repo / "pom.xml").read_text()
    assert "<source>8</source><target>8</target><encoding>UTF-8</encoding>" in text


def test_java_5_properties_of_maven_compiler_are_raised(make_repo: MakeRepo) -> None:
    """joda-time: ``maven.compiler.source``/``target`` 1.5."""
    body = props(**{"maven.compiler.source": "1.5", "maven.compiler.target": "1.5"})
    repo = make_repo({"pom.xml": pom(body)})
    d = detect(repo)
    assert d.supported, d.reason
    _run_edits(repo, make_recipe(repo, d).dockerfile)
    text = (repo / "pom.xml").read_text()
    assert "<maven.compiler.source>8</maven.compiler.source>" in text
    assert "<maven.compiler.target>8</maven.compiler.target>" in text


def test_level_properties_only_a_parent_pom_reads_are_raised_too(make_repo: MakeRepo) -> None:
    """jackson-annotations: its parent's compiler settings read ``javac.src.version`` (1.6);
    a plugin's version (3.1) or a library's (``version.junit``) is never a Java level."""
    body = props(
        **{
            "javac.src.version": "1.6",
            "javac.target.version": "1.6",
            "maven.compiler.source": "1.6",
            "maven-compiler-plugin.version": "3.1",
            "version.junit": "4.12",
            "jdk.module.name": "x",
        }
    )
    repo = make_repo({"pom.xml": pom(body)})
    d = detect(repo)
    assert d.supported, d.reason
    _run_edits(repo, make_recipe(repo, d).dockerfile)
    text = (repo / "pom.xml").read_text()
    for name in ("javac.src.version", "javac.target.version", "maven.compiler.source"):
        assert f"<{name}>8</{name}>" in text
    assert "<maven-compiler-plugin.version>3.1</maven-compiler-plugin.version>" in text
    assert "<version.junit>4.12</version.junit>" in text


def test_error_prone_javac_9_is_set_to_plain_javac(make_repo: MakeRepo) -> None:
    """javapoet: ``<compilerId>javac-with-errorprone</compilerId>`` runs a bundled javac 9 that
    cannot read JDK 17's class files."""
    config = compiler(compilerId="javac-with-errorprone", forceJavacCompilerUse="true", release="8")
    repo = make_repo({"pom.xml": pom(config)})
    d = detect(repo)
    assert d.supported, d.reason
    assert any("error-prone's bundled javac 9" in n for n in d.notes)
    _run_edits(repo, make_recipe(repo, d).dockerfile)
    text = (repo / "pom.xml").read_text()
    assert "<compilerId>javac</compilerId><fork>true</fork>" in text
    assert "<forceJavacCompilerUse>false</forceJavacCompilerUse>" in text


def _exec_plugin(executable: str, *args: str) -> str:
    arguments = "".join(f"<argument>{a}</argument>" for a in args)
    return (
        "<plugin><groupId>org.codehaus.mojo</groupId><artifactId>exec-maven-plugin</artifactId>"
        "<executions><execution><phase>initialize</phase><goals><goal>exec</goal></goals>"
        f"</execution></executions><configuration><executable>{executable}</executable>"
        f"<arguments>{arguments}</arguments></configuration></plugin>"
    )


def test_exec_plugin_running_git_runs_true_instead(make_repo: MakeRepo) -> None:
    """handlebars.java: a profile (active when the submodule's folder is missing) runs ``git
    submodule update --init --recursive``; the image's snapshot has no .git and GitHub is not
    reachable, so git exits 128 and the build fails."""
    submodule = _exec_plugin("git", "submodule", "update", "--init", "--recursive")
    profile = (
        "<profiles><profile><id>specs</id><activation><file><missing>specs</missing></file>"
        f"</activation><build><plugins>{submodule}</plugins></build></profile></profiles>"
    )
    module = "<build><plugins>" + _exec_plugin("/usr/bin/git", "describe") + "</plugins></build>"
    others = "<build><plugins>" + _exec_plugin("npm", "ci") + _exec_plugin("mygit") + "</plugins>"
    root = pom(others + "</build><modules><module>core</module></modules>" + profile)
    repo = make_repo({"pom.xml": root, "core/pom.xml": pom(module, artifact="core", parent=True)})
    d = detect(repo)
    assert d.supported, d.reason
    note = next(n for n in d.notes if "runs git through exec-maven-plugin" in n)
    assert "git submodule update --init --recursive (pom.xml)" in note
    assert "git describe (core/pom.xml)" in note
    assert "are therefore never graded" in note
    _run_edits(repo, make_recipe(repo, d).dockerfile)
    text = (repo / "pom.xml").read_text()
    assert "<executable>true</executable><arguments><argument>submodule" in text
    assert "<executable>npm</executable>" in text and "<executable>mygit</executable>" in text
    assert "<executable>true</executable>" in (repo / "core/pom.xml").read_text()


def test_no_git_edit_without_an_exec_plugin_running_git(make_repo: MakeRepo) -> None:
    repo = make_repo(
        {"pom.xml": pom("<build><plugins>" + _exec_plugin("npm") + "</plugins></build>")}
    )
    d = detect(repo)
    assert not any("git" in n for n in d.notes)
    assert "RUN sed" not in make_recipe(repo, d).dockerfile


def test_git_hook_goals_are_skipped_in_every_mvn_call(make_repo: MakeRepo) -> None:
    """handlebars.java: git-build-hook-maven-plugin's ``install`` goal needs a git repository
    ("Could not find or initialise a local git repository"); the image has none."""
    repo = make_repo({"pom.xml": pom()})
    recipe = make_recipe(repo, detect(repo))
    calls = recipe.dockerfile.split("/bin/mvn -B")[1:]
    assert len(calls) == 4  # the dependency layer's (lifecycle, go-offline), build, offline
    for goal in ("install", "gitconfig", "init"):
        flag = f"-Dgitbuildhook.{goal}.skip=true"
        assert all(flag in call for call in calls)
        assert flag in recipe.test_command


def test_an_old_release_no_pom_element_names_is_still_refused(make_repo: MakeRepo) -> None:
    repo = make_repo({"pom.xml": pom(), ".java-version": "1.6\n"})
    d = detect(repo)
    assert not d.supported
    assert "compiles for Java 6; JDK 17 (the oldest here) compiles for Java 7" in d.reason


# ------------------------------------------------------------------ snapshot parent POMs


def _parent(version: str) -> str:
    return (
        "<parent><groupId>org.x</groupId><artifactId>base</artifactId>"
        f"<version>{version}</version></parent>"
    )


def test_snapshot_parent_becomes_its_release_on_central(make_repo: MakeRepo) -> None:
    """jackson-*: parent ``jackson-base:2.19.0-SNAPSHOT``; the module's own parent (the root,
    same version string) stays a snapshot: only POMs naming the outside parent are edited."""
    root = pom(
        _parent("2.0-SNAPSHOT")
        + "<version>2.0-SNAPSHOT</version><modules><module>core</module></modules>",
        artifact="root",
    )
    root = root.replace("<version>1.0</version>", "", 1)
    core = pom(
        "<parent><groupId>com.example</groupId><artifactId>root</artifactId>"
        "<version>2.0-SNAPSHOT</version></parent>",
        artifact="core",
    ).replace("<groupId>com.example</groupId><version>1.0</version>", "", 1)
    repo = make_repo({"pom.xml": root, "core/pom.xml": core})
    d = detect(repo)
    assert d.supported, d.reason
    assert any(
        "org.x:base:2.0-SNAPSHOT is a snapshot" in n and "release 2.0 from Maven Central" in n
        for n in d.notes
    )
    _run_edits(repo, make_recipe(repo, d).dockerfile)
    text = (repo / "pom.xml").read_text()
    assert "<artifactId>base</artifactId><version>2.0</version></parent>" in text
    assert "<version>2.0-SNAPSHOT</version><modules>" in text  # the project's own version
    assert (repo / "core/pom.xml").read_text() == core


def test_snapshot_parent_without_a_release_is_refused(
    make_repo: MakeRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []
    monkeypatch.setattr(java, "on_central", lambda url: asked.append(url) or False)
    d = detect(make_repo({"pom.xml": pom(_parent("2.0-SNAPSHOT"))}))
    assert not d.supported
    assert d.reason.endswith("and Maven Central has no release 2.0 of it")
    assert asked == [f"{java.CENTRAL}/org/x/base/2.0/base-2.0.pom"]


@pytest.mark.parametrize(("version", "mirrored"), [("3.1.1", True), ("3.2.3", False)])
def test_maven_older_than_3_2_3_reaches_central_over_https(
    make_repo: MakeRepo, version: str, mirrored: bool
) -> None:
    """junit4 two years back: its wrapper's Maven 3.1.1 names Central by http://, which Central
    refuses (501 HTTPS Required); the global settings mirror it to https."""
    url = f"https://repo1.maven.org/maven2/org/apache/maven/apache-maven/{version}/x-bin.zip"
    repo = make_repo(
        {"pom.xml": pom(), ".mvn/wrapper/maven-wrapper.properties": f"distributionUrl={url}\n"}
    )
    dockerfile = make_recipe(repo, detect(repo)).dockerfile
    assert f"apache-maven-{version}-bin.tar.gz" in dockerfile
    mirror = f"<mirrorOf>central</mirrorOf><url>{java.CENTRAL}</url>"
    assert (mirror in dockerfile) is mirrored


# --------------------------------------------------------------------------- failure text


def test_reason_when_the_failed_goal_line_was_cut_off() -> None:
    """A long list of compiler errors pushes Maven's ``Failed to execute goal`` line out of the
    output tail: the first compiler error is the reason, not a bare ``[ERROR]`` line."""
    from repogym.bootstrap.check import _reason_from

    tail = (
        "[ERROR] /workspace/src/main/java/org/x/io/file/Visitor.java:[86,20] cannot find symbol\n"
        "[ERROR]   symbol:   method asThis()\n"
        "[ERROR] /workspace/src/main/java/org/x/io/file/Visitor.java:[97,20] cannot find symbol\n"
        "[ERROR] -> [Help 1]\n"
        "[ERROR] \n"
        "[ERROR] To see the full stack trace of the errors, re-run Maven with the -e switch.\n"
    )
    assert _reason_from(tail, "x") == (
        "mvn: compilation failed: src/main/java/org/x/io/file/Visitor.java:[86,20] cannot find"
        " symbol"
    )


def test_reason_of_tests_failing_in_a_build_step_is_surefires_summary() -> None:
    """jackson-databind: a POM's literal ``<test>`` suite runs despite the no-test filter; when
    its tests fail, the reason is Surefire's summary, not Maven's boilerplate."""
    from repogym.bootstrap.check import _reason_from

    log = (
        "[ERROR] Errors: \n"
        "[ERROR]   JDKTypeSerializationTest.testInetAddress:111 » UnknownHost google.com\n"
        "[INFO] \n"
        "[ERROR] Tests run: 3573, Failures: 0, Errors: 2, Skipped: 0\n"
        "[INFO] BUILD FAILURE\n"
        "[ERROR] Failed to execute goal org.apache.maven.plugins:maven-surefire-plugin:3.5.3:test"
        " (default-test) on project jackson-databind: \n"
        "[ERROR] \n"
        "[ERROR] See /workspace/target/surefire-reports for the individual test results.\n"
        "[ERROR] -> [Help 1]\n"
        "[ERROR] \n"
        "[ERROR] To see the full stack trace of the errors, re-run Maven with the -e switch.\n"
    )
    assert _reason_from(log, "x") == (
        "mvn test failed on project jackson-databind: tests failed: Tests run: 3573, Failures: 0,"
        " Errors: 2 (JDKTypeSerializationTest.testInetAddress:111 » UnknownHost google.com)"
    )


def test_build_steps_do_not_fail_on_tests_a_pom_runs_anyway(make_repo: MakeRepo) -> None:
    repo = make_repo({"pom.xml": pom()})
    runs = make_recipe(repo, detect(repo)).dockerfile.split("\nRUN ")
    steps = [run for run in runs if "NoSuchTest" in run]
    assert len(steps) == 3  # the dependency layer's, the build's online and offline runs
    assert all("-Dmaven.test.failure.ignore=true" in step for step in steps)


def test_reason_of_a_dependency_missing_from_central_names_it() -> None:
    """JSqlParser: a test dependency only a snapshot repository has; no goal ran yet."""
    from repogym.bootstrap.check import _reason_from

    log = (
        "[ERROR] Failed to execute goal on project jsqlparser: Could not collect dependencies for"
        " project com.github.jsqlparser:jsqlparser:bundle:5.4-SNAPSHOT\n"
        "[ERROR] No versions available for com.manticore-projects.jsqlformatter:javacc-java:jar:"
        "[8.1.1.1939,) within specified range\n"
        "[ERROR] -> [Help 1]\n"
    )
    assert _reason_from(log, "x") == (
        "mvn failed on project jsqlparser: No versions available for"
        " com.manticore-projects.jsqlformatter:javacc-java:jar:[8.1.1.1939,) within specified"
        " range"
    )


def test_survey_detail_keeps_the_reason_after_a_long_mvn_step() -> None:
    from repogym.bootstrap import survey

    step = "build: RUN /opt/maven/bin/mvn -B -ntp " + "-Dx.skip=true " * 40 + "(exit 1; line 12)"
    reason = "mvn compile failed on project p: src/main/java/A.java:[1,2] cannot find symbol"
    detail = survey.failure_detail(step, reason)
    assert detail.startswith("build: RUN /opt/maven/bin/mvn") and detail.endswith(reason)
    assert len(detail) <= survey.DETAIL_LIMIT


def test_a_commit_with_a_blob_missing_is_a_source_failure_with_its_cause(
    make_repo: MakeRepo, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """commons-csv / jackson-dataformats-text in a size-limited clone: the git data lacks a
    big test file's content; the survey says so as a source failure, not an internal error."""
    from repogym.bootstrap import survey

    monkeypatch.setenv("REPOGYM_CACHE", str(tmp_path / "cache"))
    repo = make_repo({"pom.xml": pom(), "src/test/resources/big.csv": "a,b\n"})
    git_commit(repo)
    blob = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD:src/test/resources/big.csv"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (repo / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
    result, trace = survey.survey_repo(str(repo), survey.At())
    assert trace is None
    assert result.cause == "source: file content missing from the git data"
    assert "cannot read blob for 'src/test/resources/big.csv'" in result.detail
    assert "partial or size-limited clone" in result.detail


# ------------------------------------------------------------------------ a real build

OLD_PROJECT = {
    "pom.xml": pom(
        "<parent><groupId>org.sonatype.oss</groupId><artifactId>oss-parent</artifactId>"
        "<version>9-SNAPSHOT</version><relativePath/></parent>"
        + props(**{"maven.compiler.source": "1.5", "maven.compiler.target": "1.5"})
        + "<dependencies><dependency><groupId>junit</groupId><artifactId>junit</artifactId>"
        "<version>4.13.2</version><scope>test</scope></dependency></dependencies>"
    ),
    # A source package named like build output: a snapshot without .git must keep it.
    "src/main/java/demo/build/Calc.java": (
        "package demo.build;\npublic class Calc { public static int add(int a, int b)"
        " { return a + b; } }\n"
    ),
    "src/test/java/demo/CalcTest.java": (
        "package demo;\nimport org.junit.Test;\nimport static org.junit.Assert.assertEquals;\n"
        "public class CalcTest {\n  @Test public void adds() {"
        " assertEquals(3, demo.build.Calc.add(1, 2)); }\n}\n"
    ),
}


@pytest.fixture(scope="module")
def local_backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    yield from local_backend_with_private_cache(tmp_path_factory, "java-survey-cache")


@pytest.mark.slow
def test_java_5_project_with_a_snapshot_parent_builds_in_the_sandbox(
    tmp_path: Path, local_backend: None
) -> None:
    """Real Maven in the local sandbox: Java 5 raised to 8, ``oss-parent:9-SNAPSHOT`` → 9 from
    Central, the ``demo/build`` package kept (the repository is a plain folder, as a survey's
    exported commit is)."""
    if not java.reachable(java.CENTRAL_HOST) or shutil.which("sed") is None:
        pytest.skip("Maven Central is not reachable")
    result = checked_project(tmp_path / "old", OLD_PROJECT)
    assert result.sample_ids == ["demo.CalcTest#adds"]
    assert not re.search(r"source value 5|release version 5", result.log_tail)
