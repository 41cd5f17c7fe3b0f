"""The offline backend's algorithms: real decisions, checked on content whose answers are known."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hifirag_core.backends.offline import (
    OfflineFilterModel,
    OfflineWriterModel,
    is_howto,
    marked_sentences,
    search_queries,
    strip_markers,
)
from hifirag_core.config import build_config
from hifirag_core.retrieval.embeddings import Embedder
from hifirag_core.retrieval.scoring import hybrid_scores, keep_relative, mmr_select
from hifirag_core.text import word_count
from hifirag_core.types import (
    ChatTurn,
    Conversation,
    FewShotExample,
    PageOverview,
    SectionPreview,
    SourceDoc,
    SourceSection,
    UrlCandidate,
)


@pytest.fixture(scope="module")
def embedder(tmp_path_factory) -> Embedder:
    return Embedder(Path(tmp_path_factory.mktemp("vec")) / "v.sqlite")


@pytest.fixture(scope="module")
def models(embedder):
    cfg = build_config()
    return OfflineFilterModel(embedder, cfg), OfflineWriterModel(embedder, cfg)


def test_search_queries_drop_personas_and_answer_style_but_keep_the_question():
    queries = search_queries("As a media professor with 20 years of experience, explain like I'm five how a "
                              "camera works", 2)
    assert queries == ["how a camera works"]
    assert search_queries("how to tie shoelaces step-by-step please", 2) == ["how to tie shoelaces"]
    assert search_queries("what is it", 2) == ["what is it"]  # nothing left: search as asked


def test_focused_second_query_of_keywords():
    queries = search_queries("Why does os.path.join drop earlier parts when a later argument is absolute on "
                              "Windows machines", 2)
    assert queries[0].startswith("Why does os.path.join drop")
    assert len(queries) == 2 and "os.path.join" in queries[1] and len(queries[1].split()) == 4
    assert search_queries("Why does os.path.join drop earlier parts?", 1) == ["Why does os.path.join drop earlier parts?"]


def test_howto_detection():
    assert is_howto("How do I season a cutting board?") and is_howto("Tell me how to cook pancakes step-by-step")
    assert not is_howto("Why is the sky blue?")


def test_url_selection_keeps_relevant_results_first(models):
    filt, _ = models
    candidates = [
        UrlCandidate("https://a/garden", "Caring for tomatoes", "Water tomato plants deeply twice a week."),
        UrlCandidate("https://a/sync", "Syncing folders", "Use --max-rate to limit the bandwidth a sync uses."),
        UrlCandidate("https://a/config", "Configuring", "Profiles group settings; select one with --profile."),
    ]
    decision = filt.select_urls("How do I limit sync bandwidth?", candidates, max_urls=2)
    assert decision.value[0] == 1
    assert 0 not in decision.value
    assert decision.scores is not None and decision.scores[1] > decision.scores[0]


def test_section_ranking_uses_heading_and_preview(models):
    filt, _ = models
    previews = [
        SectionPreview("s1", "Requirements", "Install > Requirements: Tidewater needs Python 3.9 and libyaml."),
        SectionPreview("s2", "Conflict resolution", "Sync > Conflict resolution: the newest version wins."),
        SectionPreview("s3", "Watering", "Tomatoes > Watering: water deeply twice a week."),
    ]
    decision = filt.rank_sections("what happens when a file changed on both sides during sync", PageOverview(
        "https://a", "Sync", ""), previews, max_sections=2)
    assert decision.value[0] == 1 and 2 not in decision.value


def _sources() -> list[SourceDoc]:
    return [
        SourceDoc(1, "https://a/sync", "Sync", "", (SourceSection("s1", ("Sync", "Limiting bandwidth"),
            "Use the --max-rate option to limit the bandwidth of a sync. For example --max-rate 2M limits it to "
            "two megabytes per second. The option applies to uploads and downloads alike."),)),
        SourceDoc(2, "https://a/garden", "Garden", "", (SourceSection("s2", ("Garden",),
            "Water tomato plants deeply twice a week. Remove side shoots from the stem."),)),
    ]


def test_draft_is_extractive_within_budget_with_source_markers(models):
    _, writer = models
    decision = writer.draft("How do I limit the bandwidth of a sync?", _sources(), max_words=25)
    text = decision.value.last_reply
    assert "--max-rate" in text and "[1]" in text
    assert "tomato" not in text
    assert word_count(strip_markers(text)) <= 25 + 15  # at most one sentence past the budget


def test_draft_without_sources_says_so(models):
    _, writer = models
    decision = writer.draft("anything", [], max_words=50)
    assert decision.status == "no_evidence" and decision.value.last_reply == ""


def test_refine_fits_the_examples_length_and_numbers_steps_for_howto(models):
    _, writer = models
    long_draft = " ".join(f"Sentence {i} explains one part of limiting sync bandwidth with max-rate. [1]"
                          for i in range(12))
    convo = Conversation((ChatTurn("user", "q"), ChatTurn("model", long_draft)))
    examples = [FewShotExample("q", " ".join(["word"] * 40))] * 3
    refined = writer.refine("How do I limit sync bandwidth?", convo, examples).value
    assert refined.startswith("1. ") and "\n2. " in refined
    assert all(line.endswith("[1]") and not line.split(" ", 1)[1].startswith("[") for line in refined.splitlines())
    assert word_count(strip_markers(refined)) <= 40 + 15
    plain = writer.refine("Why is bandwidth limited?", convo, examples).value
    assert not plain.startswith("1. ")


def cited(decision) -> list[int]:
    """The sources any sentence of a citation decision cites."""
    return sorted({n for sentence in decision.value for n in sentence.sources})


def test_citations_keep_only_supporting_sources(models):
    filt, _ = models
    answer = "Use the --max-rate option to limit the bandwidth of a sync."
    decision = filt.verify_citations("q", answer, _sources())
    assert cited(decision) == [1]
    (sentence,) = decision.value
    assert sentence.text == answer and sentence.method == "offline+support" and sentence.support > 0.9
    assert decision.scores[0] > decision.scores[1]
    unrelated = filt.verify_citations("q", "Completely unrelated statement about volcanoes erupting.", _sources())
    assert cited(unrelated) == [] and unrelated.value[0].sources == () and unrelated.value[0].method == "offline"


def test_draft_follows_the_section_rankers_score(models):
    _, writer = models
    question = "How is the sync bandwidth limited?"
    twins = [  # two sections that read alike to a sentence scorer
        "The sync bandwidth is limited with the max rate setting of the client.",
        "The sync bandwidth is limited by the provider for free accounts.",
    ]

    def sources(first: float, second: float) -> list[SourceDoc]:
        return [SourceDoc(n, f"https://a/{n}", "", "", (SourceSection(f"s{n}", ("Sync",), text, score),))
                for n, (text, score) in enumerate(zip(twins, (first, second), strict=True), 1)]

    def leading_source(text: str) -> str:
        return text.split("[", 1)[1][0]

    assert leading_source(writer.draft(question, sources(0.9, 0.2), max_words=12).value.last_reply) == "1"
    assert leading_source(writer.draft(question, sources(0.2, 0.9), max_words=12).value.last_reply) == "2"


def test_draft_keeps_the_filters_order_of_sources_sections_and_sentences(models):
    _, writer = models
    question = "How is the sync bandwidth limited?"
    sections = {  # source -> its kept sections, best first; the second source matches the question best
        1: [("Accounts", "Free accounts have a monthly quota. The quota resets on the first day."),
            ("Clients", "Desktop clients upload in the background.")],
        2: [("Sync", "The sync bandwidth is limited with the max rate setting. It is limited per device.")],
    }
    sources = [SourceDoc(n, f"https://a/{n}", "", "", tuple(SourceSection(f"s{n}{k}", (h,), text, 0.5)
                                                         for k, (h, text) in enumerate(secs)))
               for n, secs in sections.items()]
    draft = writer.draft(question, sources, max_words=200).value.last_reply
    expected = [sentence for secs in sections.values() for _, text in secs for sentence in text.split(". ")]
    positions = [draft.index(sentence.rstrip(".")) for sentence in expected]
    assert positions == sorted(positions), draft  # every sentence chosen, in the filters' order
    assert draft.index("[1]") < draft.index("[2]")


def test_citations_keep_the_writers_source_when_another_quotes_it(models):
    filt, _ = models
    text = "Use the --max-rate option to limit the bandwidth of a sync."
    original = _sources()[0]  # holds the sentence among others
    quoting = SourceDoc(2, "https://mirror/sync", "Mirror", "", (SourceSection("m", ("Sync",), text),))
    for claimed in (1, 2):  # both support the sentence verbatim; the writer's marker decides
        decision = filt.verify_citations("q", f"{text} [{claimed}]", [original, quoting])
        assert cited(decision) == [claimed] and decision.value[0].method == "offline+marker"
    unrelated = "Completely unrelated statement about volcanoes erupting. [2]"
    assert cited(filt.verify_citations("q", unrelated, [original, quoting])) == []  # a claim is still checked


def test_marked_sentences_carry_the_markers_that_close_them():
    answer = "Set max-rate to limit it. [1] Free accounts are throttled. It is fixed. [2][3] No source for this one."
    assert marked_sentences(answer) == [("Set max-rate to limit it.", {1}), ("Free accounts are throttled.", {2, 3}),
                                        ("It is fixed.", {2, 3}), ("No source for this one.", set())]
    assert marked_sentences("1. Open the settings page. [4]\n2. Two words [4]") == [("Open the settings page.", {4})]


def test_keep_relative_and_mmr():
    scores = np.array([0.9, 0.55, 0.85, 0.5], dtype=np.float32)  # 0.6 x best = 0.54
    assert keep_relative(scores, min_relative=0.6, limit=5) == [0, 2, 1]
    assert keep_relative(scores, min_relative=0.6, limit=1) == [0]
    vectors = np.eye(4, dtype=np.float32)
    vectors[1] = vectors[0]  # item 1 duplicates item 0
    chosen = mmr_select(np.array([1.0, 0.99, 0.5, 0.4]), vectors, [10, 10, 10, 10], budget=20, lam=0.5)
    assert chosen == [0, 2]


ROTATION = """Tidewater keeps a journal of every sync. This can be a file path or a callable.

| Race | Pole position | Most laps led |
|---|---|---|
| 001 | Advan | Kobayashi |

- [Home](index.html)
- Journal rotation

To rotate the journal of a sync, run the following command:

```sh
tidewater rotate --keep 3
```

It keeps the last three journals.
"""


def test_draft_reads_as_prose_and_quotes_a_code_example_whole(models):
    _, writer = models
    sources = [SourceDoc(1, "https://a/journal", "Journal", "", (SourceSection("s1", ("Journal",), ROTATION, 1.0),))]
    draft = writer.draft("How do I rotate the journal of a Tidewater sync?", sources, max_words=80).value.last_reply
    assert "Pole position" not in draft and "Home" not in draft and "Advan" not in draft
    assert "It keeps the last three journals" not in draft  # after a code block: no antecedent, left out
    # a sentence that points back stays with the one it points at, each with its marker
    assert "Tidewater keeps a journal of every sync. [1] This can be a file path or a callable. [1]" in draft
    # the command is quoted whole, as a fenced block after the sentence that introduces it; every part the
    # citation check reads as a claim carries the marker (markers never reach the answer's text)
    assert "run the following command: [1]\n```sh\ntidewater rotate --keep 3\n``` [1]" in draft
    refined = writer.refine("Why rotate the journal?", Conversation((ChatTurn("user", "q"), ChatTurn("model", draft))),
                            [FewShotExample("q", " ".join(["word"] * 60))] * 3).value
    assert "command: [1]\n```sh\ntidewater rotate --keep 3\n``` [1]" in refined  # trimmed whole, never cut
    assert "\n```sh\ntidewater rotate --keep 3\n```" in strip_markers(refined)  # fences on lines of their own


def test_a_dependent_sentence_is_numbered_in_the_step_of_its_antecedent(models):
    _, writer = models
    draft = ("Run tidewater rotate to start a new journal file. [1] It keeps the last three journals. [1] "
             "Run tidewater sync again to write into the new journal. [1]")
    convo = Conversation((ChatTurn("user", "q"), ChatTurn("model", draft)))
    refined = writer.refine("How do I rotate the journal?", convo, [FewShotExample("q", "word " * 40)] * 3).value
    assert refined.splitlines() == [
        "1. Run tidewater rotate to start a new journal file. [1] It keeps the last three journals. [1]",
        "2. Run tidewater sync again to write into the new journal. [1]",
    ]


def test_each_part_is_answered_from_the_section_whose_heading_asks_it(models):
    """A question of two parts: the draft opens with each part's answer, in the question's order, taken from
    the section whose heading and lead match the part (the answer does not repeat its question), not from a
    sentence elsewhere that shares the part's words; the refine pass keeps both however short it must be."""
    _, writer = models
    question = "How do I limit the bandwidth of a sync, and why are conflicts renamed?"
    answer_two = "Tidewater keeps both copies, and the newer copy gets the device name appended."
    decoy = "Renamed files are listed as renamed conflicts when a conflict is renamed twice in version two."

    def doc(n: int, heading: str, text: str, score: float) -> SourceDoc:
        return SourceDoc(n, f"https://a/{n}", heading, "", (SourceSection(f"s{n}", (heading,), text, score),))

    sources = [doc(1, "Limiting bandwidth", "Use the --max-rate option to limit the bandwidth of a sync. "
                   "The limit applies to uploads and downloads alike.", 0.9),
               doc(2, "Release notes", decoy, 0.6),
               doc(3, "Why are conflicts renamed?", answer_two, 0.5)]
    part = "why are conflicts renamed"
    assert np.argmax(hybrid_scores(part, [decoy, answer_two], writer.embedder)) == 0  # the sentence alone misleads
    draft = writer.draft(question, sources, max_words=60).value
    text = draft.last_reply
    assert text.startswith("Use the --max-rate option to limit the bandwidth of a sync. [1] " + answer_two + " [3]"), text
    assert "[2 sentences open the draft" in draft.turns[0].text
    short = [FewShotExample("q", "one two three four five")] * 3  # a target far below the two answers
    refined = writer.refine(question, draft, short).value
    assert "[1]" in refined and "[3]" in refined and answer_two in refined, refined
    one_part = writer.draft("How do I limit the bandwidth of a sync?", sources, max_words=60).value
    assert "open the draft" not in one_part.turns[0].text


def _many_sentences() -> list[SourceDoc]:
    facts = ["Use the --max-rate option to limit the bandwidth of a sync.",
             "For example --max-rate 2M limits a sync to two megabytes per second.",
             "The limit applies to uploads and downloads alike.",
             "A profile may set its own rate with the max_rate key.",
             "The rate limit is averaged over a few seconds, so short bursts can exceed it.",
             "Without the option a sync uses all the bandwidth the link offers.",
             "The --max-rate value accepts the suffixes K, M and G.",
             "Setting the rate to zero removes the limit again."]
    return [SourceDoc(1, "https://a/sync", "Sync", "", (SourceSection("s1", ("Sync", "Limiting bandwidth"),
                                                                         " ".join(facts[:4])),
                                                          SourceSection("s2", ("Sync", "Rates"), " ".join(facts[4:])))),
            *_sources()[1:]]


def test_the_answer_length_short_is_three_sentences_with_a_yes_no_lead_and_long_is_longer(models):
    from hifirag_core.text import split_sentences
    from hifirag_core.types import AnswerStyle

    _, writer = models
    question = "Can I limit the bandwidth of a sync?"
    examples = [FewShotExample("q", " ".join(["word"] * 70))] * 3

    def answer(length: str) -> str:
        style = AnswerStyle(length=length)
        draft = writer.draft(question, _many_sentences(), max_words=80, style=style).value
        return strip_markers(writer.refine(question, draft, examples, style=style).value)

    short, standard, long = answer("short"), answer("standard"), answer("long")
    assert len(split_sentences(standard)) > 3  # so that the short answer's limit is a limit
    assert 1 <= len(split_sentences(short)) <= 3 and short.split(":", 1)[0] in ("Yes", "No")
    assert "--max-rate" in short
    assert word_count(long) > word_count(standard)
