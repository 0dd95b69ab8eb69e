"""Reading OSV advisories: local exports (a record, a folder, osv.dev's ``all.zip``) and the
OSV query API, and what ``cve_patches`` needs from a record.

Only what the OSV schema says is read: ``id``, ``aliases``, ``related``, ``withdrawn``,
``published``, ``modified``, ``summary``, ``details``, ``severity[]``, ``affected[]`` (its
``package`` and ``ranges[]`` of ``type: "GIT"`` with their ``repo`` and ``events[].fixed``),
``references[]`` and ``database_specific`` (GitHub's ``cwe_ids`` and ``severity``). Fields of
the wrong type are ignored, never fatal; a file that is not JSON, or holds no record with an
``id``, is *malformed* (reported by name, the rest still read).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from repogym.sources import SourceError

log = logging.getLogger(__name__)

DEFAULT_API = "https://api.osv.dev"
API_ENV = "REPOGYM_OSV_URL"
MAX_RECORD_BYTES = 16 * 1024 * 1024
"""A record (a file, a zip member, an API page) larger than this is malformed, not read."""
MAX_PAGES = 100
_HEX = re.compile(r"^[0-9a-f]{7,40}$")
# Commit pages of the usual hosts: GitHub (also a PR's commit), GitLab (with or without /-/),
# Bitbucket (commits), cgit/gitweb (commit/?id=).
_COMMIT_URL = (
    re.compile(r"^(?P<repo>.+?)/pull/\d+/commits/(?P<sha>[0-9a-fA-F]{7,40})(?![0-9a-fA-F])"),
    re.compile(r"^(?P<repo>.+?)(?:/-)?/commits?/(?P<sha>[0-9a-fA-F]{7,40})(?![0-9a-fA-F])"),
    re.compile(r"^(?P<repo>.+?)/commit/?\?(?:.*&)?id=(?P<sha>[0-9a-fA-F]{7,40})(?![0-9a-fA-F])"),
)


@dataclass
class Advisory:
    """One OSV record, as far as ``cve_patches`` reads it."""

    id: str
    origin: str
    """Where it came from: a file name (``all.zip:GHSA-….json``) or ``api``."""
    raw: dict[str, Any] = field(repr=False)
    aliases: list[str] = field(default_factory=list)
    related: list[str] = field(default_factory=list)
    summary: str = ""
    details: str = ""
    published: str = ""
    modified: str = ""
    withdrawn: str = ""

    @property
    def all_ids(self) -> list[str]:
        """Its id and aliases."""
        return [self.id, *self.aliases]

    def git_ranges(self) -> Iterator[tuple[str, list[str]]]:
        """``(repo URL, fixed commits)`` of each ``GIT`` range."""
        for affected in _dicts(self.raw.get("affected")):
            for rng in _dicts(affected.get("ranges")):
                if str(rng.get("type", "")).upper() != "GIT":
                    continue
                fixed = [
                    str(e["fixed"]).strip().lower()
                    for e in _dicts(rng.get("events"))
                    if isinstance(e.get("fixed"), str) and _HEX.match(e["fixed"].strip().lower())
                ]
                yield str(rng.get("repo") or ""), fixed

    def references(self) -> Iterator[tuple[str, str]]:
        """``(type, url)`` of each reference (type upper-cased)."""
        for ref in _dicts(self.raw.get("references")):
            url = ref.get("url")
            if isinstance(url, str) and url.strip():
                yield str(ref.get("type") or "WEB").upper(), url.strip()

    def urls(self) -> Iterator[str]:
        """Every URL the record names a repository by: range repos, references, GIT packages."""
        for repo, _ in self.git_ranges():
            if repo:
                yield repo
        for _, url in self.references():
            yield url
        for affected in _dicts(self.raw.get("affected")):
            pkg = affected.get("package")
            if isinstance(pkg, dict) and str(pkg.get("ecosystem", "")).upper() == "GIT":
                name = pkg.get("name")
                if isinstance(name, str):
                    yield name

    def packages(self) -> list[str]:
        """``ecosystem/name`` of each affected package."""
        out: list[str] = []
        for affected in _dicts(self.raw.get("affected")):
            pkg = affected.get("package")
            if isinstance(pkg, dict) and pkg.get("name"):
                item = f"{pkg.get('ecosystem') or '?'}/{pkg['name']}"
                if item not in out:
                    out.append(item)
        return out

    def cwe_ids(self) -> list[str]:
        """CWE ids of ``database_specific.cwe_ids`` (GitHub), also per affected package."""
        found: list[str] = []
        blocks = [self.raw.get("database_specific")]
        blocks += [a.get("database_specific") for a in _dicts(self.raw.get("affected"))]
        for block in blocks:
            if not isinstance(block, dict):
                continue
            ids = block.get("cwe_ids")
            for cwe in ids if isinstance(ids, list) else []:
                if isinstance(cwe, str) and re.fullmatch(r"CWE-\d+", cwe.strip(), re.I):
                    norm = cwe.strip().upper()
                    if norm not in found:
                        found.append(norm)
        return found

    def severity(self) -> dict[str, Any]:
        """``rating`` (the database's word, else from the highest CVSS score) and ``cvss``
        (``[{type, vector, score?}]``, scores computed for CVSS v3)."""
        cvss: list[dict[str, Any]] = []
        for item in _dicts(self.raw.get("severity")):
            kind, vector = str(item.get("type") or ""), item.get("score")
            if not isinstance(vector, str) or not vector.strip():
                continue
            entry: dict[str, Any] = {"type": kind, "vector": vector.strip()}
            score = cvss3_score(vector) if kind.upper() == "CVSS_V3" else None
            if score is None:
                score = _number(vector)
            if score is not None:
                entry["score"] = score
            cvss.append(entry)
        out: dict[str, Any] = {}
        block = self.raw.get("database_specific")
        rating = block.get("severity") if isinstance(block, dict) else None
        scores = [c["score"] for c in cvss if "score" in c]
        if isinstance(rating, str) and rating.strip():
            out["rating"] = rating.strip().upper()
        elif scores:
            out["rating"] = cvss_rating(max(scores))
        if cvss:
            out["cvss"] = cvss
        return out


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _strings(value: Any) -> list[str]:
    if not isinstance(value, list):
        return []
    return [v.strip() for v in value if isinstance(v, str) and v.strip()]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and 0 <= value <= 10 else None


def parse_record(data: Any, origin: str) -> Advisory | None:
    """An :class:`Advisory` of one decoded record, or None when it is not one (no ``id``)."""
    if not isinstance(data, dict):
        return None
    ident = data.get("id")
    if not isinstance(ident, str) or not ident.strip():
        return None
    return Advisory(
        id=ident.strip(),
        origin=origin,
        raw=data,
        aliases=[a for a in _strings(data.get("aliases")) if a != ident.strip()],
        related=_strings(data.get("related")),
        summary=_text(data.get("summary")).strip(),
        details=_text(data.get("details")).strip(),
        published=_text(data.get("published")).strip(),
        modified=_text(data.get("modified")).strip(),
        withdrawn=_text(data.get("withdrawn")).strip(),
    )


# ------------------------------------------------------------------------------ CVSS


_V3 = {
    "AV": {"N": 0.85, "A": 0.62, "L": 0.55, "P": 0.2},
    "AC": {"L": 0.77, "H": 0.44},
    "UI": {"N": 0.85, "R": 0.62},
    "C": {"H": 0.56, "L": 0.22, "N": 0.0},
}


def _roundup(value: float) -> float:
    """CVSS v3.1's Roundup: the smallest one-decimal number ≥ ``value``."""
    whole = round(value * 100000)
    return whole / 100000.0 if whole % 10000 == 0 else (math.floor(whole / 10000) + 1) / 10.0


def cvss3_score(vector: str) -> float | None:
    """The CVSS v3.x base score of ``vector`` (``CVSS:3.1/AV:N/…``), None when incomplete."""
    parts = dict(p.split(":", 1) for p in vector.strip().split("/")[1:] if ":" in p)
    try:
        scope_changed = {"U": False, "C": True}[parts["S"]]
        pr = {"N": 0.85, "L": 0.68 if scope_changed else 0.62, "H": 0.5 if scope_changed else 0.27}
        av, ac = _V3["AV"][parts["AV"]], _V3["AC"][parts["AC"]]
        ui, priv = _V3["UI"][parts["UI"]], pr[parts["PR"]]
        c, i, a = (_V3["C"][parts[k]] for k in ("C", "I", "A"))
    except KeyError:
        return None
    iss = 1 - (1 - c) * (1 - i) * (1 - a)
    changed = 7.52 * (iss - 0.029) - 3.25 * (iss - 0.02) ** 15
    impact = changed if scope_changed else 6.42 * iss
    if impact <= 0:
        return 0.0
    exploitability = 8.22 * av * ac * priv * ui
    total = 1.08 * (impact + exploitability) if scope_changed else impact + exploitability
    return _roundup(min(total, 10.0))


def cvss_rating(score: float) -> str:
    """CVSS's qualitative rating of a base score."""
    if score == 0:
        return "NONE"
    if score < 4:
        return "LOW"
    if score < 7:
        return "MEDIUM"
    return "HIGH" if score < 9 else "CRITICAL"


# ------------------------------------------------------------------------------ URLs


def repo_key(url: str) -> str:
    """A repository URL in one spelling: ``host/path`` lower-cased, without scheme, user,
    port, ``.git`` or trailing slash (``git@github.com:O/N.git`` → ``github.com/o/n``)."""
    text = url.strip()
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", text):
        parts = urlsplit(text)
        host, path = (parts.hostname or ""), parts.path
    else:
        m = re.match(r"^(?:[^@/]+@)?([^:/]+):(?!/)(.*)$", text)
        host, path = (m.group(1), m.group(2)) if m else ("", text)
    path = path.strip("/").removesuffix(".git").strip("/")
    return f"{host.lower()}/{path.lower()}".strip("/")


def commit_of_url(url: str) -> tuple[str, str] | None:
    """``(repo key, sha)`` of a commit page URL, or None."""
    for pattern in _COMMIT_URL:
        m = pattern.match(url.strip())
        if m:
            return repo_key(m.group("repo")), m.group("sha").lower()
    return None


def names_repo(url: str, repo: str) -> bool:
    """Whether ``url`` is the repository ``repo`` (a :func:`repo_key`) or a page under it."""
    key = repo_key(url)
    return bool(repo) and (key == repo or key.startswith(repo + "/"))


# ------------------------------------------------------------------------------ exports


@dataclass
class Loaded:
    """What an export held: its records, and the files that were not records."""

    advisories: list[Advisory] = field(default_factory=list)
    malformed: list[tuple[str, str]] = field(default_factory=list)
    """``(file name, why)``."""


def _decode(data: bytes, name: str) -> Any:
    """JSON of ``data``; invalid UTF-8 is replaced (with a warning), not fatal."""
    try:
        return json.loads(data)
    except UnicodeDecodeError:
        log.warning("cve_patches: %s is not UTF-8; invalid bytes replaced", name)
        return json.loads(data.decode("utf-8", "replace"))


def _add(data: bytes, name: str, loaded: Loaded) -> None:
    """Read one file's records into ``loaded`` (a record, a list, or ``{"vulns": [...]}``)."""
    if len(data) > MAX_RECORD_BYTES:
        return _malformed(loaded, name, f"larger than {MAX_RECORD_BYTES} bytes")
    try:
        value = _decode(data, name)
    except json.JSONDecodeError as exc:
        return _malformed(loaded, name, f"not valid JSON (line {exc.lineno}: {exc.msg})")
    except (RecursionError, ValueError) as exc:
        return _malformed(loaded, name, f"not valid JSON ({exc})")
    if isinstance(value, dict) and "id" not in value and isinstance(value.get("vulns"), list):
        value = value["vulns"]
    items = value if isinstance(value, list) else [value]
    found = [a for a in (parse_record(v, name) for v in items) if a is not None]
    if not found:
        return _malformed(loaded, name, "no OSV record (an object with an 'id')")
    loaded.advisories.extend(found)


def _malformed(loaded: Loaded, name: str, why: str) -> None:
    log.warning("cve_patches: skipping %s: %s", name, why)
    loaded.malformed.append((name, why))


def check_export(path: Path) -> str | None:
    """Why ``path`` cannot be an OSV export (one line), or None."""
    if not path.exists():
        return f"{path}: no such file or folder"
    if path.is_dir():
        return None if os.access(path, os.R_OK | os.X_OK) else f"{path}: folder not readable"
    if not os.access(path, os.R_OK):
        return f"{path}: not readable"
    if path.suffix.lower() == ".zip":
        return None if zipfile.is_zipfile(path) else f"{path}: not a readable zip archive"
    if path.suffix.lower() != ".json":
        return f"{path}: not an OSV export (a .json record, a folder of records or a .zip)"
    return None


def load_export(path: Path) -> Loaded:
    """Every record of a local export: one ``.json`` file, a folder searched recursively for
    ``*.json``, or a ``.zip`` of records; SourceError when the export itself is unreadable."""
    why = check_export(path)
    if why:
        raise SourceError(why)
    loaded = Loaded()
    try:
        if path.is_dir():
            for file in sorted(path.rglob("*.json")):
                if file.is_file():
                    _add(file.read_bytes(), str(file.relative_to(path)), loaded)
        elif path.suffix.lower() == ".zip":
            _load_zip(path, loaded)
        else:
            _add(path.read_bytes(), path.name, loaded)
    except OSError as exc:
        raise SourceError(f"{path}: cannot read the OSV export: {exc.strerror or exc}") from None
    return loaded


def _load_zip(path: Path, loaded: Loaded) -> None:
    try:
        with zipfile.ZipFile(path) as archive:
            for info in sorted(archive.infolist(), key=lambda i: i.filename):
                if info.is_dir() or not info.filename.lower().endswith(".json"):
                    continue
                name = f"{path.name}:{info.filename}"
                if info.file_size > MAX_RECORD_BYTES:
                    _malformed(loaded, name, f"larger than {MAX_RECORD_BYTES} bytes")
                    continue
                try:
                    data = archive.read(info)
                except (zipfile.BadZipFile, OSError, ValueError) as exc:
                    _malformed(loaded, name, f"unreadable member ({exc})")
                    continue
                _add(data, name, loaded)
    except zipfile.BadZipFile as exc:
        raise SourceError(f"{path}: not a readable zip archive ({exc})") from None


# ------------------------------------------------------------------------------ the API


def api_base(option: str | None) -> str:
    """The OSV API base URL: the option, else ``$REPOGYM_OSV_URL``, else api.osv.dev."""
    base = (option or os.environ.get(API_ENV, "") or DEFAULT_API).strip().rstrip("/")
    return base.removesuffix("/v1")


def query_api(base: str, queries: list[dict[str, Any]], *, timeout: float = 30.0) -> Loaded:
    """Records the OSV API returns for each query (``POST {base}/v1/query``, following
    ``next_page_token``), each id once; SourceError when the API cannot be read."""
    from repogym import http

    loaded = Loaded()
    seen: set[str] = set()
    url = f"{base}/v1/query"
    policy = http.RetryPolicy(retries=3, backoff_s=0.5, max_wait_s=30.0)
    with http.client(timeout=timeout) as client:
        for query in queries:
            token: str | None = None
            for _ in range(MAX_PAGES):
                body = dict(query, **({"page_token": token} if token else {}))
                page = _post(client, url, body, policy)
                for item in page.get("vulns") or []:
                    adv = parse_record(item, "api")
                    if adv is not None and adv.id not in seen:
                        seen.add(adv.id)
                        loaded.advisories.append(adv)
                token = page.get("next_page_token") or None
                if not isinstance(token, str):
                    break
    return loaded


def _post(client: Any, url: str, body: dict[str, Any], policy: Any) -> dict[str, Any]:
    import httpx

    from repogym import http

    try:
        response = http.send_with_retries(lambda: client.post(url, json=body), policy=policy)
    except httpx.HTTPError as exc:
        raise SourceError(f"OSV API {url}: {http.reason(exc)}") from None
    if not response.is_success:
        raise SourceError(f"OSV API {url}: HTTP {response.status_code}")
    if len(response.content) > MAX_RECORD_BYTES * 4:
        raise SourceError(f"OSV API {url}: answer too large")
    try:
        page = response.json()
    except ValueError:
        raise SourceError(f"OSV API {url}: the answer is not JSON") from None
    if not isinstance(page, dict):
        raise SourceError(f"OSV API {url}: unexpected answer")
    return page
