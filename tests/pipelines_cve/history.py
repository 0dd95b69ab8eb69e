"""A small Jinja-like repository built in code, and OSV advisories about it.

The repository's origin is ``https://github.com/pallets/jinja`` so the real advisory's URLs
match it. Its history: the initial package, the ``xmlattr`` fix *with* a test (the real
advisory GHSA-h5c8-rqwp-cp95), a ``urlize`` fix *without* a test (a synthetic advisory: a
text-only task), a README commit and a commit that only touches docs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.pipelines.shapes import PYPROJECT
from tests.sources.conftest import GitRepo

FIXTURES = Path(__file__).parent / "fixtures"
REAL_ID = "GHSA-h5c8-rqwp-cp95"
ORIGIN = "https://github.com/pallets/jinja.git"
COMMIT_MESSAGE_ONLY = "Harden attribute rendering against odd keys"
"""A phrase only the fix's commit message has: it must never reach an instruction."""

FILTERS_V1 = '''\
"""Template filters."""

from html import escape


def xmlattr(d, autospace=True):
    """Render a dict as XML/HTML attributes: ``key="value"`` pairs, values escaped.

    Items whose value is None are left out.
    """
    items = []
    for key, value in d.items():
        if value is None:
            continue
        items.append(f'{key}="{escape(str(value), quote=True)}"')
    text = " ".join(items)
    if autospace and text:
        text = " " + text
    return text
'''

FILTERS_FIXED = FILTERS_V1.replace(
    "from html import escape\n",
    'import re\nfrom html import escape\n\n_BAD_KEY = re.compile(r"\\s", flags=re.ASCII)\n',
).replace(
    "        if value is None:\n            continue\n",
    "        if value is None:\n            continue\n"
    "        if _BAD_KEY.search(key) is not None:\n"
    '            raise ValueError(f"invalid attribute name: {key!r}")\n',
)

UTILS_V1 = '''\
"""Helpers."""


def urlize_one(url):
    """An HTML link to ``url``."""
    return '<a href="' + url + '">' + url + "</a>"
'''
UTILS_FIXED = UTILS_V1.replace(
    """'<a href="' + url + '">'""",
    """'<a href="' + url + '" rel="noopener noreferrer">'""",
)

TESTS_V1 = """\
from jinjalite.filters import xmlattr


def test_xmlattr_renders_pairs():
    assert xmlattr({"id": "a", "class": "b"}) == ' id="a" class="b"'


def test_xmlattr_escapes_values():
    assert xmlattr({"title": '<"x">'}) == ' title="&lt;&quot;x&quot;&gt;"'


def test_xmlattr_skips_none():
    assert xmlattr({"a": None, "b": "1"}, autospace=False) == 'b="1"'
"""
TESTS_FIXED = TESTS_V1.replace(
    "from jinjalite.filters import xmlattr\n",
    "import pytest\n\nfrom jinjalite.filters import xmlattr\n",
) + (
    "\n\ndef test_xmlattr_rejects_keys_with_spaces():\n"
    "    with pytest.raises(ValueError):\n"
    '        xmlattr({"class onclick=alert(1)": "x"})\n'
)


def build_repo(repo: GitRepo) -> dict[str, str]:
    """The history described in the module docstring; returns shas by name."""
    shas: dict[str, str] = {}
    repo.write("pyproject.toml", PYPROJECT.replace('name = "shapes"', 'name = "jinjalite"'))
    repo.write("src/jinjalite/__init__.py", "")
    repo.write("src/jinjalite/filters.py", FILTERS_V1)
    repo.write("src/jinjalite/utils.py", UTILS_V1)
    repo.write("tests/test_filters.py", TESTS_V1)
    shas["init"] = repo.commit("Initial template helpers")
    repo.write("src/jinjalite/filters.py", FILTERS_FIXED)
    repo.write("tests/test_filters.py", TESTS_FIXED)
    shas["xmlattr"] = repo.commit(
        f"{COMMIT_MESSAGE_ONLY}\n\nThe key check uses _BAD_KEY before any pair is rendered."
    )
    repo.write("src/jinjalite/utils.py", UTILS_FIXED)
    shas["urlize"] = repo.commit("Add rel to generated links")
    repo.write("README.md", "# jinjalite\n\nA few template helpers.\n")
    shas["readme"] = repo.commit("Describe the package")
    repo.git("remote", "add", "origin", ORIGIN)
    return shas


def real_record(fix_sha: str) -> dict[str, Any]:
    """The real advisory's record, its fix commit replaced by ``fix_sha`` (see the fixture's
    note)."""
    text = (FIXTURES / f"{REAL_ID}.json").read_text()
    return json.loads(text.replace("{FIX_SHA}", fix_sha))


def _record(ident: str, **fields: Any) -> dict[str, Any]:
    record = {
        "schema_version": "1.4.0",
        "id": ident,
        "modified": "2024-03-01T00:00:00Z",
        "published": "2024-02-01T00:00:00Z",
    }
    record.update(fields)
    return record


def git_range(sha: str, repo: str = "https://github.com/pallets/jinja") -> dict[str, Any]:
    return {
        "package": {"ecosystem": "GIT", "name": repo},
        "ranges": [{"type": "GIT", "repo": repo, "events": [{"introduced": "0"}, {"fixed": sha}]}],
    }


URLIZE_DETAILS = """\
### Impact

Links produced by `urlize_one` open the target page with a reference back to the page
that rendered them ([reverse tabnabbing](https://owasp.org/www-community/attacks/Reverse_Tabnabbing)):
the linked page can navigate the original tab elsewhere. Generated links must tell the
browser not to pass the opener or the referrer. See SYN-2024-0002 for details.

### Patches

This has been fixed in version 1.0.1. Users should upgrade.

### References

- https://github.com/pallets/jinja/commit/{sha}
"""


def synthetic_records(shas: dict[str, str]) -> dict[str, Any]:
    """File name → content (a record, or raw bytes) of the synthetic advisory folder."""
    jinja = "https://github.com/pallets/jinja"
    return {
        # The real advisory: a fix with a test (graded runtime task).
        f"{REAL_ID}.json": real_record(shas["xmlattr"]),
        # A second record of the same fix (PyPI's), naming the first: one candidate.
        "pysec/PYSEC-2024-9.json": _record(
            "PYSEC-2024-9",
            aliases=["CVE-2024-22195", REAL_ID],
            details="The xmlattr filter accepts keys containing spaces.",
            affected=[git_range(shas["xmlattr"])],
            references=[{"type": "FIX", "url": f"{jinja}/commit/{shas['xmlattr'][:10]}"}],
        ),
        # A fix without a test (text-only task), found through a FIX reference.
        "SYN-2024-0002.json": _record(
            "SYN-2024-0002",
            aliases=["CVE-2099-0002"],
            summary="urlize links allow reverse tabnabbing",
            details=URLIZE_DETAILS.format(sha=shas["urlize"]),
            severity=[{"type": "CVSS_V3", "score": "CVSS:3.1/AV:N/AC:L/PR:N/UI:R/S:U/C:N/I:L/A:N"}],
            references=[
                {"type": "FIX", "url": f"{jinja}/commit/{shas['urlize']}"},
                {"type": "INTRODUCED", "url": f"{jinja}/commit/{shas['init']}"},
            ],
            database_specific={"cwe_ids": ["CWE-1022"]},
        ),
        # Withdrawn.
        "SYN-2024-0003.json": _record(
            "SYN-2024-0003",
            withdrawn="2024-03-02T00:00:00Z",
            summary="Withdrawn: not a vulnerability",
            details="The reported behaviour is intended.",
            affected=[git_range(shas["urlize"])],
        ),
        # Its fix commit is not in this history.
        "SYN-2024-0004.json": _record(
            "SYN-2024-0004",
            summary="Template cache poisoning",
            details="Cached templates can be replaced by another user of the same cache.",
            affected=[git_range("f" * 40)],
        ),
        # About another repository, whose fix commit this history also has (a fork's).
        "SYN-2024-0005.json": _record(
            "SYN-2024-0005",
            summary="Fork issue",
            details="An issue of a fork that shares this history.",
            affected=[git_range(shas["urlize"], repo="https://github.com/someone/else")],
        ),
        # About another repository entirely: not counted.
        "other/SYN-2024-0006.json": _record(
            "SYN-2024-0006",
            summary="Unrelated",
            details="Some other project's issue.",
            affected=[git_range("e" * 40, repo="https://gitlab.com/other/project")],
        ),
        # About this repository, without any text.
        "SYN-2024-0007.json": _record("SYN-2024-0007", affected=[git_range(shas["readme"])]),
        # Not JSON.
        "broken.json": b'{"id": "SYN-2024-0008", "summary": ',
        # Latin-1, not UTF-8: read with the bad byte replaced (its fix is not here).
        "latin1.json": json.dumps(
            _record(
                "SYN-2024-0009",
                summary="Caf\u00e9 filter",
                details="x",
                affected=[git_range("d" * 40)],
            ),
            ensure_ascii=False,
        ).encode("latin-1"),
    }


def write_folder(folder: Path, records: dict[str, Any]) -> Path:
    for name, content in records.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        data = content if isinstance(content, bytes) else json.dumps(content, indent=1).encode()
        path.write_bytes(data)
    return folder
