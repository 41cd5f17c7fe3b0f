"""Issue 41's development set: the hard kind of unanswerable leaves only the answer's sections, not the page."""

from __future__ import annotations

from tools.answer_reading_eval import Pool, Question, Section, masks

PAGE = "https://h.example/tidewater"
OTHER = "https://h.example/harbour"


def _pool() -> Pool:
    texts = {
        "history": "The Tidewater lighthouse was built of granite in 1874 by the harbour board of Port Ellen.",
        "lamp": "The Tidewater lighthouse lamp burns paraffin and turns twice a minute behind a glass lens.",
        "visits": "Visitors may climb the Tidewater lighthouse on summer weekends; the keepers show the lamp.",
    }
    sections = [
        Section(f"{PAGE}#{k}", PAGE, PAGE, ("Tidewater lighthouse", k.capitalize()), t, k)
        for k, t in texts.items()
    ]
    sections.append(
        Section(
            f"{OTHER}#quay",
            OTHER,
            OTHER,
            ("Harbour", "Quay"),
            "The harbour quay of Port Ellen was rebuilt after a storm; the lighthouse stands beyond it.",
            "quay",
        )
    )
    return Pool(sections)


def test_the_answer_absent_kind_keeps_the_rest_of_the_page_and_the_page_out_kind_drops_it():
    pool = _pool()
    question = Question(
        "q1",
        "health",
        "When was the Tidewater lighthouse built?",
        pool.by_id[f"{PAGE}#history"].text,
        f"{PAGE}#history",
        PAGE,
        "history",
    )
    masked = masks(question, pool)
    assert masked["answerable"] == set()
    assert masked["answer_absent"] == {f"{PAGE}#history"}  # the answer's section only
    assert masked["page_out"] == {f"{PAGE}#history", f"{PAGE}#lamp", f"{PAGE}#visits"}
    kept = {kind: [s.section_id for s in pool.kept(question.question, m)] for kind, m in masked.items()}
    assert f"{PAGE}#history" in kept["answerable"]
    # topic present, answer absent: the page is still found, and its other sections are kept
    assert f"{PAGE}#history" not in kept["answer_absent"] and f"{PAGE}#lamp" in kept["answer_absent"]
    assert not any(k.startswith(PAGE) for k in kept["page_out"]) and f"{OTHER}#quay" in kept["page_out"]
