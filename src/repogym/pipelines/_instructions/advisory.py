"""An advisory's ``summary`` and ``details`` as the text of a task: what is wrong, never how
it was fixed or where the fix is published.

The Markdown is flattened to what an agent needs: links keep their text and lose their target,
images, link definitions, bare URLs and formatting tags go, and so do the sections that tell
how the issue was patched or worked around, who reported it, or where to read more (``Patches``,
``Workarounds``, ``References``, ``Credits``, …), sentences that point at fixed versions
("upgrade to 3.1.3", "this has been patched in …"), and advisory identifiers (CVE, GHSA, PYSEC,
…), which lead straight to the fix. The instruction builders then apply their usual cleaning and
leak checks (``text``): SHAs, references, lines and runs of words of the gold patch.
"""

from __future__ import annotations

import re

_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_BOLD_HEADING = re.compile(r"^\s*(?:\*\*|__)(.+?)(?:\*\*|__)\s*:?\s*$")
_DROP_SECTIONS = re.compile(
    r"^(?:patch(?:es|ed versions?)?|fix(?:es|ed versions?)?|workarounds?|mitigations?|remediation"
    r"|solutions?|recommendations?|references?|resources|links?|credits?|acknowledge?ments?"
    r"|thanks|timeline|disclosure(?: timeline)?|for more information|more information"
    r"|further reading|see also)\b",
    re.IGNORECASE,
)
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]\n]+)\]\((?:[^()\s]|\([^()\s]*\))*(?:\s+\"[^\"]*\")?\)")
_REF_LINK = re.compile(r"\[([^\]\n]+)\]\[[^\]\n]*\]")
_LINK_DEF = re.compile(r"^\s{0,3}\[[^\]\n]+\]:\s*\S+.*$", re.MULTILINE)
_AUTOLINK = re.compile(r"<(?:https?|ftp|mailto):[^>\s]*>", re.IGNORECASE)
_URL = re.compile(r"(?:https?|ftp)://[^\s)>\]]+|\bwww\.[^\s)>\]]+", re.IGNORECASE)
_FORMAT_TAGS = re.compile(
    r"</?(?:a|b|i|u|em|strong|br|p|div|span|sub|sup|details|summary|small|big|img|hr|center"
    r"|font|ins|del|kbd|mark)(?:\s[^<>]*)?/?>",
    re.IGNORECASE,
)
ADVISORY_ID = re.compile(
    r"\b(?:CVE-\d{4}-\d{4,}|GHSA(?:-[23456789cfghjmpqrvwx]{4}){3}|PYSEC-\d{4}-\d+"
    r"|(?:RUSTSEC|GO|OSV|SNYK|GMS|BIT|MAL|DSA|USN|RHSA|DLA|ALSA|ALBA|MGASA|OESA|PSF)-[\w.:-]*\d)\b",
    re.IGNORECASE,
)
_FIXED_VERSION = re.compile(
    r"\b(?:upgrad\w*|updat\w+ to|patched|fixed in|has been fixed|have been fixed|was fixed"
    r"|were fixed|is fixed|released? (?:in|as)|versions? \S+ (?:and later|or later|onwards?)"
    r"|no (?:known )?workarounds?)\b",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z`*(\"'])")
_FENCE = re.compile(r"^\s*(```|~~~)")


def _drop_sections(text: str) -> str:
    """Remove the sections whose heading names a patch, workaround, reference or credit."""
    out: list[str] = []
    skip_level: int | None = None
    fenced = False
    for line in text.split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
        heading = None if fenced else _HEADING.match(line)
        bold = None if fenced or heading else _BOLD_HEADING.match(line)
        if heading or bold:
            level = len(heading.group(1)) if heading else 6
            title = (heading.group(2) if heading else bold.group(1) if bold else "").strip(" :")
            if skip_level is not None and level <= skip_level:
                skip_level = None
            if skip_level is None and _DROP_SECTIONS.match(title):
                skip_level = level
                continue
        if skip_level is None:
            out.append(line)
    return "\n".join(out)


def _drop_version_sentences(text: str) -> str:
    """Remove sentences about fixed versions and upgrades (outside code fences)."""
    out: list[str] = []
    fenced = False
    for line in text.split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
            out.append(line)
            continue
        if fenced or not _FIXED_VERSION.search(line):
            out.append(line)
            continue
        kept = [s for s in _SENTENCE.split(line) if not _FIXED_VERSION.search(s)]
        if kept:  # a line left without a sentence goes entirely
            out.append(" ".join(kept))
    return "\n".join(out)


def _drop_ids(text: str, ids: list[str]) -> str:
    """Remove advisory ids (the record's own and any CVE/GHSA/… id); a sentence left with
    fewer than 4 words ("See  for details.") goes too."""
    own = "|".join(re.escape(i) for i in sorted(set(ids), key=len, reverse=True) if i)
    pattern = re.compile(
        rf"(?<![\w-])(?:{own})(?![\w-])|{ADVISORY_ID.pattern}" if own else ADVISORY_ID.pattern,
        re.IGNORECASE,
    )
    out: list[str] = []
    for line in text.split("\n"):
        if not pattern.search(line):
            out.append(line)
            continue
        kept = []
        for sentence in _SENTENCE.split(line):
            cleaned = pattern.sub("", sentence)
            if cleaned != sentence and len(re.findall(r"\w+", cleaned)) < 4:
                continue
            kept.append(cleaned)
        if kept:
            out.append(" ".join(kept))
    return "\n".join(out)


def clean_markdown(text: str, ids: list[str] | None = None) -> str:
    """Advisory Markdown as task text (see the module docstring); ``ids`` are the record's
    own identifiers, removed wherever they appear."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _drop_sections(text)
    text = _LINK_DEF.sub("", text)
    text = _IMAGE.sub("", text)
    text = _LINK.sub(lambda m: m.group(1), text)
    text = _REF_LINK.sub(lambda m: m.group(1), text)
    text = _AUTOLINK.sub("", text)
    text = _URL.sub("", text)
    text = _FORMAT_TAGS.sub("", text)
    text = _drop_ids(text, ids or [])
    text = _drop_version_sentences(text)
    # Brackets and punctuation the removals left empty: "()", "( , )", "see ."
    text = re.sub(r"\(\s*(?:[,;/]\s*)*\)|\[\s*(?:[,;/]\s*)*\]", "", text)
    text = re.sub(r"[ \t]+([.,;:!?])(?=\s|$)", r"\1", text)
    text = re.sub(r"[ \t]{2,}", " ", text)
    text = re.sub(r"[ \t]+\n", "\n", text)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip()


def advisory_text(summary: str, details: str, ids: list[str]) -> tuple[str, str]:
    """``(title, body)`` of an advisory for the instruction builders: the cleaned summary
    (else the first sentence of the details) and the cleaned details."""
    body = clean_markdown(details, ids)
    title = " ".join(clean_markdown(summary, ids).split())
    if not title and body:
        first = next((ln for ln in body.split("\n") if ln.strip() and not _HEADING.match(ln)), "")
        title = _SENTENCE.split(first.strip())[0].strip(" *_#")[:120]
    title = title.rstrip(" .:;,")
    if body and " ".join(body.split()).strip(" .") == title:
        body = ""
    return title, body
