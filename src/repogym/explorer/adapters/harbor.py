"""Harbor dataset folders: tasks are found by where ``task.toml`` is.

The environment id is the folder name; a task's id is its directory name. Sections: the
instruction, the environment (Dockerfile or image, each phase's network mode), how it is graded
(verifier summary, the host environment variables the verifier asks for — names only — and
``tests/test.sh``), ``task.toml`` and provenance. Answers are withheld later, centrally, by
:func:`repogym.explorer.withhold.apply`.

A dataset is untrusted: every file is read through :mod:`._safefs`, so no symlink is ever
followed (a symlinked ``instruction.md`` or ``task.toml`` shows as a symlink, never as the file
it points at) and only regular files are read.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from repogym.explorer.adapters._safefs import (
    UnsafeFile,
    is_dir_inside,
    is_file_inside,
    link_note,
    link_or_none,
    read_inside,
    read_text_inside,
    rel_to,
    walk_inside,
)
from repogym.explorer.adapters.base import AdapterError, stat_fingerprint
from repogym.explorer.model import EnvDoc, FileDoc, Section, TaskDoc
from repogym.taskdir.provenance import Provenance
from repogym.taskdir.runnable import task_refusals
from repogym.taskdir.trust import requested_env

__all__ = ["HarborAdapter", "HarborReader", "MAX_FILE_BYTES", "MAX_TASK_BYTES"]

MAX_FILE_BYTES = 1 << 20  # files larger than this are listed, not packed
MAX_TASK_BYTES = 16 << 20  # per task, beyond this files are listed, not packed
MAX_FILES = 5000  # per task, beyond this files are not listed
SKIP_DIRS = frozenset({".git", "__pycache__", "node_modules", ".venv", ".hg", ".svn"})
_RUNS_IN = "local sandbox (bubblewrap) or Docker"
# "${VAR}" / "${VAR:-default}" in [verifier.env]: a host variable the verifier asks for
_NETWORK = {"no-network": "no-network", "public": "public", "allowlist": "public"}


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
            from repogym.taskdir import iter_task_dirs

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


def _read(root: Path, rel: str, limit: int = 1 << 20) -> tuple[str | None, str | None]:
    """``(text, note)`` of the file ``rel`` under ``root``: the text when it is a regular file
    reached without any symlink; else None and, when it is (or lies below) a symlink or is a
    special file, a sentence saying so for the page (its content is never read)."""
    try:
        return read_inside(root, rel, limit).decode("utf-8", "replace"), None
    except UnsafeFile as exc:
        return None, _not_read(rel, str(exc), exc.at)
    except OSError:
        return None, None


def _has_task_toml(folder: str) -> bool:
    """Whether ``folder`` holds a ``task.toml`` (a symlink counts: the task is then listed and
    reading it says why it is refused, instead of the folder passing for a group)."""
    try:
        st = os.lstat(os.path.join(folder, "task.toml"))
    except OSError:
        return False
    return not stat.S_ISDIR(st.st_mode)


def _what(note: str) -> str:
    """A note of :mod:`._safefs` as a complement: "a symlink …" or "not a regular file …"."""
    return note if note.startswith("not ") else f"a {note}"


def _not_read(rel: str, note: str, at: str = "") -> str:
    if at and at != rel:
        return f"`{rel}` lies below `{at}`, {_what(note)}: its content is not shown."
    return f"`{rel}` is {_what(note)}: its content is not shown."


def network_modes(cfg: Any) -> dict[str, str]:
    """Each phase's own network mode: ``environment`` always, ``agent`` / ``verifier`` when
    the task sets them (they then override the environment's for that phase)."""
    modes = {"environment": str(cfg.environment.network_mode)}
    for phase in ("agent", "verifier"):
        mode = getattr(getattr(cfg, phase, None), "network_mode", None)
        if mode:
            modes[phase] = str(mode)
    return modes


def network_facet(modes: dict[str, str]) -> str:
    """The card's network: ``public`` when the agent or the verifier phase may reach the
    network, ``no-network`` when neither may, else ``unknown``."""
    base = modes.get("environment", "")
    effective = {_NETWORK.get(modes.get(p) or base, "unknown") for p in ("agent", "verifier")}
    if "public" in effective:
        return "public"
    return "no-network" if effective == {"no-network"} else "unknown"


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

    def __init__(self, root: Path, *, skip: frozenset[str] = SKIP_DIRS) -> None:
        self.root = root
        self.skip = skip  # names left out of a task's file list
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
        if _has_task_toml(str(root)):
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
                            and e.name not in SKIP_DIRS
                            and e.is_dir(follow_symlinks=False)
                        ]
                except OSError:
                    continue
                for sub in subdirs:
                    if _has_task_toml(sub):
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
        registry = self._json(root, "registry.json")
        if isinstance(registry, list) and registry and isinstance(registry[0], dict):
            entry = registry[0]
            title = str(entry.get("name") or title)
            summary = str(entry.get("description") or "")
            if isinstance(entry.get("tasks"), list):
                task_count = len(entry["tasks"])
        manifest = self._json(root, "manifest.json")
        if isinstance(manifest, dict) and isinstance(manifest.get("count"), int):
            task_count = manifest["count"]
        if (
            isinstance(manifest, dict)
            and isinstance(manifest.get("name"), str)
            and manifest["name"]
        ):
            title = manifest["name"]  # as published (registry.json holds Harbor's form)
        readme, readme_note = _read(root, "README.md")
        if readme_note:
            description = readme_note.replace("the task", "the dataset")
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
    def _json(root: Path, rel: str) -> Any:
        text = read_text_inside(root, rel, 16 << 20)
        try:
            return json.loads(text) if text else None
        except ValueError:
            return None

    # ------------------------------------------------------------------ task

    def task(self, task_id: str) -> TaskDoc:
        """The full task: sections, files, facets (raw; answers are withheld by the indexer)."""
        from repogym.taskdir.task import TaskError, parse_task_toml

        path = self.task_paths().get(task_id)
        if path is None:
            raise KeyError(task_id)
        rel = rel_to(self.root, path)
        above = link_or_none(self.root, rel) if rel else None
        if above is not None:  # a folder on the way to the task became a symlink
            raise AdapterError(f"{task_id}: the task folder is reached through a {above}")
        toml_text = _task_toml(path, task_id)
        try:
            cfg, _raw, _warnings = parse_task_toml(toml_text)
        except TaskError as exc:
            raise AdapterError(f"{task_id}: {exc}") from None
        meta = cfg.metadata if isinstance(cfg.metadata, dict) else {}
        prov = Provenance.read(cfg.repo2env)
        instruction, instruction_note = _read(path, "instruction.md")
        instruction = instruction or instruction_note or ""
        dockerfile, dockerfile_note = _read(path, "environment/Dockerfile")
        test_sh, test_sh_note = _read(path, "tests/test.sh")

        env_cfg = cfg.environment
        environment = _environment_kind(path, env_cfg.docker_image, dockerfile, dockerfile_note)
        modes = network_modes(cfg)
        network = network_facet(modes)
        host_env = requested_env(cfg.verifier.env)
        reward_kinds = list(prov.reward_kinds or [])
        grading = _grading_kind(
            reward_kinds, test_sh is not None or bool(test_sh_note), test_sh or ""
        )

        sub = prov.pipeline_table or {}
        facets = _facets(meta, prov, sub, cfg.task.keywords)

        title = (cfg.task.description or "").strip().splitlines()[0:1]
        title_text = title[0][:160] if title else (cfg.task.name or task_id)
        own = own_raw if isinstance(own_raw := meta.get("repogym"), dict) else {}
        summary = str(own.get("summary") or "") or _first_paragraph(instruction) or title_text

        sections = [Section("instruction", "Instruction", instruction, "markdown")]
        env_lines = _environment_lines(cfg, modes, environment, dockerfile is not None)
        sections.append(Section("environment", "Environment", "\n".join(env_lines), "markdown"))
        sections += _file_section(
            "dockerfile", "environment/Dockerfile", dockerfile, dockerfile_note
        )

        f2p = self._count(sub.get("fail_to_pass"), path, "tests/f2p.json")
        p2p = self._count(sub.get("pass_to_pass"), path, "tests/p2p.json")
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
        if "verifier" in modes:
            g.append(f"- Verifier network: {modes['verifier']}")
        if host_env:
            g.append(
                "- Host environment variables the verifier asks for: "
                + ", ".join(f"`{n}`" for n in host_env)
                + " (names only: values are never shown; a variable reaches the task only "
                "when the user passes it)"
            )
        if is_file_inside(path, "tests/test.patch"):
            g.append("- Hidden tests are restored before grading (the test patch is withheld)")
        g += _verification_lines(prov.evaluation)
        sections.append(Section("grading", "How it is graded", "\n".join(g), "markdown"))
        sections += _file_section("grader", "tests/test.sh", test_sh, test_sh_note)
        sections.append(Section("config", "task.toml", toml_text, "code", "toml"))
        origin = _provenance_lines(prov)
        if origin:
            sections.append(Section("provenance", "Provenance", "\n".join(origin), "markdown"))

        return TaskDoc(
            id=task_id,
            title=title_text,
            summary=summary,
            facets=facets,
            grading=grading,
            environment=environment,
            network=network,
            runnable=dockerfile is not None and not task_refusals(cfg, path),
            sections=sections,
            files=self._files(path),
            aliases=[prov.content_hash] if prov.content_hash else [],
            network_modes=modes,
            verifier_env=host_env,
        )

    def fingerprint(self, task_id: str) -> str:
        """A cheap identity of the task folder: every entry's path, type, size, inode, and
        modification and change times (stat only, nothing read). Equal fingerprints let the
        indexer reuse the page and row it made before."""
        path = self.task_paths().get(task_id)
        if path is None:
            raise KeyError(task_id)
        return stat_fingerprint(path, skip=self.skip) or ""

    @staticmethod
    def _count(value: Any, root: Path, fallback: str) -> int | None:
        if isinstance(value, list):
            return len(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        text = read_text_inside(root, fallback, 16 << 20)
        if text is None:
            return None
        try:
            data = json.loads(text)
        except ValueError:
            return None
        return len(data) if isinstance(data, list) else None

    def _files(self, path: Path) -> list[FileDoc]:
        """Every file of the task, sorted: symlinks listed, never followed (their target shown
        only when it stays inside the task); special files listed, never read."""
        out: list[FileDoc] = []
        budget = MAX_TASK_BYTES
        for rel, kind, size in walk_inside(path, skip=self.skip, limit=MAX_FILES):
            if kind == "link":
                out.append(FileDoc(rel, 0, None, link_note(path, rel)))
                continue
            if kind != "file":
                out.append(FileDoc(rel, 0, None, "not a regular file, not read"))
                continue
            if size > MAX_FILE_BYTES:
                out.append(FileDoc(rel, size, None, f"too large to show ({size} bytes)"))
                continue
            if size > budget:
                out.append(FileDoc(rel, size, None, "not packed (the task is too large)"))
                continue
            try:
                data = read_inside(path, rel, MAX_FILE_BYTES + 1)
            except UnsafeFile as exc:
                out.append(FileDoc(rel, 0, None, str(exc)))
                continue
            except OSError:
                continue
            budget -= len(data)
            out.append(FileDoc(rel, len(data), data))
        return out


def _hosts(hosts: list[str] | None) -> str:
    return f" (allowed hosts: {', '.join(f'`{h}`' for h in hosts)})" if hosts else ""


def _verification_lines(evaluation: dict[str, Any]) -> list[str]:
    """What ``repogym verify`` recorded: status, nop, mutant kill rate and the adversarial
    floor (the highest reward a generic wrong solution earned; above nop = gameable)."""
    out = []
    if evaluation.get("status"):
        out.append(f"- Verified by repogym: **{_str(evaluation['status'])}**")
    if isinstance(evaluation.get("nop_reward"), int | float):
        out.append(f"- Reward of doing nothing (nop): {evaluation['nop_reward']:g}")
    rate = evaluation.get("mutant_kill_rate")
    if isinstance(rate, int | float):
        out.append(
            f"- Mutant kill rate: {rate:.2f} of {_str(evaluation.get('mutants'))} near misses"
        )
    floor = evaluation.get("adversarial_floor")
    if isinstance(floor, int | float):
        gap = evaluation.get("gameability_gap")
        results = evaluation.get("adversarial_results")
        winners = [
            str(r.get("kind"))
            for r in (results if isinstance(results, list) else [])
            if isinstance(r, dict) and r.get("killed") is False
        ]
        if winners:
            verdict = f"**gameable**: {', '.join(winners)} earn the full reward"
        elif isinstance(gap, int | float) and gap > 0:
            verdict = f"partial credit for generic wrong solutions (gap {gap:g})"
        else:
            verdict = "no generic wrong solution earns more than nop"
        out.append(
            f"- Adversarial floor: {floor:g} over "
            f"{_str(evaluation.get('adversarial_candidates'))} red-team candidates: {verdict}"
        )
    return out


def _task_toml(path: Path, task_id: str) -> str:
    """The task's ``task.toml`` text, read inside the task folder (one-line refusals)."""
    try:
        return read_inside(path, "task.toml", 16 << 20).decode("utf-8")
    except UnsafeFile as exc:
        where = f"lies below `{exc.at}`, " if exc.at and exc.at != "task.toml" else "is "
        raise AdapterError(f"{task_id}: task.toml {where}{_what(str(exc))}") from None
    except OSError as exc:
        raise AdapterError(f"{task_id}: cannot read task.toml ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise AdapterError(f"{task_id}: task.toml is not UTF-8 ({exc.reason})") from None


def _environment_kind(
    path: Path, image: str | None, dockerfile: str | None, dockerfile_note: str | None
) -> str:
    """What the task runs in, in a few words (its Dockerfile's base image when read)."""
    if dockerfile is not None:
        return _from_image(dockerfile) or "Dockerfile"
    if dockerfile_note:
        return "Dockerfile not read (symlink or special file)"
    if image:
        return f"image {image}"
    if is_dir_inside(path, "environment"):
        return "environment folder"
    return "text only"


def _facets(
    meta: dict[str, Any], prov: Provenance, sub: dict[str, Any], keywords: Any
) -> dict[str, str]:
    """The task's facets (language, pipeline, difficulty, category, tags, source)."""
    facets: dict[str, str] = {}
    extra = prov.extra  # keys the provenance model does not name (other tools' keys)
    language = meta.get("language") or sub.get("language")
    for holder in ("bootstrap", "recipe"):
        h = extra.get(holder) or sub.get(holder)
        if not language and isinstance(h, dict):
            language = h.get("language")
    if language:
        facets["language"] = str(language)
    if prov.pipeline:
        facets["pipeline"] = prov.pipeline
    for key in ("difficulty", "category"):
        value = meta.get(key) or extra.get(key)
        if value:
            facets[key] = _str(value)
    tags = meta.get("tags") or keywords
    if tags:
        facets["tags"] = _str(tags)
    if prov.repo:
        facets["source"] = prov.repo
    return facets


def _environment_lines(
    cfg: Any, modes: dict[str, str], environment: str, has_dockerfile: bool
) -> list[str]:
    """The Environment section: what it runs in, networks, resources, limits."""
    env_cfg = cfg.environment
    env_lines = [f"- Runs in: **{environment}**"]
    env_lines.append(f"- Network: {modes['environment']}" + _hosts(env_cfg.allowed_hosts))
    for phase in ("agent", "verifier"):
        if phase in modes:
            hosts = getattr(cfg, phase).allowed_hosts or []
            env_lines.append(
                f"- {phase.title()} network: {modes[phase]}{_hosts(hosts)} "
                f"(the {phase} phase's own setting)"
            )
    env_lines.append(
        f"- Resources: {env_cfg.cpus:g} CPU, {env_cfg.memory_mb} MB memory, "
        f"{env_cfg.storage_mb} MB storage" + (f", {env_cfg.gpus} GPU" if env_cfg.gpus else "")
    )
    if env_cfg.workdir:
        env_lines.append(f"- Working directory: `{env_cfg.workdir}`")
    env_lines.append(f"- Agent time limit: {cfg.agent.timeout_sec:g} s")
    if not has_dockerfile and env_cfg.docker_image:
        env_lines.append(
            f"- Prebuilt image `{env_cfg.docker_image}`: pulled where a registry serves it "
            "(no Dockerfile to build instead)"
        )
    elif env_cfg.docker_image:
        env_lines.append(
            f"- Published image `{env_cfg.docker_image}`: runs start from it; "
            "environment/Dockerfile builds it again"
        )
    return env_lines


def _provenance_lines(prov: Provenance) -> list[str]:
    """The Provenance section: where the task came from (its ``[repo2env]`` block)."""
    lines = [
        f"- {label}: {value}"
        for value, label in (
            (prov.repo, "Repository"),
            (prov.ref, "Ref"),
            (prov.reference, "Reference"),
            (prov.pipeline, "Pipeline"),
            (prov.pipeline_version, "Pipeline version"),
            (prov.source_access, "Source access"),
            (prov.built_at, "Built at"),
            (prov.synthesis_llm, "Synthesis LLM"),
            (prov.content_hash, "Content hash"),
        )
        if value
    ]
    if prov.reproducibility_mode:
        lines.append(f"- Reproducibility: {prov.reproducibility_mode}")
    return lines


_LANGS = {"environment/Dockerfile": "dockerfile", "tests/test.sh": "bash"}


def _file_section(key: str, name: str, text: str | None, note: str | None) -> list[Section]:
    """A section showing one of the task's files as code, or why it was not read."""
    if text is not None:
        return [Section(key, name, text, "code", _LANGS[name])]
    return [Section(key, name, note)] if note else []
