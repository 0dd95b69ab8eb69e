"""What ``bug_synth`` may mutate in a Java repository (no sandbox): only the main code of the
Maven modules a build compiles, never a second project beside the built one nor a module the
reactor does not list (their code is never built, so every edit there survives)."""

from __future__ import annotations

from repogym.bootstrap.native.java import built_folders
from repogym.pipelines.bug_synth import BugSynth
from repogym.sources.local import LocalGitSource
from repogym.spec import BugSynthOptions
from tests.sources.conftest import GitRepo, isolated_git, make_repo

__all__ = ["isolated_git", "make_repo"]

POM = (
    '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
    "<groupId>demo</groupId><artifactId>{name}</artifactId><version>1</version>{extra}</project>"
)
CODE = """package demo;

public class Calc {{
    public static int {name}(int a, int b) {{
        if (a < b) {{
            return a + b;
        }}
        return a - b;
    }}
}}
"""


def _pom(name: str, extra: str = "") -> str:
    return POM.format(name=name, extra=extra)


def _mutated_files(repo: GitRepo) -> set[str]:
    with LocalGitSource(repo.path) as source:
        found = BugSynth().candidates(source, BugSynthOptions(), "demo", "HEAD")
        return {c.extra["edit"].path for c in found if not isinstance(c, tuple)}


def test_only_the_built_project_one_folder_down_is_mutated(make_repo) -> None:  # type: ignore[no-untyped-def]
    repo = make_repo("lambda")
    for folder in ("lib", "lib-java-8"):
        repo.write(f"{folder}/pom.xml", _pom(folder))
        repo.write(f"{folder}/src/main/java/demo/Calc.java", CODE.format(name="add"))
    repo.write(".travis.yml", "script: cd lib && mvn test\n")
    repo.commit("two copies")
    assert built_folders(repo.path) == ["lib"]
    assert _mutated_files(repo) == {"lib/src/main/java/demo/Calc.java"}


def test_a_module_the_reactor_does_not_list_is_not_mutated(make_repo) -> None:  # type: ignore[no-untyped-def]
    repo = make_repo("reactor")
    repo.write(
        "pom.xml",
        _pom("root", "<packaging>pom</packaging><modules><module>core</module></modules>"),
    )
    for folder in ("core", "attic"):
        repo.write(f"{folder}/pom.xml", _pom(folder))
        repo.write(f"{folder}/src/main/java/demo/Calc.java", CODE.format(name="add"))
    repo.commit("a module and an unlisted one")
    assert built_folders(repo.path) == ["", "core"]
    assert _mutated_files(repo) == {"core/src/main/java/demo/Calc.java"}
