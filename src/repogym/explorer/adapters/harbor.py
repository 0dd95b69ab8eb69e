"""Harbor dataset folders: tasks are found by where ``task.toml`` is.

The environment id is the folder name; a task's id is its directory name. Sections: the
instruction, the environment (Dockerfile or image), how it is graded (verifier summary and
``tests/test.sh``), ``task.toml`` and provenance. Answers are withheld later, centrally, by
:func:`repogym.explorer.withhold.apply`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from repogym.explorer.adapters.base import AdapterError, stat_fingerprint
from repogym.explorer.model import EnvDoc, FileDoc, Section, TaskDoc

__all__ = ["HarborAdapter", "HarborReader", "MAX_FILE_BYTES", "MAX_TASK_BYTES"]

MAX_FILE_BYTES = 1 << 20  # files larger than this are listed, not packed
MAX_TASK_BYTES = 16 << 20  # per task, beyond this files are listed, not packed
MAX_FILES = 5000  # per task, beyond this files are not listed
_SKIP_DIRS = frozenset({".git", "__pycache__", "node_modules", ".venv", ".hg", ".svn"})
_RUNS_IN = "local sandbox (bubblewrap) or Docker"


class HarborAdapter:
    """Reads a local folder of Harbor tasks (``tasks/<id>/``, ``<id>/``, nested groups)."""

    name = "harbor"

    def detect(self, location: str) -> float:
        """1.0 when a ``task.toml`` is at or under the folder, else 0."""
        p = Path(location)
        try:
            if not p.is_dir():
                return 0.0
            if (p / "task.toml").is_file():
                return 1.0
            from repogym.harbor import iter_task_dirs

            return 1.0 if next(iter(iter_task_dirs(p)), None) is not None else 0.0
        except OSError:
            return 0.0

    def open(self, location: str) -> HarborReader:
        """A reader for the folder; :class:`AdapterError` when it holds no task."""
        p = Path(location)
        if not p.exists():
            raise AdapterError(f"{location}: no such folder")
        if not p.is_dir():
            raise AdapterError(f"{location}: not a folder")
        reader = HarborReader(p)
        if not reader.task_paths():
            raise AdapterError(f"{location}: no task.toml found")
        return reader


def _read_text(path: Path, limit: int = 1 << 20) -> str | None:
    try:
        with path.open("rb") as fh:
            data = fh.read(limit)
    except OSError:
        return None
    return data.decode("utf-8", "replace")


def _first_paragraph(markdown: str, limit: int = 300) -> str:
    """The first lines of a markdown text as plain text, at most ``limit`` characters."""
    lines: list[str] = []
    in_code = False
    in_front = False
    for i, raw in enumerate(markdown.splitlines()):
        line = raw.strip()
        if i == 0 and line == "---":
            in_front = True
            continue
        if in_front:
            in_front = line != "---"
            continue
        if line.startswith("```") or line.startswith("~~~"):
            in_code = not in_code
            continue
        if in_code or line.startswith("<!--"):
            continue
        if not line:
            if lines:
                break
            continue
        if line.startswith("#") and not lines:
            continue  # skip a leading heading: the title says it already
        lines.append(line)
    text = " ".join(lines)
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", "", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[`*_]{1,3}", "", text)
    text = re.sub(r"^[#>\-+*\s]+", "", text).strip()
    if len(text) > limit:
        text = text[: limit - 1].rsplit(" ", 1)[0].rstrip(",.;:") + "…"
    return text


def _heading(markdown: str) -> str:
    for line in markdown.splitlines()[:40]:
        m = re.match(r"^#\s+(.+?)\s*#*\s*$", line)
        if m:
            return m.group(1).strip()
    return ""


def _grading_kind(reward_kinds: list[str], has_test_sh: bool, test_sh: str) -> str:
    kinds = {str(k).lower().replace("-", "_") for k in reward_kinds}
    if kinds & {"test_execution", "tests", "unit_tests"}:
        return "tests"
    if kinds & {"diff", "pr_diff", "diff_similarity", "patch_similarity"}:
        return "diff"
    if kinds & {"llm_judge", "judge", "rubric"}:
        return "llm-judge"
    if kinds & {"exact_match", "exact", "string_match"}:
        return "exact-match"
    if not has_test_sh:
        return "unknown"
    if re.search(r"\b(pytest|unittest|jest|vitest|mocha|go test|cargo test|npm test)\b", test_sh):
        return "tests"
    return "reward-script"


def _from_image(dockerfile: str) -> str:
    for line in dockerfile.splitlines():
        m = re.match(r"^\s*FROM\s+(?:--platform=\S+\s+)?(\S+)", line, re.I)
        if m:
            return m.group(1)
    return ""


def _str(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return "" if value is None else str(value)


class HarborReader:
    """One Harbor dataset folder (or one task folder)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._paths: dict[str, Path] | None = None

    # ------------------------------------------------------------------ listing

    def task_paths(self) -> dict[str, Path]:
        """Task id → folder, found by where ``task.toml`` is (ids made unique)."""
        if self._paths is None:
            for _ in self.task_ids():
                pass
        return self._paths if self._paths is not None else {}

    def task_ids(self) -> Iterator[str]:
        """Task ids level by level: each folder level is listed, then its tasks yielded."""
        if self._paths is not None:
            yield from list(self._paths)
            return
        paths: dict[str, Path] = {}
        root = self.root
        if (root / "task.toml").is_file():
            paths[root.resolve().name or "task"] = root
            self._paths = paths
            yield from list(paths)
            return
        level = [str(root)]
        while level:
            nxt: list[str] = []
            found: list[str] = []
            for current in level:
                try:
                    with os.scandir(current) as it:
                        subdirs = [
                            e.path
                            for e in it
                            if not e.name.startswith(".")
                            and e.name not in _SKIP_DIRS
                            and e.is_dir(follow_symlinks=False)
                        ]
                except OSError:
                    continue
                for sub in subdirs:
                    if os.path.isfile(os.path.join(sub, "task.toml")):
                        found.append(sub)
                    else:
                        nxt.append(sub)
            for sub in sorted(found):
                p = Path(sub)
                tid = p.name
                if tid in paths:  # same directory name in two groups: qualify it
                    tid = "__".join(p.relative_to(root).parts)
                paths[tid] = p
                yield tid
            level = sorted(nxt)
        self._paths = paths

    # ------------------------------------------------------------------ env

    def env(self) -> EnvDoc:
        """The dataset: title and description from registry.json / manifest.json / README.md."""
        root = self.root
        env_id = root.resolve().name or "dataset"
        title, summary, description = env_id, "", ""
        task_count: int | None = None
        registry = self._json(root / "registry.json")
        if isinstance(registry, list) and registry and isinstance(registry[0], dict):
            entry = registry[0]
            title = str(entry.get("name") or title)
            summary = str(entry.get("description") or "")
            if isinstance(entry.get("tasks"), list):
                task_count = len(entry["tasks"])
        manifest = self._json(root / "manifest.json")
        if isinstance(manifest, dict) and isinstance(manifest.get("count"), int):
            task_count = manifest["count"]
        readme = _read_text(root / "README.md") if (root / "README.md").is_file() else None
        if readme:
            from repogym.explorer.withhold import mask_yamlish

            description = mask_yamlish(readme, [])
            title = title if title != env_id else (_heading(readme) or env_id)
            summary = summary or _first_paragraph(readme)
        if self._paths is not None:
            task_count = len(self._paths)
        facets: dict[str, str] = {}
        if isinstance(manifest, dict) and isinstance(manifest.get("tasks"), list):
            for key in ("pipeline", "difficulty", "category"):
                values = {str(r.get(key)) for r in manifest["tasks"] if isinstance(r, dict)}
                values.discard("None")
                if len(values) == 1:
                    facets[key] = values.pop()
        if not summary:
            summary = "Harbor tasks" + (f" ({task_count})" if task_count is not None else "")
        path = str(root)
        return EnvDoc(
            id=env_id,
            kind="harbor",
            title=title,
            summary=summary,
            description=description,
            source=path,
            runs_in=_RUNS_IN,
            run_options=[
                {"label": "Run the oracle with repogym", "command": f"repogym run {path}"},
                {"label": "Verify (oracle = 1, no-op = 0)", "command": f"repogym verify {path}"},
                {"label": "Serve over OpenEnv", "command": f"repogym serve {path}"},
            ],
            facets=facets,
            task_count=task_count,
        )

    @staticmethod
    def _json(path: Path) -> Any:
        if not path.is_file():
            return None
        text = _read_text(path, 16 << 20)
        try:
            return json.loads(text) if text else None
        except ValueError:
            return None

    # ------------------------------------------------------------------ task

    def task(self, task_id: str) -> TaskDoc:
        """The full task: sections, files, facets (raw; answers are withheld by the indexer)."""
        from repogym.harbor import TaskError, load_task

        path = self.task_paths().get(task_id)
        if path is None:
            raise KeyError(task_id)
        try:
            task = load_task(path)
        except TaskError as exc:
            raise AdapterError(f"{task_id}: {exc}") from None
        cfg = task.config
        meta = cfg.metadata if isinstance(cfg.metadata, dict) else {}
        block = task.repo2env or {}
        instruction = _read_text(path / "instruction.md") or ""
        dockerfile_path = path / "environment" / "Dockerfile"
        dockerfile = _read_text(dockerfile_path) if dockerfile_path.is_file() else None
        test_sh_path = path / "tests" / "test.sh"
        test_sh = _read_text(test_sh_path) if test_sh_path.is_file() else None

        env_cfg = cfg.environment
        if dockerfile is not None:
            environment = _from_image(dockerfile) or "Dockerfile"
        elif env_cfg.docker_image:
            environment = f"image {env_cfg.docker_image}"
        elif (path / "environment").is_dir():
            environment = "environment folder"
        else:
            environment = "text only"
        network = {"no-network": "no-network", "public": "public", "allowlist": "public"}.get(
            str(env_cfg.network_mode), "unknown"
        )
        reward_kinds = [str(k) for k in block.get("reward_kinds") or [] if k]
        grading = _grading_kind(reward_kinds, test_sh is not None, test_sh or "")

        pipeline = block.get("pipeline")
        sub = block.get(pipeline) if isinstance(pipeline, str) else None
        sub = sub if isinstance(sub, dict) else {}
        facets: dict[str, str] = {}
        language = meta.get("language") or sub.get("language")
        for holder in ("bootstrap", "recipe"):
            h = block.get(holder) or sub.get(holder)
            if not language and isinstance(h, dict):
                language = h.get("language")
        if language:
            facets["language"] = str(language)
        if pipeline:
            facets["pipeline"] = str(pipeline)
        for key in ("difficulty", "category"):
            value = meta.get(key) or block.get(key)
            if value:
                facets[key] = _str(value)
        tags = meta.get("tags") or cfg.task.keywords
        if tags:
            facets["tags"] = _str(tags)
        if block.get("repo"):
            facets["source"] = str(block["repo"])

        title = (cfg.task.description or "").strip().splitlines()[0:1]
        title_text = title[0][:160] if title else (cfg.task.name or task_id)
        summary = _first_paragraph(instruction) or title_text

        sections = [Section("instruction", "Instruction", instruction, "markdown")]
        env_lines = [f"- Runs in: **{environment}**"]
        env_lines.append(f"- Network: {env_cfg.network_mode}")
        env_lines.append(
            f"- Resources: {env_cfg.cpus:g} CPU, {env_cfg.memory_mb} MB memory, "
            f"{env_cfg.storage_mb} MB storage" + (f", {env_cfg.gpus} GPU" if env_cfg.gpus else "")
        )
        if env_cfg.workdir:
            env_lines.append(f"- Working directory: `{env_cfg.workdir}`")
        env_lines.append(f"- Agent time limit: {cfg.agent.timeout_sec:g} s")
        if dockerfile is None and env_cfg.docker_image:
            env_lines.append(
                f"- Prebuilt image `{env_cfg.docker_image}`: not buildable by the local sandbox"
            )
        sections.append(Section("environment", "Environment", "\n".join(env_lines), "markdown"))
        if dockerfile is not None:
            sections.append(
                Section("dockerfile", "environment/Dockerfile", dockerfile, "code", "dockerfile")
            )

        f2p = self._count(sub.get("fail_to_pass"), path / "tests" / "f2p.json")
        p2p = self._count(sub.get("pass_to_pass"), path / "tests" / "p2p.json")
        g = [f"- Grading: **{grading}**"]
        if reward_kinds:
            g.append(f"- Reward kinds: {', '.join(reward_kinds)}")
        if f2p is not None:
            g.append(f"- Fail-to-pass tests (must go from failing to passing): {f2p}")
        if p2p is not None:
            g.append(f"- Pass-to-pass tests (must keep passing): {p2p}")
        if test_sh is not None:
            g.append("- Verifier entry point: `tests/test.sh` (writes `/logs/verifier/reward.txt`)")
        g.append(f"- Verifier time limit: {cfg.verifier.timeout_sec:g} s")
        if (path / "tests" / "test.patch").is_file():
            g.append("- Hidden tests are restored before grading (the test patch is withheld)")
        sections.append(Section("grading", "How it is graded", "\n".join(g), "markdown"))
        if test_sh is not None:
            sections.append(Section("grader", "tests/test.sh", test_sh, "code", "bash"))
        toml_text = _read_text(path / "task.toml") or ""
        sections.append(Section("config", "task.toml", toml_text, "code", "toml"))
        prov = [
            f"- {label}: {_str(block.get(key))}"
            for key, label in (
                ("repo", "Repository"),
                ("ref", "Ref"),
                ("reference", "Reference"),
                ("pipeline", "Pipeline"),
                ("pipeline_version", "Pipeline version"),
                ("source_access", "Source access"),
                ("built_at", "Built at"),
                ("synthesis_llm", "Synthesis LLM"),
                ("content_hash", "Content hash"),
            )
            if block.get(key)
        ]
        repro = block.get("reproducibility")
        if isinstance(repro, dict) and repro.get("mode"):
            prov.append(f"- Reproducibility: {repro['mode']}")
        if prov:
            sections.append(Section("provenance", "Provenance", "\n".join(prov), "markdown"))

        aliases = []
        digest = block.get("content_hash")
        if isinstance(digest, str) and digest:
            aliases.append(digest if digest.startswith("sha256:") else f"sha256:{digest}")
        return TaskDoc(
            id=task_id,
            title=title_text,
            summary=summary,
            facets=facets,
            grading=grading,
            environment=environment,
            network=network,
            runnable=dockerfile is not None,
            sections=sections,
            files=self._files(path),
            aliases=aliases,
        )

    def fingerprint(self, task_id: str) -> str:
        """A cheap identity of the task folder: every entry's path, type, size, inode, and
        modification and change times (stat only, nothing read). Equal fingerprints let the
        indexer reuse the page and row it made before."""
        path = self.task_paths().get(task_id)
        if path is None:
            raise KeyError(task_id)
        return stat_fingerprint(path, skip=_SKIP_DIRS) or ""

    @staticmethod
    def _count(value: Any, fallback: Path) -> int | None:
        if isinstance(value, list):
            return len(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if fallback.is_file():
            try:
                data = json.loads(fallback.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return None
            return len(data) if isinstance(data, list) else None
        return None

    @staticmethod
    def _files(path: Path) -> list[FileDoc]:
        """Every regular file of the task (symlinks listed, never followed), sorted."""
        out: list[FileDoc] = []
        budget = MAX_TASK_BYTES
        stack = [path]
        entries: list[tuple[str, os.DirEntry[str]]] = []
        while stack and len(entries) < MAX_FILES:
            current = stack.pop()
            try:
                with os.scandir(current) as it:
                    for e in it:
                        if e.name in _SKIP_DIRS:
                            continue
                        rel = os.path.relpath(e.path, path).replace(os.sep, "/")
                        if e.is_dir(follow_symlinks=False):
                            stack.append(Path(e.path))
                        else:
                            entries.append((rel, e))
            except OSError:
                continue
        entries.sort(key=lambda t: t[0])
        for rel, e in entries[:MAX_FILES]:
            if e.is_symlink():
                out.append(FileDoc(rel, 0, None, "symlink (not followed)"))
                continue
            if not e.is_file(follow_symlinks=False):
                continue
            try:
                size = e.stat(follow_symlinks=False).st_size
            except OSError:
                continue
            if size > MAX_FILE_BYTES:
                out.append(FileDoc(rel, size, None, f"too large to show ({size} bytes)"))
                continue
            if size > budget:
                out.append(FileDoc(rel, size, None, "not packed (the task is too large)"))
                continue
            try:
                fd = os.open(e.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
                with os.fdopen(fd, "rb") as fh:
                    data = fh.read(MAX_FILE_BYTES + 1)
            except OSError:
                continue
            budget -= len(data)
            out.append(FileDoc(rel, len(data), data))
        return out
