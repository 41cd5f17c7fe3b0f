"""The answerability transfer set: the health site, page groups, halves by group, and a run through the fakes."""

from __future__ import annotations

import gzip
import json
import os
import random
from pathlib import Path

import pytest

from hifirag_core.evaluation import transfer_set
from hifirag_core.evaluation.transfer_set import (
    build_transfer_set,
    health_pages,
    page_groups,
    page_html,
    render_health_site,
    split_halves,
)
from hifirag_core.resources import shared_data_dir

GARD = "https://rarediseases.info.nih.gov/gard"
SHARED_ANSWER = ("This condition is inherited in an autosomal dominant pattern, which means one copy of the altered "
                 "gene in each cell is sufficient to cause the disorder.")


def _qa(qid: str, qtype: str, question: str, answer: str) -> dict:
    return {"qid": qid, "qtype": qtype, "question": question, "answer": answer}


def _docs() -> list[dict]:
    """A small MedQuAD: two sources for one focus, two foci sharing an answer, a page listed twice."""
    return [
        {"doc_id": "1", "url": f"{GARD}/1/marfan-syndrome", "focus": "Marfan syndrome", "source": "GARD",
         "collection": "2_GARD_QA", "qa": [
            _qa("1-1", "symptoms", "What are the symptoms of Marfan syndrome ?",
                "Marfan syndrome affects the connective tissue: long arms and fingers, a curved spine, and "
                "problems of the aorta and the lens of the eye are its usual signs."),
            _qa("1-2", "inheritance", "Is Marfan syndrome inherited ?", SHARED_ANSWER)]},
        {"doc_id": "2", "url": "https://medlineplus.gov/marfansyndrome.html", "focus": "marfan  Syndrome",
         "source": "MPlusHealthTopics", "collection": "4_MPlus_Health_Topics_QA", "qa": [
             _qa("2-1", "treatment", "What are the treatments for Marfan syndrome ?",
                 "Marfan syndrome has no cure; beta blockers slow the widening of the aorta and surgery repairs "
                 "it, and regular eye and heart checks follow the patient for life.")]},
        {"doc_id": "3", "url": f"{GARD}/3/loeys-dietz-syndrome", "focus": "Loeys-Dietz syndrome", "source": "GARD",
         "collection": "2_GARD_QA", "qa": [_qa("3-1", "inheritance", "Is Loeys-Dietz syndrome inherited ?", SHARED_ANSWER)]},
        {"doc_id": "4", "url": f"{GARD}/4/scurvy", "focus": "Scurvy", "source": "GARD",
         "collection": "2_GARD_QA", "qa": [
            _qa("4-1", "causes", "What causes scurvy ?",
                "Scurvy is caused by a lack of vitamin C in the diet for three months or more; sailors on long "
                "voyages without fresh fruit were its classic victims, and bleeding gums its first sign.")]},
        {"doc_id": "5", "url": f"{GARD}/5/gout#overview", "focus": "Gout", "source": "GARD",
         "collection": "2_GARD_QA", "qa": [
            _qa("5-1", "symptoms", "What are the symptoms of gout ?",
                "The symptoms of gout are sudden attacks of severe pain, swelling and redness in a joint, most "
                "often the big toe, when crystals of uric acid form in the joint lining.")]},
        {"doc_id": "6", "url": f"{GARD}/5/gout#treatment", "focus": "Gout", "source": "GARD",
         "collection": "2_GARD_QA", "qa": [
            _qa("6-1", "treatment", "What are the treatments for gout ?",
                "Gout attacks are treated with anti-inflammatory drugs such as colchicine; allopurinol lowers the "
                "uric acid in the blood so that new crystals do not form in the joints.")]},
        # another collection reuses the qid "1-1" for another question
        {"doc_id": "7", "url": f"{GARD}/7/rickets", "focus": "Rickets", "source": "GHR", "collection": "3_GHR_QA", "qa": [
            _qa("1-1", "causes", "What causes rickets ?",
                "The causes of rickets, a softening of the bones in children, are too little vitamin D, calcium "
                "or phosphate; sunlight on the skin makes the vitamin D the bones need.")]},
    ]


def _shared(tmp_path: Path) -> Path:
    """A shared-data folder with the small MedQuAD, two FAQ questions and two MMU-RAGent questions."""
    shared = tmp_path / "shared"
    (shared / "health").mkdir(parents=True)
    with gzip.open(shared / transfer_set.MEDQUAD, "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(d) + "\n" for d in _docs())
    (shared / "docs_faq").mkdir()
    faq = [{"id": f"python3.11-doc:faq/{page}#q{i}", "corpus": "python3.11-doc", "page": f"faq/{page}",
            "anchor": f"q{i}", "heading_level": 3, "question": f"Question {i}?", "answer": f"Answer {i}.",
            "answer_words": 2} for i, page in enumerate(["general.html", "programming.html"])]
    (shared / "docs_faq" / "faq_qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in faq))
    (shared / "mmu_ragent").mkdir()
    mmu = [{"iid": f"V_{i}", "query": q, "reference": None} for i, q in enumerate(["How do you make paella?",
                                                                                    "Who painted the Night Watch?"])]
    (shared / "mmu_ragent" / "t2t_val.jsonl").write_text("".join(json.dumps(r) + "\n" for r in mmu))
    return shared


SPEC = {"answerable": {"2:5-1": f"{GARD}/5/gout", "3:1-1": f"{GARD}/7/rickets"},
        "unanswerable": {"2:1-1": f"{GARD}/1/marfan-syndrome", "2:4-1": f"{GARD}/4/scurvy"},
        "left_out_pages": [f"{GARD}/1/marfan-syndrome", f"{GARD}/3/loeys-dietz-syndrome", f"{GARD}/4/scurvy",
                           "https://medlineplus.gov/marfansyndrome.html"],
        "mmu_lines": 2, "mmu_dropped": {"V_1": "its reference is carried by a health page"}}


def test_a_page_per_url_with_one_section_per_pair_headed_by_its_question_type():
    pages = {p.url: p for p in health_pages(_docs())}
    keys = [q["key"] for p in pages.values() for q in p.qa]
    assert len(set(keys)) == len(keys) and {"2:1-1", "3:1-1", "4:2-1"} <= set(keys)  # the collection, then the qid
    gout = pages[f"{GARD}/5/gout"]  # two documents under one URL (with fragments): one page with both pairs
    assert [q["anchor"] for q in gout.qa] == ["symptoms", "treatment"] and len(pages) == 6
    html = page_html(pages[f"{GARD}/1/marfan-syndrome"])
    assert "<title>Marfan syndrome</title>" in html and '<h2 id="symptoms">Symptoms</h2>' in html
    assert '<h2 id="inheritance">Inheritance</h2>' in html and "long arms and fingers" in html


def test_page_groups_join_pages_of_one_focus_and_pages_with_the_same_answer():
    groups = page_groups(health_pages(_docs()))
    marfan = groups[f"{GARD}/1/marfan-syndrome"]
    # same focus (case and spacing aside), and through the shared inheritance answer, Loeys-Dietz too
    assert groups["https://medlineplus.gov/marfansyndrome.html"] == marfan
    assert groups[f"{GARD}/3/loeys-dietz-syndrome"] == marfan
    assert len({groups[f"{GARD}/4/scurvy"], groups[f"{GARD}/7/rickets"], marfan}) == 3
    assert page_groups(reversed(health_pages(_docs()))) != {} and marfan == f"{GARD}/1/marfan-syndrome"


def test_the_site_renders_the_same_bytes_every_time(tmp_path):
    shared = _shared(tmp_path)
    first = render_health_site(tmp_path / "a", shared)
    second = render_health_site(tmp_path / "b", shared)
    assert first.read_bytes() == second.read_bytes()
    for line in first.read_text().splitlines():
        entry = json.loads(line)
        a, b = tmp_path / "a" / entry["path"], tmp_path / "b" / entry["path"]
        assert a.read_bytes() == b.read_bytes() and os.stat(a).st_mtime == transfer_set.PAGE_MTIME


def test_halves_split_by_group_never_by_question_and_do_not_depend_on_order():
    rows = [{"corpus": "health", "answerable": i % 3 != 0, "group": f"{i % 3 != 0}-{i % 7}", "id": str(i)}
            for i in range(40)]
    rows.append({"corpus": "health", "answerable": False, "group": "True-1", "id": "mixed"})  # a group with both
    halves = split_halves(rows)
    shuffled = rows[:]
    random.Random(3).shuffle(shuffled)
    assert split_halves(shuffled) == halves and set(halves.values()) == {"tune", "report"}
    for label in (True, False):  # balanced within a label, as far as whole groups allow
        sizes = {h: sum(1 for r in rows if r["answerable"] is label and halves[r["group"]] == h) for h in ("tune", "report")}
        biggest = max(sum(1 for r in rows if r["answerable"] is label and r["group"] == g) for g in halves)
        assert abs(sizes["tune"] - sizes["report"]) <= biggest


def test_the_set_from_a_selection_keeps_each_page_group_in_one_half(tmp_path):
    shared = _shared(tmp_path)
    built = build_transfer_set(shared, SPEC)
    health = built.rows["health"]
    assert [r["id"] for r in health] == ["medquad:2:5-1", "medquad:3:1-1", "medquad:2:1-1", "medquad:2:4-1", "V_0"]
    gout = next(r for r in health if r["id"] == "medquad:2:5-1")
    assert (gout["answerable"], gout["gold_url"], gout["gold_anchor"]) == (True, f"{GARD}/5/gout", "symptoms")
    assert all(not r["answerable"] and "gold_url" not in r for r in health if r["origin"] in ("health-a", "mmu"))
    assert built.exclude["health"] == tuple(sorted(SPEC["left_out_pages"]))
    half_of_group: dict[str, set[str]] = {}
    for r in health + built.rows["docs"]:
        half_of_group.setdefault(r["group"], set()).add(r["half"])
    assert all(len(h) == 1 for h in half_of_group.values())
    assert build_transfer_set(shared, SPEC) == built  # deterministic
    path = built.write(tmp_path / "q.jsonl", "health", "tune")
    assert {json.loads(line)["half"] for line in path.read_text().splitlines()} == {"tune"}


@pytest.mark.skipif(not (shared_data_dir() / transfer_set.MEDQUAD).exists(), reason="needs ../shared/data/health")
def test_the_committed_selection_has_no_page_in_both_halves():
    built = build_transfer_set()
    pages = {p.url: p for p in health_pages(transfer_set.load_medquad())}
    groups = page_groups(pages.values())
    half_of_page: dict[str, set[str]] = {}
    for r in built.rows["health"]:
        if r["origin"] == "mmu":
            continue
        key = r["id"].removeprefix("medquad:")
        page = next(url for url, p in pages.items() if any(q["key"] == key for q in p.qa))
        for url, group in groups.items():  # every page of the question's group
            if group == groups[page]:
                half_of_page.setdefault(url, set()).add(r["half"])
        assert (page in built.exclude["health"]) is (not r["answerable"])
    assert half_of_page and all(len(h) == 1 for h in half_of_page.values())
    labels = [r["answerable"] for r in built.rows["health"]]
    assert labels.count(True) >= 100 and labels.count(False) >= 150


@pytest.mark.usefixtures("prefect_harness")
def test_the_health_set_runs_through_the_fake_model_writer_which_decides(tmp_path, data_root, run_flow):
    from hifirag_core.corpus.build import build_from_folder
    from hifirag_core.corpus.store import corpus_at
    from hifirag_core.evaluation.transfer import load_run, measure_verdicts
    from hifirag_core.store.warehouse import Warehouse
    from tests.support.fakes.services import fake_services

    shared = _shared(tmp_path)
    folder = tmp_path / "site"
    manifest = render_health_site(folder, shared)
    corpus = corpus_at(data_root, transfer_set.HEALTH_CORPUS)
    build_from_folder(corpus.root, corpus.blobs, folder, None, manifest=manifest)
    built = build_transfer_set(shared, SPEC)
    questions = built.write(tmp_path / "health.jsonl", "health")
    with fake_services() as fakes, fakes.environment():
        overrides = [*fakes.config_overrides_pairs(llm="openai"), "backends.search=local", "backends.fetch=local",
                     "backends.filter_llm=offline", "models.writer=local-large", "corpus.name=health",
                     f"corpus.exclude={json.dumps(list(built.exclude['health']))}"]
        summary = run_flow(questions, overrides, variant="final_judged")
    w = Warehouse(data_root)
    rows = {qid: (verdict, method, abstained, note) for qid, verdict, method, abstained, note in w.query(
        "SELECT question_id, answerability, answerability_method, abstained, note FROM answers WHERE run_id = ?",
        [summary["run_id"]]).rows}
    for qid in ("medquad:2:5-1", "medquad:3:1-1"):  # the page is in the corpus: the writer says answered
        assert rows[qid][:3] == ("answered", "writer", False) and rows[qid][3].startswith("Answerability: answered")
    for qid in ("medquad:2:1-1", "medquad:2:4-1"):  # left out with its group: not_found, shown, never withheld
        assert rows[qid][:3] == ("not_found", "writer", False) and "may not answer" in rows[qid][3]
    labelled = [q for q in load_run(w, summary["run_id"]) if q.origin != "mmu"]
    assert {q.corpus for q in labelled} == {"health"} and len(labelled) == 4
    measured = measure_verdicts(labelled)
    assert measured.abstain == (2, 2) and measured.answer == (2, 2)
    assert measured.never_abstain < measured.crag


@pytest.mark.skipif(not (shared_data_dir() / transfer_set.MEDQUAD).exists(), reason="needs ../shared/data/health")
def test_the_datasets_read_the_health_corpus_with_the_left_out_pages_excluded(tmp_path):
    from hifirag_core.evaluation.datasets import resolve_dataset

    report = resolve_dataset("transfer-health-report", root=tmp_path)
    docs = resolve_dataset("transfer_docs", root=tmp_path)
    assert report.name == "transfer_health_report" and report.overrides[0] == "corpus.name=health"
    excluded = json.loads(report.overrides[1].split("=", 1)[1])
    assert excluded == sorted(excluded) and len(excluded) == len(transfer_set.load_spec()["left_out_pages"])
    rows = [json.loads(line) for line in report.path.read_text().splitlines()]
    assert {r["half"] for r in rows} == {"report"} and {r["corpus"] for r in rows} == {"health"}
    assert not any(o.startswith("corpus.name") for o in docs.overrides)  # the docs corpus is the default
