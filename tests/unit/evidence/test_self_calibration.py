"""Issue 41: a corpus probes itself, stores its own calibration, rebuilds it byte for byte, and the answer row
names the calibration that decided; spaCy reads the answer's type on clear cases."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from hifirag_core.corpus.probes import (
    CALIBRATION_FILE,
    PROBES_FILE,
    calibrate_corpus,
    corpus_calibration,
    corpus_sections,
    page_sections,
)
from hifirag_core.corpus.store import open_corpus
from hifirag_core.evidence import entities
from hifirag_core.evidence import self_calibration as sc
from hifirag_core.evidence.answer_reading import answer_signals, expected_type
from hifirag_core.retrieval.embeddings import Embedder
from hifirag_core.types import SourceSection

PAGE = "https://h.example/tidewater"


def _section(heading: str, text: str) -> SourceSection:
    return SourceSection(f"s:{heading}", ("Lighthouse", heading), text)


def test_spacy_reads_the_answer_type_next_to_the_question_s_terms():
    # the model is the registry package's, loaded from its own folder
    assert entities.model_path().is_dir() and (entities.model_path() / "ner").is_dir()
    assert entities.holds("person", ["The tower was designed by Robert Stevenson in 1874."]) == [True]
    assert entities.holds("date", ["The tower was designed by Robert Stevenson in 1874."]) == [True]
    assert entities.holds("number", ["About 1 in 4,000 people are affected worldwide."]) == [True]
    assert entities.holds("place", ["The light stands at Port Ellen on Islay, in Scotland."]) == [True]
    assert entities.holds("date", ["The tower is painted white with a red band."]) == [False]
    assert expected_type("How long does the lamp burn?") == "duration"
    question = "When was the Tidewater lighthouse lamp replaced?"
    dated = answer_signals(question, [_section("History", "The Tidewater lighthouse lamp was replaced in 1921.")])
    # the same words, the date elsewhere: the window holding the terms holds no date
    undated = answer_signals(question, [
        _section("History", "The Tidewater lighthouse lamp was replaced by the keepers. It burns paraffin."),
        _section("Visits", "Visitors came in 1921. The café opened in May."),
    ])
    assert (dated.answer_type, dated.answer_window) == (1.0, 1.0)
    assert undated.window == 1.0 and undated.answer_type == 0.0 and undated.answer_window < 0.5
    untyped = answer_signals("Why is the Tidewater lighthouse painted white?",
                             [_section("Paint", "The Tidewater lighthouse is painted white to be seen by day.")])
    assert untyped.answer_window == untyped.window == 1.0


def test_a_sentence_becomes_a_question_without_the_entity_it_asks_for():
    assert sc.sentence_question("The Tidewater lighthouse was built by the harbour board in 1874.") == \
        "When The Tidewater lighthouse was built by the harbour board?"
    asked = sc.sentence_question("The tower has a spiral staircase with iron railings.")
    assert asked.startswith("What about ") and "staircase" in asked
    assert sc.sentence_question("It is white.") is None  # too few keywords to ask anything


def _pool() -> sc.SectionPool:
    text = ("# Tidewater lighthouse\n\n## History\n\nThe Tidewater lighthouse was built of granite in 1874 by the "
            "harbour board of Port Ellen.\n\n## Lamp\n\nThe Tidewater lighthouse lamp burns paraffin and turns "
            "twice a minute behind a glass lens.\n\n## How do visitors reach the lighthouse gallery?\n\nVisitors climb "
            "the 212 steps of the spiral stair to the gallery on summer weekends.")
    other = ("# Harbour\n\n## Quay\n\nThe harbour quay of Port Ellen was rebuilt after a storm; the lighthouse "
             "stands beyond it.\n\n## Ferries\n\nFerries leave the quay for the mainland every morning.")
    sections = page_sections(PAGE, "Tidewater lighthouse", text) + page_sections("https://h.example/harbour",
                                                                                 "Harbour", other)
    return sc.SectionPool(sections)


def test_probes_come_from_the_pages_and_are_asked_present_and_masked():
    pool = _pool()
    assert [s.heading_path for s in pool.by_page[PAGE]] == [
        ("Tidewater lighthouse", "History"), ("Tidewater lighthouse", "Lamp"),
        ("Tidewater lighthouse", "How do visitors reach the lighthouse gallery?")]
    probes = sc.make_probes(pool, 5)
    by_page = {p.url: p for p in probes}
    mine = by_page[PAGE]
    # a page with a question-like heading asks it
    assert (mine.source, mine.question) == ("heading", "How do visitors reach the lighthouse gallery?")
    assert mine.section_id == f"{PAGE}#s2"
    assert sc.make_probes(pool, 5, skip_pages=[PAGE]) == [p for p in probes if p.url != PAGE]

    def encode(texts):  # a stand-in for MiniLM: bag-of-letters vectors, normalized
        rows = np.array([[t.lower().count(c) for c in "abcdefghijklmnopqrstuvwxyz"] for t in texts], float)
        return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-9)

    items = sc.probe_items(pool, [mine], encode)
    kinds = {i.kind: i for i in items}
    assert set(kinds) == {"present", "section_masked", "page_masked"}
    assert kinds["present"].answerable and kinds["present"].kept_answer
    assert not kinds["section_masked"].kept_answer and not kinds["page_masked"].kept_answer
    assert not kinds["section_masked"].answerable and not kinds["page_masked"].answerable
    # the rest of the page stays when only the answer's section is masked: its topic is still there
    kept = {s.url for s in pool.kept(mine.question, {mine.section_id, *mine.carried_by})}
    assert PAGE in kept
    assert PAGE not in {s.url for s in pool.kept(mine.question, {s.section_id for s in pool.by_page[PAGE]})}
    assert kinds["section_masked"].signals["window"] < kinds["present"].signals["window"] == 1.0


def test_threshold_rules():
    p = np.array([0.9, 0.8, 0.7, 0.6, 0.3, 0.2, 0.1, 0.65])
    y = np.array([1, 1, 1, 1, 0, 0, 0, 0])
    assert sc.threshold_for(p, y, "answer@0.95") == 0.6  # every answerable one answered
    assert sc.threshold_for(p, y, "recall@0.80") == 0.66  # 4 of 4 unanswerable below: the lowest that gets 0.8
    assert sc.threshold_for(p, y, "youden") == 0.31  # 1.0 + 0.75 ties 0.75 + 1.0 at 0.66: the lower answers more
    with pytest.raises(ValueError, match="unknown threshold rule"):
        sc.threshold_for(p, y, "median")


def test_the_corpus_calibration_is_stored_named_and_rebuilt_byte_for_byte(data_root):
    corpus = open_corpus(data_root, "docs")
    assert corpus_calibration(corpus) is None  # built without probes: the shipped calibration decides
    assert {s.url for s in corpus_sections(corpus)} == set(corpus.pages())
    embedder = Embedder(data_root / "cache" / "vectors.sqlite")
    done = calibrate_corpus(corpus, embedder, "docs", 6)
    first = (corpus.root / CALIBRATION_FILE).read_bytes()
    probes = (corpus.root / PROBES_FILE).read_bytes()
    body = json.loads(first)
    assert body["corpus_fingerprint"] == corpus.fingerprint and body["probes"]["n"] == done.probes == 6
    assert body["probes"]["sha256"] == hashlib.sha256(probes).hexdigest()
    assert done.stored.name == f"corpus:docs@{hashlib.sha256(first).hexdigest()[:12]}"
    assert set(body["weights"]) == {"intercept", *sc.FEATURES}
    # present items score above masked ones on their own probes: the fit learnt which way the signals point
    scored: dict[str, list[float]] = {}
    for line in probes.decode().splitlines():
        for item in json.loads(line)["items"]:
            scored.setdefault(item["kind"], []).append(
                done.stored.calibration.probability(sc.EvidenceSignals(**item["signals"])))
    assert np.mean(scored["present"]) > np.mean(scored["section_masked"]) and \
        np.mean(scored["present"]) > np.mean(scored["page_masked"])
    assert sum(body["on_probes"]["abstained_page_masked"][:1]) >= 1  # the threshold abstains on some masked page
    calibrate_corpus(corpus, Embedder(data_root / "cache" / "vectors.sqlite"), "docs", 6)
    assert (corpus.root / CALIBRATION_FILE).read_bytes() == first
    assert (corpus.root / PROBES_FILE).read_bytes() == probes
    assert corpus_calibration(corpus).name == done.stored.name
    # a calibration of other pages (another fingerprint) is not used
    (corpus.root / CALIBRATION_FILE).write_bytes(first.replace(corpus.fingerprint.encode(), b"0" * 16))
    assert corpus_calibration(corpus) is None


def test_the_answer_row_names_the_calibration_that_decided(data_root, examples_file):
    from hifirag_core.config import build_config
    from hifirag_core.llm.examples import resolve_example_set
    from hifirag_core.pipeline.plan import RunContext
    from hifirag_core.pipeline.runner import run_trail
    from hifirag_core.pipeline.wiring import build_runtime
    from hifirag_core.questions import Question
    from hifirag_core.records import AnswerRecord

    corpus = open_corpus(data_root, "docs")
    stored = calibrate_corpus(corpus, Embedder(data_root / "cache" / "vectors.sqlite"), "docs", 6).stored
    question = Question("T1", "How does Tidewater decide which files to transfer?", None, 1)

    def answer(**overrides) -> AnswerRecord:
        cfg = build_config(overrides={"answerability": {"show": True, **overrides}})
        ctx = RunContext("calibration-row", str(data_root), cfg, resolve_example_set(str(examples_file), "custom"))
        trail = run_trail(question, build_runtime(ctx))
        (row,) = [r for r in trail["answer"].records if isinstance(r, AnswerRecord)]
        return row

    own = answer()
    assert own.answerability_calibration == stored.name
    assert own.answerability_score == pytest.approx(
        stored.calibration.probability(sc.EvidenceSignals(**json.loads(own.answerability_signals))), abs=1e-4)
    shipped = answer(calibration="shipped")
    assert shipped.answerability_calibration == "shipped"
    assert shipped.answerability_signals == own.answerability_signals  # the same evidence, other weights
