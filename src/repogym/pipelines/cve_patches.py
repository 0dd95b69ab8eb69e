"""``cve_patches``: security advisories (OSV records) whose fix commits are in the repository's
history become tasks — "here is the repository before the fix; the advisory says what is wrong".

Advisories come from a local OSV export (a record, a folder of records, osv.dev's ``all.zip``)
or the OSV query API (``osv=api``). A record is about this repository when a ``GIT`` range's
``repo``, a reference or a ``GIT`` package names the repository's URL (its origin, or
``repo_url``); ``match_repo=false`` takes every record. Its fix commits are the ``fixed``
events of its ``GIT`` ranges and the commits its ``FIX`` references link to (other references'
commit links when it names none, as GitHub's exports do), kept when ``git`` has them.

Each (advisory, fix commit) is a candidate. A fix with a test change becomes a **graded
runtime task** through the runtime harness (F2P/P2P, clean room, mutants); one without becomes
a **text-only task** scored by diff similarity, like ``pr_diff``'s. Either way the instruction
is the advisory's summary and details (cleaned by ``_instructions.advisory``, then by the
instruction builders' leak checks) — never the commit message — and the advisory's ids, CWE ids,
severity and dates go into ``[metadata.repo2env.cve_patches]``.

Records fixing the same commit are one candidate (the one with the best text speaks; the other
ids become aliases); the same id twice keeps the latest ``modified``.
"""

from __future__ import annotations

import configparser
import dataclasses
import functools
import json
import logging
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from repogym.pipelines._harness.diff_task import DiffTaskHarness
from repogym.pipelines._harness.runtime import RuntimeHarness
from repogym.pipelines._instructions.advisory import advisory_text
from repogym.pipelines._mined.candidates import candidate_from_change, split_sized
from repogym.pipelines._mined.osv import (
    Advisory,
    Loaded,
    api_base,
    commit_of_url,
    load_export,
    names_repo,
    query_api,
    repo_key,
)
from repogym.pipelines.base import Candidate, HarnessContext, Outcome
from repogym.sources import Source, SourceError
from repogym.sources.patches import parse_patch
from repogym.spec import CvePatchesOptions, PrDiffOptions
from repogym.taskdir import update_task_toml
from repogym.taskdir.config import TaskConfig

log = logging.getLogger(__name__)

ADVISORY_PAGE = "https://osv.dev/vulnerability/{id}"
NO_TESTS = ("no test change", "no added or changed test")
"""Drop reasons of the runtime checks that send a fix to the text-only path instead."""
_ID_PREFERENCE = ("GHSA-", "PYSEC-", "GO-", "RUSTSEC-")
"""Which record of several for one commit speaks for them (GitHub's have the best text)."""


@dataclasses.dataclass
class AdvisoryCandidate(Candidate):
    """A fix commit of an advisory: the change, what the task records about the advisory
    (``advisory``), and which kind of task it becomes."""

    advisory: dict[str, Any] = dataclasses.field(default_factory=dict)
    graded: bool = True
    """A runtime task (the fix changes tests), else a text-only diff-scored one."""


# ------------------------------------------------------------------------------ input


def load_advisories(source: Source, options: CvePatchesOptions, rev: str) -> Loaded:
    """The records of ``options.osv``: a local export, or the API's answers (by package,
    given or read from the repository, and by commit); SourceError when there are none to
    read or the input cannot be read."""
    if options.osv is None:
        raise SourceError(
            "cve_patches needs --opt osv=PATH (an OSV record, a folder of records or a .zip "
            "export) or --opt osv=api"
        )
    if options.osv != "api":
        return load_export(Path(options.osv))
    queries: list[dict[str, Any]] = []
    found = detect_package(source, rev)
    name = options.package or (found[0] if found else None)
    ecosystem = options.ecosystem or (found[1] if found else None)
    if name:
        package = {"name": name, **({"ecosystem": ecosystem} if ecosystem else {})}
        queries.append({"package": package})
    if options.api_commits:
        shas = [c.sha for c in source.iter_commits(rev, first_parent=True)]
        step = max(1, len(shas) // options.api_commits)
        queries += [{"commit": sha} for sha in shas[::step][: options.api_commits]]
    if not queries:
        raise SourceError(
            "osv=api: no package name found in the repository; give --opt package=NAME "
            "(and ecosystem=…) or --opt api_commits=N"
        )
    return query_api(api_base(options.osv_url), queries)


def detect_package(source: Source, rev: str) -> tuple[str, str] | None:
    """``(name, OSV ecosystem)`` of the project at ``rev``: pyproject.toml, setup.cfg,
    package.json, Cargo.toml, go.mod or composer.json at the root."""

    def read(path: str) -> str | None:
        try:
            return source.read_file(rev, path).decode("utf-8", "replace")
        except (FileNotFoundError, SourceError):
            return None

    try:
        if (text := read("pyproject.toml")) is not None:
            name = (tomllib.loads(text).get("project") or {}).get("name")
            if isinstance(name, str) and name:
                return name, "PyPI"
        if (text := read("setup.cfg")) is not None:
            parser = configparser.ConfigParser(interpolation=None)
            parser.read_string(text)
            if parser.get("metadata", "name", fallback=""):
                return parser.get("metadata", "name"), "PyPI"
        for path, ecosystem in (("package.json", "npm"), ("composer.json", "Packagist")):
            if (text := read(path)) is not None:
                name = json.loads(text).get("name")
                if isinstance(name, str) and name:
                    return name, ecosystem
        if (text := read("Cargo.toml")) is not None:
            name = (tomllib.loads(text).get("package") or {}).get("name")
            if isinstance(name, str) and name:
                return name, "crates.io"
        if (text := read("go.mod")) is not None:
            m = re.search(r"^module\s+(\S+)", text, re.MULTILINE)
            if m:
                return m.group(1), "Go"
    except (ValueError, configparser.Error, AttributeError):
        return None
    return None


def repository_key(source: Source, options: CvePatchesOptions) -> str:
    """This repository as advisories name it (a :func:`repo_key`), or SourceError when it
    cannot be told and records must be matched."""
    url = options.repo_url or source.remote_url()
    if not url:
        page = source.commit_url("0" * 40)
        url = page.rsplit("/commit/", 1)[0] if page else None
    if url:
        return repo_key(url)
    if not options.match_repo:
        return ""
    raise SourceError(
        "cve_patches: this repository has no origin remote to match advisories with; give "
        "--opt repo_url=URL (the repository as advisories name it) or --opt match_repo=false"
    )


def fix_commits(adv: Advisory, repo: str | None) -> list[str]:
    """The commits ``adv`` says fix it (``repo``: only those of that repository; None: all):
    ``fixed`` events of GIT ranges, commits of FIX references, else other references'
    commit links (never an INTRODUCED one)."""

    def ours(url: str) -> bool:
        return repo is None or names_repo(url, repo)

    found: list[str] = []
    for url, fixed in adv.git_ranges():
        if not url or ours(url):
            found += fixed
    fallback: list[str] = []
    for kind, url in adv.references():
        commit = commit_of_url(url)
        if commit is None or kind == "INTRODUCED" or not ours(url):
            continue
        (found if kind == "FIX" else fallback).append(commit[1])
    return list(dict.fromkeys(found or fallback))


def _resolve(source: Source, sha: str) -> str | None:
    try:
        return source.resolve(sha)
    except SourceError:
        return None


def _preference(adv: Advisory) -> tuple[int, int, str]:
    upper = adv.id.upper()
    rank = next((i for i, p in enumerate(_ID_PREFERENCE) if upper.startswith(p)), None)
    if rank is None:
        rank = len(_ID_PREFERENCE) + (1 if upper.startswith("CVE-") else 0)
    return (0 if adv.summary or adv.details else 1, rank, adv.id)


def _latest(advisories: list[Advisory]) -> Iterator[tuple[Advisory, list[Advisory]]]:
    """Each id once (the latest ``modified`` wins), with the copies it replaces."""
    by_id: dict[str, list[Advisory]] = {}
    for adv in advisories:
        by_id.setdefault(adv.id, []).append(adv)
    for copies in by_id.values():
        best = max(copies, key=lambda a: a.modified)  # ISO 8601: text order is time order
        yield best, [c for c in copies if c is not best]


# ------------------------------------------------------------------------------ candidates


def candidates(
    source: Source, options: CvePatchesOptions, slug: str, rev: str
) -> Iterator[Candidate | tuple[str, str]]:
    """Each (advisory, fix commit) as a candidate, newest advisory first; drops come back as
    ``(key, reason)``."""
    loaded = load_advisories(source, options, rev)
    repo = repository_key(source, options)
    for name, _why in loaded.malformed:
        yield f"osv:{name}", "malformed advisory file"
    by_commit: dict[str, list[Advisory]] = {}
    foreign = 0
    for adv, copies in _latest(loaded.advisories):
        for copy in copies:
            yield f"{copy.id}@{copy.origin}", "duplicate advisory"
        if adv.withdrawn:
            yield adv.id, "advisory withdrawn"
            continue
        if options.match_repo and not any(names_repo(u, repo) for u in adv.urls()):
            # Not about this repository; only worth a line when its fix is here (a fork).
            if any(_resolve(source, sha) for sha in fix_commits(adv, None)):
                yield adv.id, "advisory for another repository"
            else:
                foreign += 1
            continue
        named = fix_commits(adv, repo if options.match_repo else None)
        if not named:
            yield adv.id, "no fix commit named"
            continue
        resolved: list[str] = []
        for sha in named:
            full = _resolve(source, sha)
            if full is None:
                yield f"{adv.id}@{sha[:12]}", "fix commit not in history"
            elif full not in resolved:
                resolved.append(full)
                by_commit.setdefault(full, []).append(adv)
    if foreign:
        log.info("cve_patches: %d advisories name other repositories (not counted)", foreign)

    chosen: list[tuple[Advisory, str, list[Advisory]]] = []
    for sha, advs in by_commit.items():
        primary = min(advs, key=_preference)
        others = [a for a in advs if a is not primary]
        for other in others:
            yield f"{other.id}@{sha[:12]}", "duplicate advisory"
        chosen.append((primary, sha, others))
    per_advisory: dict[str, int] = {}
    for adv, _, _ in chosen:
        per_advisory[adv.id] = per_advisory.get(adv.id, 0) + 1
    chosen.sort(key=lambda c: (c[0].published, c[0].id, c[1]), reverse=True)
    for adv, sha, others in chosen:
        yield candidate_for(
            source, options, slug, adv, sha, others, several=per_advisory[adv.id] > 1
        )


def task_id_for(slug: str, advisory_id: str, sha: str, *, several: bool) -> str:
    """``<slug>-<advisory id, lower case>`` (``-<sha8>`` added when the advisory has several
    fix commits here)."""
    ident = re.sub(r"[^a-z0-9._-]+", "-", advisory_id.lower()).strip("-")
    return f"{slug}-{ident}" + (f"-{sha[:8]}" if several else "")


def candidate_for(
    source: Source,
    options: CvePatchesOptions,
    slug: str,
    adv: Advisory,
    sha: str,
    others: list[Advisory],
    *,
    several: bool = False,
) -> AdvisoryCandidate | tuple[str, str]:
    """The candidate of one fix commit of ``adv`` (cheap checks only), or ``(key, reason)``."""
    key = f"{adv.id}@{sha[:12]}"
    commit = next(iter(source.iter_commits(sha, limit=1)))
    if not commit.parents:
        return key, "root commit"
    ids = list(dict.fromkeys([adv.id, *adv.aliases, *(i for o in others for i in o.all_ids)]))
    title, body = advisory_text(adv.summary, adv.details, ids)
    if not title and not body:
        return key, "no advisory text"
    fields: dict[str, Any] = {
        "key": key,
        "task_id": task_id_for(slug, adv.id, sha, several=several),
        "kind": "advisory",
        "base": commit.parents[0],
        "head": sha,
        "title": title,
        "body": body,
        "reference": ADVISORY_PAGE.format(id=adv.id),
        "number": None,
        "created_at": commit.date,
    }
    cand, why = candidate_from_change(source, options=options, **fields)
    graded = cand is not None
    if cand is None and why in NO_TESTS and options.text_only:
        cand, why = _text_only(source, options, fields)
    if cand is None:
        return key, why or "dropped"
    meta = advisory_metadata(adv, others, sha, graded=graded)
    return AdvisoryCandidate(**dataclasses.asdict(cand), advisory=meta, graded=graded)


def _text_only(
    source: Source, options: CvePatchesOptions, fields: dict[str, Any]
) -> tuple[Candidate | None, str | None]:
    """A fix without a test change as a text-only candidate (the runtime size limits)."""
    patch = source.diff(fields["base"], fields["head"])
    split, why = split_sized(patch, parse_patch(patch), options)
    if split is None:
        return None, "release notes only" if why == "tests and release notes only" else why
    source_patch, test_patch = split
    return (
        Candidate(**fields, patch=patch, source_patch=source_patch, test_patch=test_patch),
        None,
    )


def advisory_metadata(
    adv: Advisory, others: list[Advisory], sha: str, *, graded: bool
) -> dict[str, Any]:
    """What ``[metadata.repo2env.cve_patches]`` records about the advisory (no empty values:
    TOML has no null)."""
    aliases = [i for o in [adv, *others] for i in o.all_ids if i != adv.id]
    cwe = [c for o in [adv, *others] for c in o.cwe_ids()]
    severity = adv.severity() or next((s for o in others if (s := o.severity())), {})
    meta: dict[str, Any] = {
        "advisory_id": adv.id,
        "aliases": list(dict.fromkeys(aliases)),
        "cve_ids": [i for i in [adv.id, *dict.fromkeys(aliases)] if i.upper().startswith("CVE-")],
        "cwe_ids": list(dict.fromkeys(cwe)),
        "severity": severity.get("rating", ""),
        "cvss": severity.get("cvss", []),
        "published": adv.published,
        "modified": adv.modified,
        "packages": adv.packages(),
        "fix_commit": sha,
        "advisory_source": adv.origin,
        "task_kind": "graded" if graded else "text_only",
    }
    return {k: v for k, v in meta.items() if v not in ("", [], None)}


# ------------------------------------------------------------------------------ harness


def stamp_advisory(task_dir: Path, cand: Candidate, pipeline: str) -> None:
    """Merge the advisory's facts into the staged task's pipeline subtable; the task is a
    ``security`` task (category and keyword)."""
    if not isinstance(cand, AdvisoryCandidate):
        return

    def change(config: TaskConfig) -> None:
        block = config.metadata.setdefault("repo2env", {})
        block.setdefault(pipeline, {}).update(cand.advisory)
        config.metadata["category"] = "security"
        for word in ("security", "advisory"):
            if word not in config.task.keywords:
                config.task.keywords.append(word)

    update_task_toml(task_dir, change)


def diff_options(options: CvePatchesOptions) -> PrDiffOptions:
    """The text-only tasks' options, from ``cve_patches``'s (no mutants: nothing is run)."""
    return PrDiffOptions.model_validate(
        {
            "max_files": options.max_source_files,
            "max_patch_lines": options.max_patch_lines,
            "verify_reruns": options.verify_reruns,
            "agent_timeout": options.agent_timeout,
            "verifier_timeout": options.verifier_timeout,
            "network": options.network,
            "verifier_network": options.verifier_network,
            "base_image": options.base_image,
            "min_instruction_words": options.min_instruction_words,
        }
    )


class CveHarness:
    """Sends each candidate to the graded (runtime) or the text-only (diff) harness; both
    stamp the advisory on the staged task before the gate (:func:`stamp_advisory`)."""

    def __init__(self, ctx: HarnessContext) -> None:
        stamp = functools.partial(stamp_advisory, pipeline=ctx.pipeline)
        self.graded = RuntimeHarness(ctx, annotate=stamp)
        self.text_only = DiffTaskHarness(
            dataclasses.replace(ctx, options=diff_options(ctx.options)), annotate=stamp
        )

    @property
    def rewrites(self) -> dict[str, dict[str, Any]]:
        """task id → what the LLM rewrite of its instruction came to (both harnesses)."""
        return {**self.graded.rewrites, **self.text_only.rewrites}

    def evaluate(self, cand: Candidate) -> Outcome:
        graded = getattr(cand, "graded", True)
        return (self.graded if graded else self.text_only).evaluate(cand)


class CvePatches:
    """OSV advisories of local clones, GitHub or GitLab repositories."""

    name = "cve_patches"
    version = "1"
    options_model = CvePatchesOptions
    sources = frozenset({"local", "github", "gitlab"})
    sources_note = ""
    llm_rewrite = True
    dedupe_changes = True

    def candidates(
        self, source: Source, options: CvePatchesOptions, slug: str, rev: str
    ) -> Iterator[Candidate | tuple[str, str]]:
        return candidates(source, options, slug, rev)

    def harness(self, ctx: HarnessContext) -> CveHarness:
        return CveHarness(ctx)


PIPELINE = CvePatches()
