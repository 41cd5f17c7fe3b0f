"""The credibility prior inside the pipeline: URL and section decisions carry type, prior and final score."""

from __future__ import annotations

import pytest

from hifirag_core.config import build_config
from hifirag_core.corpus.sites import SourcePage
from hifirag_core.corpus.store import Corpus
from hifirag_core.llm.examples import ExampleSet
from hifirag_core.pipeline.output import StageOutput
from hifirag_core.pipeline.plan import RunContext
from hifirag_core.pipeline.stages.url_filter import filter_urls
from hifirag_core.pipeline.variants import variant_overrides
from hifirag_core.pipeline.wiring import build_runtime
from hifirag_core.questions import Question
from hifirag_core.records import SearchResultRecord, UrlDecisionRecord
from hifirag_core.store.blobs import blob_store

OFFICIAL = "https://www.cdc.gov/flu/prevent/flushot.htm"
FORUM = "https://www.reddit.com/r/health/comments/abc123/flu_shot_question/"
BLOG = "https://flu-facts.blogspot.com/2024/01/flu-shot.html"


@pytest.fixture
def root(tmp_path):
    page = b"<html><head><title>Flu shot</title></head><body><main><h1>Flu shot</h1><p>x</p></main></body></html>"
    pages = [SourcePage("t", "a.html", u, page) for u in (OFFICIAL, FORUM, BLOG)]
    Corpus.build(tmp_path / "corpus" / "docs", blob_store(tmp_path), pages, sources=["test"])
    return tmp_path


def _search_output() -> StageOutput:
    hits = [  # the forum and the blog match the question best on words alone
        (FORUM, "Flu shot question: does the flu shot give you the flu?",
         "Does the flu shot give you the flu? Someone said the flu shot gives you the flu."),
        (BLOG, "Flu shot facts: can the flu shot give you flu", "Can the flu shot give you the flu? Facts."),
        (OFFICIAL, "Flu vaccine safety", "Flu vaccines cannot cause flu illness; the vaccine is inactivated."),
    ]
    return StageOutput("search", [SearchResultRecord(query="q", rank=i, title=t, url=u, snippet=s, provider="t")
                                  for i, (u, t, s) in enumerate(hits, 1)])


def _decide(root, variant: str, **credibility: object) -> list[UrlDecisionRecord]:
    cfg = build_config(variant_overrides(variant), {"url_filter": {"max_urls": 1, "min_relative_score": 0.0},
                                                    "credibility": credibility})
    rt = build_runtime(RunContext("t", str(root), cfg, ExampleSet("", ())))
    out = filter_urls(Question("q1", "Does the flu shot give you the flu?", None, 1), _search_output(), rt)
    return [r for r in out.records if isinstance(r, UrlDecisionRecord)]


def test_the_prior_demotes_forums_and_blogs_and_every_row_says_why(root):
    plain = {r.url: r for r in _decide(root, "final")}
    weighted = {r.url: r for r in _decide(root, "final_credibility", strength=1.0)}  # the paper's sim x prior
    assert plain[FORUM].kept and not plain[OFFICIAL].kept
    assert weighted[OFFICIAL].kept and not weighted[FORUM].kept
    assert (weighted[OFFICIAL].source_type, weighted[FORUM].source_type, weighted[BLOG].source_type) == (
        "government", "user_generated", "blog")
    assert weighted[OFFICIAL].prior == 0.90 and weighted[FORUM].prior == 0.40
    assert weighted[FORUM].final_score == pytest.approx(weighted[FORUM].score * 0.40)
    assert all(r.final_score is None and r.source_type for r in plain.values())  # typed even with the prior off
    assert weighted[OFFICIAL].method.endswith("+prior")


def test_the_default_strength_only_nudges_the_order(root):
    """At the experiment's default lambda a forum that matches the words clearly better keeps its place."""
    strength = build_config(variant_overrides("final_credibility")).credibility.strength
    assert 0 < strength < 1
    gentle = {r.url: r for r in _decide(root, "final_credibility")}
    assert gentle[FORUM].kept and not gentle[OFFICIAL].kept
    assert gentle[FORUM].final_score == pytest.approx(gentle[FORUM].score * 0.40 ** strength)
    assert gentle[OFFICIAL].final_score == pytest.approx(gentle[OFFICIAL].score * 0.90 ** strength)
