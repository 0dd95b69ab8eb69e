"""A raised Java project compiled against Java 8's API (``--release 8``): univocity-parsers'
own ``Record`` class, wildcard-imported, is ambiguous beside JDK 17's ``java.lang.Record`` when
javac compiles with ``-source 8 -target 8`` against its own class library."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from repogym.bootstrap import detect, make_recipe
from repogym.bootstrap.native import java
from repogym.bootstrap.native.java_release import current_plugin

from .conftest import checked_project, local_backend_with_private_cache
from .test_java import JDKS, compiler, pom, props

MakeRepo = Callable[..., Path]
RELEASE_LINE = "-Dmaven.compiler.release=8"


@pytest.fixture(autouse=True)
def fake_host(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """JDKs 17 and 25 and a reachable Maven Central (unit tests); the real host for builds."""
    if "local_backend" in request.fixturenames:
        return
    import repogym.sandbox

    monkeypatch.setattr(repogym.sandbox, "host_jdks", lambda: dict(JDKS))
    monkeypatch.setattr(java, "reachable", lambda host, port=443, timeout=3.0: True)


def _pinned_compiler(version: str, **config: str) -> str:
    """The compiler plugin as univocity writes it: groupId, artifactId, version on lines."""
    inner = "".join(f"<{k}>{v}</{k}>" for k, v in config.items())
    return (
        "<build><plugins><plugin>\n  <groupId>org.apache.maven.plugins</groupId>\n"
        "  <artifactId>maven-compiler-plugin</artifactId>\n"
        f"  <version>{version}</version>\n  <configuration>{inner}</configuration>\n"
        "</plugin></plugins></build>"
    )


RECORD = "package demo.common;\npublic class Record { }\n"
ITERATOR = "package demo;\nimport demo.common.*;\npublic class Rows { Record last; }\n"
UNSAFE = "package demo;\nclass Raw { sun.misc.Unsafe u; }\n"
BY_NAME = (
    "package demo;\n// sun.misc.Unsafe is not used here\nclass ByName {\n"
    '  Object c() throws Exception { return Class.forName("sun.util.BuddhistCalendar"); }\n}\n'
)


def _edit(repo: Path, dockerfile: str) -> None:
    """Run the recipe's POM edit step (its first ``RUN sed``) in ``repo``."""
    line = next(ln for ln in dockerfile.splitlines() if ln.startswith("RUN sed "))
    subprocess.run(line.removeprefix("RUN "), shell=True, cwd=repo, check=True)


def test_raised_project_compiles_with_release_8_and_a_current_plugin(
    make_repo: MakeRepo,
) -> None:
    """univocity-parsers: plugin 3.1 (no ``release`` parameter) with ``<source>1.6``."""
    repo = make_repo(
        {
            "pom.xml": pom(_pinned_compiler("3.1", source="1.6", target="1.6")),
            "src/main/java/demo/common/Record.java": RECORD,
            "src/main/java/demo/Rows.java": ITERATOR,
            "src/test/java/demo/ByName.java": BY_NAME,  # strings and comments do not count
        }
    )
    d = detect(repo)
    assert d.supported, d.reason
    note = next(n for n in d.notes if "--release 8" in n)
    assert "java.lang.Record" in note and RELEASE_LINE in note
    assert "maven-compiler-plugin 3.1 raised to 3.14.1" in note
    dockerfile = make_recipe(repo, d).dockerfile
    edits = [ln for ln in dockerfile.splitlines() if RELEASE_LINE in ln]
    assert len(edits) == 2  # after the POMs, after the source
    for _ in range(2):  # the second run (after the source is copied) adds nothing
        _edit(repo, dockerfile)
    text = (repo / "pom.xml").read_text()
    assert "<artifactId>maven-compiler-plugin</artifactId>\n  <version>3.14.1</version>" in text
    assert "<source>8</source><target>8</target>" in text
    assert (repo / ".mvn/maven.config").read_text() == RELEASE_LINE + "\n"


def test_the_repositorys_own_maven_config_is_kept(make_repo: MakeRepo) -> None:
    repo = make_repo(
        {
            "pom.xml": pom(compiler(source="1.6", target="1.6")),
            ".mvn/maven.config": "-T1C",  # no newline at the end
        }
    )
    d = detect(repo)
    dockerfile = make_recipe(repo, d).dockerfile
    _edit(repo, dockerfile)
    assert (repo / ".mvn/maven.config").read_text() == f"-T1C\n{RELEASE_LINE}\n"


def test_a_version_property_is_raised_and_a_current_pin_kept(make_repo: MakeRepo) -> None:
    """A pin through a property the reactor defines; a 3.13.0 pin (joda-time) stays."""
    body = props(**{"compiler.version": "3.2", "surefire.version": "3.2"})
    plugins = (
        "<build><plugins><plugin><artifactId>maven-compiler-plugin</artifactId>"
        "<version>${compiler.version}</version><configuration><source>1.5</source>"
        "</configuration></plugin><plugin><artifactId>maven-surefire-plugin</artifactId>"
        "<version>${surefire.version}</version></plugin></plugins></build>"
    )
    module = pom(_pinned_compiler("3.13.0"), artifact="core", parent=True)
    root = pom(body + plugins + "<modules><module>core</module></modules>")
    repo = make_repo({"pom.xml": root, "core/pom.xml": module})
    d = detect(repo)
    assert any("${compiler.version}=3.2 raised to 3.14.1" in n for n in d.notes)
    _edit(repo, make_recipe(repo, d).dockerfile)
    text = (repo / "pom.xml").read_text()
    assert "<compiler.version>3.14.1</compiler.version>" in text
    assert "<surefire.version>3.2</surefire.version>" in text
    assert "<version>3.13.0</version>" in (repo / "core/pom.xml").read_text()


def test_jdk_internal_packages_keep_source_and_target(make_repo: MakeRepo) -> None:
    """``--release 8`` hides ``sun.misc``: such a project compiles as before."""
    repo = make_repo(
        {
            "pom.xml": pom(compiler(source="1.6", target="1.6")),
            "src/test/java/demo/Raw.java": UNSAFE,
        }
    )
    d = detect(repo)
    assert d.supported, d.reason
    assert any(
        "not --release 8" in n and "JDK-internal packages" in n and "demo/Raw.java" in n
        for n in d.notes
    )
    assert RELEASE_LINE not in make_recipe(repo, d).dockerfile


@pytest.mark.parametrize(
    ("config", "why"),
    [
        ({"compilerArgs": "<arg>-bootclasspath</arg><arg>rt.jar</arg>"}, "-bootclasspath"),
        ({"compilerArguments": "<source>1.6</source>"}, "-source"),
        ({"compilerId": "eclipse"}, "compilerId eclipse"),
    ],
)
def test_compiler_settings_that_clash_with_release_keep_source_and_target(
    make_repo: MakeRepo, config: dict[str, str], why: str
) -> None:
    repo = make_repo({"pom.xml": pom(compiler(source="1.6", target="1.6", **config))})
    d = detect(repo)
    assert any("do not go with --release" in n and why in n for n in d.notes), d.notes
    assert RELEASE_LINE not in make_recipe(repo, d).dockerfile


def test_maven_without_maven_config_keeps_source_and_target(make_repo: MakeRepo) -> None:
    url = "https://repo1.maven.org/maven2/org/apache/maven/apache-maven/3.1.1/x-bin.zip"
    repo = make_repo(
        {
            "pom.xml": pom(compiler(source="1.6", target="1.6")),
            ".mvn/wrapper/maven-wrapper.properties": f"distributionUrl={url}\n",
        }
    )
    d = detect(repo)
    assert any("Maven 3.1.1 reads no .mvn/maven.config" in n for n in d.notes)
    assert RELEASE_LINE not in make_recipe(repo, d).dockerfile


def test_a_project_that_is_not_raised_is_left_alone(make_repo: MakeRepo) -> None:
    repo = make_repo({"pom.xml": pom(_pinned_compiler("3.1", source="1.8", target="1.8"))})
    d = detect(repo)
    assert not any("--release" in n for n in d.notes)
    assert RELEASE_LINE not in make_recipe(repo, d).dockerfile


@pytest.mark.parametrize(
    ("maven", "plugin"), [("3.9.11", "3.14.1"), ("3.6.3", "3.14.1"), ("3.5.4", "3.12.1")]
)
def test_the_plugin_raised_to_runs_on_the_chosen_maven(maven: str, plugin: str) -> None:
    """3.13+ need Maven 3.6.3, 3.9-3.12 need 3.2.5 (their POMs' prerequisites)."""
    assert current_plugin(maven) == plugin
    assert current_plugin("3.0.5") == "3.8.1"


# ------------------------------------------------------------------------ a real build


@pytest.fixture(scope="module")
def local_backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    yield from local_backend_with_private_cache(tmp_path_factory, "java-release-cache")


@pytest.mark.slow
def test_a_record_class_of_a_raised_project_builds_in_the_sandbox(
    tmp_path: Path, local_backend: None
) -> None:
    """Real Maven and javac 17: plugin 3.1 and Java 6 as univocity writes them, its own
    ``Record`` wildcard-imported beside ``java.lang``."""
    if not java.reachable(java.CENTRAL_HOST) or shutil.which("sed") is None:
        pytest.skip("Maven Central is not reachable")
    junit = (
        "<dependencies><dependency><groupId>junit</groupId><artifactId>junit</artifactId>"
        "<version>4.13.2</version><scope>test</scope></dependency></dependencies>"
    )
    files = {
        "pom.xml": pom(junit + _pinned_compiler("3.1", source="1.6", target="1.6")),
        "src/main/java/demo/common/Record.java": RECORD,
        "src/main/java/demo/Rows.java": ITERATOR,
        "src/test/java/demo/RowsTest.java": (
            "package demo;\nimport demo.common.*;\nimport org.junit.Test;\n"
            "public class RowsTest {\n  @Test public void holds() { Record r = new Record();"
            " new Rows().last = r; }\n}\n"
        ),
    }
    result = checked_project(tmp_path / "univ", files)
    assert result.sample_ids == ["demo.RowsTest#holds"]
    assert not re.search(r"is ambiguous", result.log_tail)
