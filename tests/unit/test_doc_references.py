"""Every reference the code makes to a document resolves inside the repository.

The source (``graph/ nodes/ tools/ memory/ evals/``) cites the design as "DESIGN §N.M" (also
"DESIGN.md §N", "docs/DESIGN.md §N, §M"), the source article as "seed §N.M" (mapped to the
design's sections by the table of docs/DESIGN.md §12; a chapter "seed §4" counts when the
table maps some "§4.x"), the failure kinds as "K1".."K11"
(docs/DESIGN.md §9) and files by their repository path. A bare "§N" belongs to the nearest
document named before it ("seed §4.2 retrieval, §6.2 prompt order" cites seed §6.2); "RFC 8414
§3.3" and the like are outside documents and not checked. No reference to an issue tracker:
the repository does not hold one. Pure: reads files, nothing else.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "DESIGN.md"
SOURCE_DIRS = ("graph", "nodes", "tools", "memory", "base", "evals")
#: The documents whose file paths must exist (the README's layout, DESIGN's claims and index).
DOCUMENTS = ("README.md", "docs/DESIGN.md", "evals/README.md")
#: Generated outputs a docstring may name before they exist.
GENERATED = ("evals/out/",)

_SECTION = re.compile(r"§\s?(\d+(?:\.\d+)?)")
#: Documents a "§" can belong to, the nearest one before it wins.
_OWNER = re.compile(r"DESIGN|\bseed\b|\bRFC\s?\d+|\bSEP-\d+|\bPEP\s?\d+")
_KIND = re.compile(r"\bK(\d+)\b")
_ISSUE = re.compile(r"\bissues?\s?#\s?\d+|/issues/\d+|\bgh-\d+\b", re.IGNORECASE)
_PATH = re.compile(
    r"\b(?:graph|nodes|tools|memory|base|evals|scripts|docs|tests)/[A-Za-z0-9_/.-]+\.(?:py|md|sh|json|toml)\b"
)
#: A repository path in a document: not the tail of a longer path (``<data_dir>/memory/x.json``).
_DOC_PATH = re.compile(
    r"(?<![\w./<>-])(?:\.ci/run|(?:graph|nodes|tools|memory|base|evals|scripts|docs|tests|deploy)/"
    r"[A-Za-z0-9_/.-]+\.(?:py|md|sh|json|jsonl|toml|yml|yaml))\b"
)


def _design_text() -> str:
    return DESIGN.read_text(encoding="utf-8")


def _headings(text: str) -> set[str]:
    return set(re.findall(r"^#{2,4}\s+§(\d+(?:\.\d+)?)\b", text, re.MULTILINE))


def _seed_table(text: str) -> dict[str, list[str]]:
    """``seed section → design sections`` from the table of the "Source document" section."""
    start = text.index("\n## §12")
    rows = re.findall(r"^\|\s*§(\d+(?:\.\d+)?)\s*\|[^|]*\|([^|]*)\|", text[start:], re.MULTILINE)
    return {seed: _SECTION.findall(here) for seed, here in rows}


def _kinds(text: str) -> set[str]:
    start = text.index("\n## §9")
    end = text.index("\n## ", start + 1)
    return set(re.findall(r"^\|\s*K(\d+)\s*\|", text[start:end], re.MULTILINE))


def _sources() -> list[Path]:
    return sorted(p for d in SOURCE_DIRS for p in (ROOT / d).rglob("*.py"))


def _citations_in(text: str) -> list[tuple[int, str, str]]:
    """``(line, owner, section)`` of every "§" in ``text`` whose owner is DESIGN or seed."""
    found = []
    for match in _SECTION.finditer(text):
        owners = list(_OWNER.finditer(text[max(0, match.start() - 160) : match.start()]))
        owner = owners[-1].group(0) if owners else ""
        if owner in ("DESIGN", "seed"):
            found.append((text.count("\n", 0, match.start()) + 1, owner, match.group(1)))
    return found


def _citations() -> list[tuple[str, str, str]]:
    """``(where, owner, section)`` of every DESIGN / seed "§" in the source."""
    return [
        (f"{path.relative_to(ROOT)}:{line}", owner, section)
        for path in _sources()
        for line, owner, section in _citations_in(path.read_text(encoding="utf-8"))
    ]


def _with_lines(pattern: re.Pattern[str]) -> list[tuple[str, str]]:
    hits = []
    for path in _sources():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            hits += [(f"{path.relative_to(ROOT)}:{number}", m.group(0)) for m in pattern.finditer(line)]
    return hits


def test_the_design_document_has_sections_a_seed_table_and_kinds():
    text = _design_text()
    assert {"1.2", "2.4", "7.2", "12"} <= _headings(text)
    assert _seed_table(text) and _kinds(text)


def test_a_bare_section_sign_belongs_to_the_document_named_before_it():
    text = 'x (seed §4.2 retrieval, §6.2 order; RFC 8414 §3.3)\n"""Doc (docs/DESIGN.md §1.2,\n§1.7; DESIGN.md §10)'
    assert _citations_in(text) == [
        (1, "seed", "4.2"),
        (1, "seed", "6.2"),
        (2, "DESIGN", "1.2"),
        (3, "DESIGN", "1.7"),
        (3, "DESIGN", "10"),
    ]


def test_every_design_citation_names_a_heading_of_docs_design_md():
    headings = _headings(_design_text())
    citations = [c for c in _citations() if c[1] == "DESIGN"]
    assert citations  # the scan works
    missing = [f"{where}: DESIGN §{section}" for where, _, section in citations if section not in headings]
    assert not missing, "no such heading in docs/DESIGN.md:\n" + "\n".join(missing)


def test_every_seed_citation_is_mapped_by_the_design_source_table():
    text = _design_text()
    table, headings = _seed_table(text), _headings(text)
    citations = [c for c in _citations() if c[1] == "seed"]
    assert citations
    chapters = {seed.split(".")[0] for seed in table}  # "seed §4" cites the chapter of §4.1..§4.3
    unmapped = [
        f"{where}: seed §{section}"
        for where, _, section in citations
        if section not in table and section not in chapters
    ]
    assert not unmapped, "not in the table of docs/DESIGN.md §12:\n" + "\n".join(unmapped)
    dangling = [
        f"seed §{seed} → §{here}" for seed, targets in table.items() for here in targets if here not in headings
    ]
    assert not dangling, "the §12 table points at missing headings:\n" + "\n".join(dangling)


def test_every_failure_kind_cited_is_in_the_design_invariants():
    kinds = _kinds(_design_text())
    unknown = [f"{where}: {kind}" for where, kind in _with_lines(_KIND) if kind[1:] not in kinds]
    assert not unknown, "no such kind in docs/DESIGN.md §9:\n" + "\n".join(unknown)


def test_no_reference_to_an_issue_tracker():
    hits = [f"{where}: {text}" for where, text in _with_lines(_ISSUE)]
    assert not hits, "the repository holds no issues; say what the reference meant instead:\n" + "\n".join(hits)


@pytest.mark.parametrize("root", SOURCE_DIRS)
def test_every_repository_path_cited_exists(root):
    stale = [
        f"{where}: {ref}"
        for where, ref in _with_lines(_PATH)
        if where.startswith(root + "/") and not ref.startswith(GENERATED) and not (ROOT / ref).exists()
    ]
    assert not stale, "cited file not in the repository (moved or removed?):\n" + "\n".join(stale)


def _document_paths(text: str) -> list[tuple[int, str]]:
    return [(n, m.group(0)) for n, line in enumerate(text.splitlines(), 1) for m in _DOC_PATH.finditer(line)]


def test_the_document_path_pattern():
    text = "`graph/context.py: Context`, [x](evals/README.md)\n<data_dir>/memory/a.json, .ci/run, deploy/w/c.yml"
    assert _document_paths(text) == [
        (1, "graph/context.py"),
        (1, "evals/README.md"),
        (2, ".ci/run"),
        (2, "deploy/w/c.yml"),
    ]


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_file_path_a_document_names_exists(document):
    """README's layout, DESIGN's "the file that implements it" and its "where is …" index name
    files by their repository path; each must exist (a moved or split module updates them)."""
    paths = _document_paths((ROOT / document).read_text(encoding="utf-8"))
    assert paths  # the scan works
    stale = [
        f"{document}:{line}: {ref}"
        for line, ref in paths
        if not ref.startswith(GENERATED) and not (ROOT / ref).exists()
    ]
    assert not stale, "named in the document, not in the repository:\n" + "\n".join(stale)


def test_the_design_has_a_where_is_index_of_twenty_behaviours():
    text = _design_text()
    start = text.index("\n## §13 Where is")
    rows = [r for r in text[start:].splitlines() if r.startswith("| ") and not r.startswith("| where is")]
    assert len(rows) >= 20
    assert all(_document_paths(row) for row in rows), "each behaviour names its files"
