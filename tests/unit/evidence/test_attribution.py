"""Per-sentence citations: markers as a hint, support as the judge, and the text the user reads."""

from __future__ import annotations

import numpy as np

from hifirag_core.evidence.attribution import attribute_sentences, marked_sentences, render_citations
from hifirag_core.text import split_sentences

CLAIMS = [("Set max-rate to limit it.", frozenset({2})), ("Free accounts are throttled.", frozenset()),
          ("Nothing supports this claim.", frozenset({1}))]
# rows: claims; columns: sources 1, 2, 3
SUPPORT = np.array([[0.9, 0.7, 0.1], [0.2, 0.3, 0.8], [0.1, 0.2, 0.3]], dtype=np.float32)


def test_the_writers_marker_wins_when_it_supports_the_sentence():
    cited = attribute_sentences(CLAIMS, [1, 2, 3], SUPPORT, allowed=[1, 2, 3], min_support=0.6, method="offline")
    assert [c.sources for c in cited] == [(2,), (3,), ()]
    assert [c.method for c in cited] == ["offline+marker", "offline+support", "offline"]
    assert cited[0].support == 0.7 and cited[0].marked == (2,) and cited[2].support is None


def test_without_a_threshold_each_sentence_gets_the_best_of_the_allowed_sources():
    cited = attribute_sentences(CLAIMS, [1, 2, 3], SUPPORT, allowed=[1, 3], min_support=None, method="llm")
    # the first sentence's marker names a source the model did not keep; the third's is kept, so it wins
    assert [c.sources for c in cited] == [(1,), (3,), (1,)]
    assert [c.method for c in cited] == ["llm+support", "llm+support", "llm+marker"]


def test_markers_alone_when_nothing_measures_support():
    unchecked = attribute_sentences(CLAIMS, [1, 2, 3], None, allowed=[1, 2, 3], min_support=None,
                                    method="writer-markers", cite_unmarked=False)
    assert [c.sources for c in unchecked] == [(2,), (), (1,)]
    every = attribute_sentences(CLAIMS, [1, 2, 3], None, allowed=[2, 3], min_support=None, method="llm")
    assert [c.sources for c in every] == [(2,), (2, 3), (2, 3)]


def test_render_puts_markers_after_cited_sentences_numbered_by_first_citation():
    text = "1. Open the settings page.\n2. Set the max rate to 100.\nThat is   all you need to do."
    sentences = [("Open the settings page.", ["https://b"]), ("Set the max rate to 100.", []),
                 ("That is all you need to do.", ["https://a", "https://b"])]
    cited, urls = render_citations(text, sentences)
    assert urls == ["https://b", "https://a"]
    # a sentence's markers keep its sources' order (best first)
    assert cited == "1. Open the settings page. [1]\n2. Set the max rate to 100.\nThat is   all you need to do. [2][1]"
    assert render_citations("No citations here at all.", [("No citations here at all.", [])]) == (
        "No citations here at all.", [])


def test_markers_of_sentences_inside_a_code_block_go_after_it_so_the_block_still_closes():
    text = "Call sync like this:\n\n```python\nimport tidewater\n\nresult = tidewater.sync(x)\n```\n\nIt returns a result."
    sentences = [(s, ["https://a"]) for s in split_sentences(text)]
    assert sentences[1][0] == "```python import tidewater" and sentences[2][0].endswith("```")
    cited, _ = render_citations(text, sentences)
    assert cited == ("Call sync like this: [1]\n\n```python\nimport tidewater\n\nresult = tidewater.sync(x)\n```\n[1]"
                     "\n\nIt returns a result. [1]")
    # a fence never closed (a trimmed answer) takes the markers at the text's end
    assert render_citations("Use:\n```sh\nrun it", [("```sh run it", ["https://a"])])[0] == "Use:\n```sh\nrun it\n[1]"


def test_claims_come_from_the_writers_text_with_its_markers():
    claims = marked_sentences("Set max-rate to limit it. [1] Free accounts are throttled. It is fixed. [2][3]")
    assert claims == [("Set max-rate to limit it.", {1}), ("Free accounts are throttled.", {2, 3}),
                      ("It is fixed.", {2, 3})]


def test_support_embeds_only_each_sentences_best_source_sentences_and_finds_the_copied_one(tmp_path):
    from hifirag_core.evidence.attribution import citation_support
    from hifirag_core.retrieval.embeddings import Embedder
    from hifirag_core.types import SourceDoc, SourceSection

    topics = ["replication slots", "vacuum settings", "index builds", "backup tools", "connection pools",
              "query planning", "lock waits", "log rotation", "extension packaging", "timezone data"]
    filler = [f"The manual describes {t} in chapter {i} with several worked examples." for i, t in enumerate(topics)]
    copied = "VACUUM FULL rewrites the whole table and needs an exclusive lock while it runs."
    sources = [SourceDoc(1, "https://a", "A", "", (SourceSection("a", ("A",), " ".join(filler)),)),
               SourceDoc(2, "https://b", "B", "", (SourceSection("b", ("B",), " ".join([*filler[:5], copied])),))]
    sentences = [copied, "Backups are taken with the backup tools."]
    full = citation_support(sentences, sources, Embedder(tmp_path / "full.sqlite"), shortlist=None)
    embedder = Embedder(tmp_path / "short.sqlite")
    short = citation_support(sentences, sources, embedder, shortlist=2)
    assert short.shape == (2, 2) and abs(short[0, 1] - full[0, 1]) < 1e-5 and full[0, 1] > 0.99  # the copy is found
    assert np.all(short <= full + 1e-5)  # a shortlist can only miss a better passage
    assert embedder.encoded < len(sentences) + len(filler) + len(filler[:5]) + 1  # not every source sentence
