"""Records shared by every explorer adapter, the indexer, the store and the web layer.

An adapter reads an RL environment (a Harbor folder, a row dataset, a live OpenEnv server…)
and describes it with these plain dataclasses; nothing here imports anything heavy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["EnvDoc", "FileDoc", "Section", "TaskDoc"]


@dataclass(slots=True)
class Section:
    """One part of a task page, in display order."""

    id: str  # "instruction", "environment", "grading", "config", "metadata", ...
    title: str
    body: str  # text (already withheld/masked)
    format: str = "markdown"  # "markdown" | "text" | "code"
    language: str = ""  # for code: "toml", "python", "bash", "dockerfile", "json", ...


@dataclass(slots=True)
class FileDoc:
    """One file of a task."""

    path: str  # POSIX, relative to the task root, no "..", no leading "/"
    size: int
    data: bytes | None = None  # None when withheld or too big to pack (see reason)
    withheld: str | None = None  # reason shown to users, e.g. "solution (the answer)"


@dataclass(slots=True)
class TaskDoc:
    """Everything shown about one task: cards, page sections and files."""

    id: str  # a Harbor task's directory name; unique within its env
    title: str
    summary: str  # first lines of the instruction, plain text, <= 300 chars
    facets: dict[str, str]  # any of: category, difficulty, language, pipeline, source ...
    grading: str  # "tests", "diff", "reward-script", "exact-match", "llm-judge", "unknown"
    environment: str  # what it runs in, e.g. "python:3.12-slim", "image foo:1", "text only"
    network: str  # "no-network" | "public" | "unknown"
    runnable: bool  # can run here with repogym's local sandbox
    sections: list[Section]
    files: list[FileDoc]
    aliases: list[str] = field(default_factory=list)  # "sha256:<hash>": same key => same task
    withheld: list[str] = field(default_factory=list)  # human notes: what was withheld and why
    # each phase's own network mode: "environment" always (when known), "agent" / "verifier"
    # when the task sets them
    network_modes: dict[str, str] = field(default_factory=dict)
    # host environment variables the verifier asks for ("${VAR}" in [verifier.env]): names only
    verifier_env: list[str] = field(default_factory=list)


@dataclass(slots=True)
class EnvDoc:
    """One environment (a dataset of tasks)."""

    id: str  # local folder name, "org/name" for the Hub, host:port for OpenEnv ...
    kind: str  # "harbor" | "rows" | "openenv" | adapter-defined
    title: str
    summary: str
    description: str = ""  # markdown (dataset card / README), masked
    source: str = ""  # where it came from (path or URL) -- never contains credentials
    runs_in: str = ""  # e.g. "local sandbox (bubblewrap) or Docker"
    run_options: list[dict[str, str]] = field(default_factory=list)
    facets: dict[str, str] = field(default_factory=dict)
    private: bool = False
    task_count: int | None = None  # known before all tasks are read, when the adapter can tell
