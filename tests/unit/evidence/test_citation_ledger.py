"""The evidence locator and the `citation_ledger` view on rows the pipeline computed (no browser, no hand-written
evidence rows): issue 38, item 10."""

from __future__ import annotations

from pathlib import Path

from hifirag_core.evidence.attribution import locate_evidence
from hifirag_core.questions import Question
from hifirag_core.types import SourceDoc, SourceSection


def test_locate_evidence_finds_the_section_and_sentence_that_support_a_claim(tmp_path: Path):
    from hifirag_core.retrieval.embeddings import Embedder

    embedder = Embedder(tmp_path / "vectors.sqlite")
    source = SourceDoc(
        1,
        "https://a.example/sync",
        "Sync",
        "",
        (
            SourceSection(
                "install",
                ("Sync", "Installing"),
                "Install Tidewater with pip install tidewater. It needs Python 3.9 or newer to run.",
            ),
            SourceSection(
                "bandwidth",
                ("Sync", "Limiting bandwidth"),
                "A sync uses the whole link by default. "
                "Pass --max-rate 2M to cap a sync at two megabytes per second.",
            ),
            SourceSection(
                "conflicts", ("Sync", "Conflicts"), "When both sides changed a file, the newer copy wins."
            ),
        ),
    )
    found = locate_evidence("Limit the bandwidth of a sync with --max-rate.", source, embedder)
    assert found is not None and found.section_id == "bandwidth"
    assert found.sentence == "Pass --max-rate 2M to cap a sync at two megabytes per second."
    assert found.score is not None and 0 < found.score <= 1
    other = locate_evidence("Which copy wins when a file changed on both sides?", source, embedder)
    assert other.section_id == "conflicts"
    assert locate_evidence("anything", SourceDoc(2, "https://b.example", "", "", ()), embedder) is None


def test_the_citation_ledger_of_a_computed_answer_points_at_its_sections_and_snapshots(
    data_root, examples_file
):
    from hifirag_core.config import build_config
    from hifirag_core.llm.examples import resolve_example_set
    from hifirag_core.pipeline.persistence import write_output
    from hifirag_core.pipeline.plan import RunContext
    from hifirag_core.pipeline.runner import run_question
    from hifirag_core.pipeline.wiring import build_runtime
    from hifirag_core.store.warehouse import Warehouse

    cfg = build_config()
    rt = build_runtime(
        RunContext("ledger", str(data_root), cfg, resolve_example_set(str(examples_file), "custom"))
    )
    outputs = run_question(
        Question("q1", "How do I limit the bandwidth Tidewater uses during a sync?", None, 1), rt
    )
    warehouse = Warehouse(data_root)
    for output in outputs.values():
        write_output(warehouse, "ledger", "q1", output)

    (answer,) = outputs["answer"].records
    assert answer.cited_urls
    sentences = [r for r in outputs["citations"].records if type(r).__name__ == "AnswerSentenceRecord"]
    sections = {r.section_id: r for r in outputs["sections"].records}
    pages = {p.url: p for p in outputs["fetch"].records if p.status == "ok"}
    cited = [s for s in sentences if s.urls]
    assert cited
    for s in cited:  # the locator's section belongs to the cited page, and its sentence is in that section
        for url, section_id, evidence in zip(s.urls, s.section_ids, s.evidence, strict=True):
            assert section_id in sections and sections[section_id].url == url
            assert evidence and " ".join(evidence.split()) in " ".join(sections[section_id].text.split())

    rows = warehouse.query(
        "SELECT sentence_index, url, marker, section_id, heading_path, supporting_sentence, support, support_method,"
        " content_sha256, final_url FROM citation_ledger WHERE run_id = 'ledger' AND question_id = 'q1'"
        " ORDER BY sentence_index, source_rank"
    )
    ledger = [dict(zip(rows.columns, row, strict=True)) for row in rows.rows]
    assert {r["sentence_index"] for r in ledger} == {s.sentence_index for s in sentences}
    linked = [r for r in ledger if r["url"] is not None]
    assert len(linked) == sum(len(s.urls) for s in sentences)
    by_sentence = {s.sentence_index: s for s in sentences}
    for r in linked:
        s = by_sentence[r["sentence_index"]]
        k = s.urls.index(r["url"])
        assert r["marker"] == answer.cited_urls.index(r["url"]) + 1  # the answer's [k]
        assert r["section_id"] == s.section_ids[k] and r["supporting_sentence"] == s.evidence[k]
        assert r["heading_path"] == list(sections[s.section_ids[k]].heading_path)
        assert r["support_method"] == "offline check" and r["support"] is not None
        assert r["content_sha256"] == pages[r["url"]].content_sha256 and r["content_sha256"] in rt.blobs
        assert r["final_url"] == (pages[r["url"]].final_url or r["url"])
