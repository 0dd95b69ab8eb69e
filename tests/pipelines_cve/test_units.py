"""cve_patches without a sandbox: reading OSV records and exports, matching them to the
repository, the candidates and drop reasons, the advisory text, options and the API client."""

from __future__ import annotations

import json
import zipfile
from collections import Counter
from pathlib import Path

import pytest
from pydantic import ValidationError

from repogym.pipelines import cve_patches
from repogym.pipelines._instructions.advisory import advisory_text, clean_markdown
from repogym.pipelines._mined.osv import (
    commit_of_url,
    cvss3_score,
    load_export,
    names_repo,
    parse_record,
    query_api,
    repo_key,
)
from repogym.pipelines.cve_patches import AdvisoryCandidate, candidates, detect_package
from repogym.sources import LocalGitSource, SourceError
from repogym.spec import CvePatchesOptions
from tests.pipelines_cve.history import (
    COMMIT_MESSAGE_ONLY,
    REAL_ID,
    git_range,
    real_record,
    synthetic_records,
    write_folder,
)
from tests.pipelines_cve.osv_stub import OsvStub, serve
from tests.sources.conftest import GitRepo

SLUG = "pallets__jinja"


def _opts(**kw: object) -> CvePatchesOptions:
    return CvePatchesOptions.model_validate({k: str(v) for k, v in kw.items()})


def _walk(repo: Path, **kw: object) -> tuple[list[AdvisoryCandidate], list[tuple[str, str]]]:
    cands, drops = [], []
    for item in candidates(LocalGitSource(repo), _opts(**kw), SLUG, "HEAD"):
        if isinstance(item, tuple):
            drops.append(item)
        else:
            assert isinstance(item, AdvisoryCandidate)
            cands.append(item)
    return cands, drops


# ------------------------------------------------------------------------------ records


def test_real_record_fields(jinja_repo) -> None:
    _, shas = jinja_repo
    adv = parse_record(real_record(shas["xmlattr"]), "f.json")
    assert adv is not None and adv.id == REAL_ID and adv.aliases == ["CVE-2024-22195"]
    assert adv.cwe_ids() == ["CWE-79"]
    assert adv.severity() == {
        "rating": "MODERATE",
        "cvss": [
            {
                "type": "CVSS_V3",
                "vector": "CVSS:3.1/AV:N/AC:L/PR:L/UI:R/S:C/C:L/I:L/A:N",
                "score": 5.4,
            }
        ],
    }
    assert adv.packages() == ["PyPI/jinja2"]
    assert parse_record({"summary": "no id"}, "x") is None
    assert parse_record(["not", "a", "record"], "x") is None


@pytest.mark.parametrize(
    ("vector", "score"),
    [
        ("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H", 9.8),
        ("CVSS:3.1/AV:N/AC:L/PR:N/UI:R/S:C/C:L/I:L/A:N", 6.1),
        ("CVSS:3.0/AV:L/AC:H/PR:H/UI:R/S:U/C:L/I:N/A:N", 1.8),
        ("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:N/I:N/A:N", 0.0),
        ("CVSS:3.1/AV:N/AC:L", None),
    ],
)
def test_cvss3_base_score(vector: str, score: float | None) -> None:
    assert cvss3_score(vector) == score


def test_urls_and_commit_links() -> None:
    key = repo_key("https://github.com/Pallets/Jinja.git")
    assert key == repo_key("git@github.com:pallets/jinja.git") == "github.com/pallets/jinja"
    assert repo_key("ssh://git@github.com:22/pallets/jinja/") == key
    assert names_repo("https://github.com/pallets/jinja/security/advisories/X", key)
    assert not names_repo("https://github.com/pallets/jinja-ext", key)
    sha = "a" * 40
    for url in (
        f"https://github.com/pallets/jinja/commit/{sha}",
        f"https://github.com/pallets/jinja/commit/{sha}.patch",
        f"https://github.com/pallets/jinja/pull/12/commits/{sha}",
    ):
        assert commit_of_url(url) == (key, sha), url
    assert commit_of_url(f"https://gitlab.com/g/p/-/commit/{sha[:9]}") == (
        "gitlab.com/g/p",
        sha[:9],
    )
    assert commit_of_url(f"https://git.example.org/repo.git/commit/?id={sha}") == (
        "git.example.org/repo",
        sha,
    )
    assert commit_of_url("https://github.com/pallets/jinja/releases/tag/3.1.3") is None


# ------------------------------------------------------------------------------ exports


def test_folder_zip_and_single_file_exports(jinja_repo, osv_folder, tmp_path) -> None:
    folder = load_export(osv_folder)
    ids = sorted(a.id for a in folder.advisories)
    assert len(ids) == 9 and "SYN-2024-0008" not in ids
    assert folder.malformed == [("broken.json", "not valid JSON (line 1: Expecting value)")]
    latin = next(a for a in folder.advisories if a.id == "SYN-2024-0009")
    assert latin.summary == "Caf\ufffd filter"  # the bad byte replaced, the record kept

    archive = tmp_path / "all.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in sorted(osv_folder.rglob("*.json")):
            zf.write(path, path.relative_to(osv_folder).as_posix())
    zipped = load_export(archive)
    assert sorted(a.id for a in zipped.advisories) == ids
    assert zipped.malformed[0][0] == "all.zip:broken.json"

    single = load_export(osv_folder / f"{REAL_ID}.json")
    assert [a.id for a in single.advisories] == [REAL_ID]
    (tmp_path / "list.json").write_text(json.dumps({"vulns": [real_record("b" * 40)]}))
    assert [a.id for a in load_export(tmp_path / "list.json").advisories] == [REAL_ID]
    (tmp_path / "empty.json").write_text("{}")
    assert load_export(tmp_path / "empty.json").malformed[0][1].startswith("no OSV record")


def test_malformed_file_warns_with_its_name(osv_folder, caplog) -> None:
    with caplog.at_level("WARNING"):
        load_export(osv_folder)
    lines = [r.getMessage() for r in caplog.records]
    assert "cve_patches: skipping broken.json: not valid JSON (line 1: Expecting value)" in lines
    assert "cve_patches: latin1.json is not UTF-8; invalid bytes replaced" in lines
    assert all("\n" not in line for line in lines)


# ------------------------------------------------------------------------------ candidates


def test_synthetic_folder_candidates_and_drops(jinja_repo, osv_folder) -> None:
    repo, shas = jinja_repo
    cands, drops = _walk(repo, osv=osv_folder)
    assert Counter(reason for _, reason in drops) == {
        "malformed advisory file": 1,
        "advisory withdrawn": 1,
        "fix commit not in history": 2,
        "advisory for another repository": 1,
        "duplicate advisory": 1,
        "no advisory text": 1,
    }
    assert ("osv:broken.json", "malformed advisory file") in drops
    assert (f"PYSEC-2024-9@{shas['xmlattr'][:12]}", "duplicate advisory") in drops
    by_id = {c.advisory["advisory_id"]: c for c in cands}
    assert sorted(by_id) == [REAL_ID, "SYN-2024-0002"]

    real = by_id[REAL_ID]
    assert real.graded and real.kind == "advisory"
    assert real.key == f"{REAL_ID}@{shas['xmlattr'][:12]}"
    assert real.task_id == f"{SLUG}-ghsa-h5c8-rqwp-cp95"
    assert (real.base, real.head) == (shas["init"], shas["xmlattr"])
    assert real.title.startswith("Jinja vulnerable to HTML attribute injection")
    assert COMMIT_MESSAGE_ONLY not in real.title + real.body
    assert real.reference == f"https://osv.dev/vulnerability/{REAL_ID}"
    assert real.advisory["aliases"] == ["CVE-2024-22195", "PYSEC-2024-9"]
    assert real.advisory["cve_ids"] == ["CVE-2024-22195"]
    assert real.advisory["cwe_ids"] == ["CWE-79"] and real.advisory["severity"] == "MODERATE"
    assert real.advisory["published"] == "2024-01-11T15:20:48Z"
    assert real.advisory["task_kind"] == "graded"

    text = by_id["SYN-2024-0002"]
    assert not text.graded and text.advisory["task_kind"] == "text_only"
    assert text.head == shas["urlize"] and text.test_patch == ""
    assert "http" not in text.body and "SYN-2024-0002" not in text.body
    assert "upgrade" not in text.body.lower() and "References" not in text.body
    assert text.advisory["severity"] == "MEDIUM" and text.advisory["cvss"][0]["score"] == 4.3


def test_text_only_off_and_match_repo_off(jinja_repo, osv_folder) -> None:
    repo, _ = jinja_repo
    cands, drops = _walk(repo, osv=osv_folder, text_only="false")
    assert [c.advisory["advisory_id"] for c in cands] == [REAL_ID]
    assert any(k.startswith("SYN-2024-0002@") and r == "no test change" for k, r in drops)
    # Every record, whatever repository it names: the fork's one joins its commit's group.
    cands, drops = _walk(repo, osv=osv_folder, match_repo="false")
    assert "advisory for another repository" not in {r for _, r in drops}
    assert sorted(c.advisory["advisory_id"] for c in cands) == [REAL_ID, "SYN-2024-0002"]
    assert Counter(r for _, r in drops)["fix commit not in history"] == 3


def test_same_id_twice_keeps_the_latest(jinja_repo, tmp_path) -> None:
    repo, shas = jinja_repo
    old = real_record(shas["xmlattr"])
    new = dict(old, modified="2025-01-01T00:00:00Z", summary="Newer summary of the issue")
    write_folder(tmp_path / "osv", {"a/x.json": old, "b/x.json": new})
    cands, drops = _walk(repo, osv=tmp_path / "osv")
    assert [c.title for c in cands] == ["Newer summary of the issue"]
    assert drops == [(f"{REAL_ID}@a/x.json", "duplicate advisory")]


def test_several_fix_commits_get_suffixed_ids(jinja_repo, tmp_path) -> None:
    repo, shas = jinja_repo
    record = real_record(shas["xmlattr"])
    record["references"].append(
        {"type": "WEB", "url": f"https://github.com/pallets/jinja/commit/{shas['urlize']}"}
    )
    (tmp_path / "r.json").write_text(json.dumps(record))
    cands, _ = _walk(repo, osv=tmp_path / "r.json")
    assert sorted(c.task_id for c in cands) == sorted(
        f"{SLUG}-ghsa-h5c8-rqwp-cp95-{shas[k][:8]}" for k in ("xmlattr", "urlize")
    )


def test_no_fix_commit_and_root_commit(jinja_repo, tmp_path) -> None:
    repo, shas = jinja_repo
    bare = real_record(shas["xmlattr"])
    bare["references"] = [r for r in bare["references"] if "/commit/" not in r["url"]]
    root = dict(real_record(shas["init"]), id="SYN-ROOT")
    write_folder(tmp_path / "osv", {"bare.json": bare, "root.json": root})
    cands, drops = _walk(repo, osv=tmp_path / "osv")
    assert cands == []
    assert sorted(drops) == [
        (REAL_ID, "no fix commit named"),
        (f"SYN-ROOT@{shas['init'][:12]}", "root commit"),
    ]


def test_repository_without_origin(make_repo, tmp_path) -> None:
    repo: GitRepo = make_repo("plain")
    repo.write("a.py", "x = 1\n")
    repo.commit("init")
    (tmp_path / "r.json").write_text(json.dumps(real_record("c" * 40)))
    with pytest.raises(SourceError, match="repo_url=URL .* match_repo=false"):
        _walk(repo.path, osv=tmp_path / "r.json")
    cands, drops = _walk(
        repo.path, osv=tmp_path / "r.json", repo_url="https://github.com/pallets/jinja"
    )
    assert cands == [] and drops == [(f"{REAL_ID}@{'c' * 12}", "fix commit not in history")]
    with pytest.raises(SourceError, match="needs --opt osv=PATH"):
        list(candidates(LocalGitSource(repo.path), CvePatchesOptions(), SLUG, "HEAD"))


# ------------------------------------------------------------------------------ text


def test_advisory_markdown_is_cleaned() -> None:
    details = (
        "### Impact\n\nA [crafted](https://example.org/x) key lets attackers inject "
        "attributes ([CVE-2024-12345](https://nvd.nist.gov/x)). See GHSA-h5c8-rqwp-cp95.\n"
        "![screenshot](https://img/x.png)<br>\n"
        "Reported at <https://example.org/report> and www.example.org/more today.\n\n"
        "**Workarounds**\n\nDo not pass user input as keys.\n\n"
        "### Patches\nPatched in 3.1.3; upgrade now.\n\n"
        "### Details\n```python\nxmlattr({'a b': 1})\n```\n"
        "[1]: https://example.org/ref\n"
    )
    title, body = advisory_text("", details, ["GHSA-h5c8-rqwp-cp95"])
    assert title == "A crafted key lets attackers inject attributes"
    assert "://" not in body and "www." not in body and "GHSA" not in body and "CVE" not in body
    assert "Workarounds" not in body and "user input as keys" not in body
    assert "Patched" not in body and "upgrade" not in body
    assert "```python\nxmlattr({'a b': 1})\n```" in body and "<br>" not in body
    assert clean_markdown("### Credits\n\nThanks to Ada.\n") == ""
    assert advisory_text("", "", []) == ("", "")


# ------------------------------------------------------------------------------ options


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("/no/such/export", "no such file or folder"),
        ("{tmp}/notes.txt", "not an OSV export"),
        ("{tmp}/bad.zip", "not a zip archive"),
    ],
)
def test_bad_osv_paths(value: str, message: str, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "bad.zip").write_text("not a zip")
    with pytest.raises(ValidationError, match=message):
        CvePatchesOptions.model_validate({"osv": value.format(tmp=tmp_path)})


def test_options_defaults_and_coercion(tmp_path: Path) -> None:
    opts = CvePatchesOptions.model_validate({"osv": "API", "match_repo": "false"})
    assert opts.osv == "api" and opts.match_repo is False and opts.text_only
    with pytest.raises(ValidationError, match="not an http"):
        CvePatchesOptions.model_validate({"osv": "api", "osv_url": "ftp://x"})
    with pytest.raises(ValidationError, match="extra"):
        CvePatchesOptions.model_validate({"osv_path": "x"})
    diff = cve_patches.diff_options(opts)
    assert diff.max_files == opts.max_source_files and not hasattr(diff, "mutants")


# ------------------------------------------------------------------------------ the API


def test_api_by_package_with_pages(jinja_repo, monkeypatch) -> None:
    repo, shas = jinja_repo
    records = [real_record(shas["xmlattr"]), synthetic_records(shas)["SYN-2024-0002.json"]]
    records[1]["affected"] = [{"package": {"ecosystem": "PyPI", "name": "jinjalite"}}]
    records[0]["affected"][0]["package"]["name"] = "jinjalite"
    with serve(OsvStub(records, page_size=1)) as stub:
        monkeypatch.setenv("REPOGYM_OSV_URL", stub.url + "/v1/")
        cands, drops = _walk(repo, osv="api")
    assert drops == []
    assert sorted(c.advisory["advisory_id"] for c in cands) == [REAL_ID, "SYN-2024-0002"]
    assert all(c.advisory["advisory_source"] == "api" for c in cands)
    bodies = [r["body"] for r in stub.requests]
    assert bodies == [
        {"package": {"name": "jinjalite", "ecosystem": "PyPI"}},
        {"package": {"name": "jinjalite", "ecosystem": "PyPI"}, "page_token": "1"},
    ]


def test_api_by_commit_and_errors(jinja_repo) -> None:
    repo, shas = jinja_repo
    record = dict(real_record(shas["xmlattr"]), affected=[git_range(shas["xmlattr"])])
    with serve(OsvStub([record])) as stub:
        loaded = query_api(stub.url, [{"commit": shas["xmlattr"]}, {"commit": shas["init"]}])
        assert [a.id for a in loaded.advisories] == [REAL_ID]
        cands, _ = _walk(repo, osv="api", osv_url=stub.url, package="nothing-here", api_commits=2)
        assert [c.advisory["advisory_id"] for c in cands] == [REAL_ID]
        assert [r["body"] for r in stub.requests[2:]][1:] == [
            {"commit": shas["readme"]},
            {"commit": shas["xmlattr"]},
        ]
        stub.status = 400
        with pytest.raises(SourceError, match=r"OSV API .*/v1/query: HTTP 400"):
            query_api(stub.url, [{"commit": shas["init"]}])


def test_package_detection(make_repo) -> None:
    repo: GitRepo = make_repo("pkgs")
    repo.write("package.json", json.dumps({"name": "left-pad"}))
    sha = repo.commit("npm")
    assert detect_package(LocalGitSource(repo.path), sha) == ("left-pad", "npm")
    repo.write("setup.cfg", "[metadata]\nname = oldstyle\n")
    sha = repo.commit("setup.cfg")
    assert detect_package(LocalGitSource(repo.path), sha) == ("oldstyle", "PyPI")
    repo.write("pyproject.toml", "not toml = = =")
    sha = repo.commit("broken")
    assert detect_package(LocalGitSource(repo.path), sha) is None


def test_metadata_keys_are_not_withheld_by_the_explorer() -> None:
    from repogym.explorer.withhold import is_answer_key

    adv = parse_record(real_record("a" * 40), "x.json")
    assert adv is not None
    meta = cve_patches.advisory_metadata(adv, [], "a" * 40, graded=True)
    assert set(meta) >= {"advisory_id", "aliases", "cwe_ids", "severity", "cvss", "published"}
    assert not is_answer_key("cve_patches")
    assert not [k for k in meta if is_answer_key(k)]
