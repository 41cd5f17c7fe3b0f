"""Does SmolLM2-135M-Instruct choose by content? The URL filter's and the section ranker's clear cases, in every order.

``tests/system/test_local_model_instruct.py`` asks SmolLM2 (a llama.cpp server, tests/support/llama_server.py) two clear cases:
the one Python URL among a bakery and a football page for "How do I reverse a list in Python?", and the section
whose heading is the question among "Installing", "Release notes" and "License". This script asks each case
with the relevant candidate at every position, at temperature 0, the paper's prompts (A.2, A.3) rendered as the
pipeline renders them, and three response schemas, all grammar-constrained by the server
(``{"type": "json_object", "schema": ...}``):

* ``pipeline``: the schema the pipeline sends (``object_schema``: a list of strings, or of integers);
* ``enum``: the list's items limited to the candidates (their URLs, or the indices ``0..n-1``);
* ``enum, one``: the same with exactly one item (``minItems`` = ``maxItems`` = 1): a forced choice.

It prints every reply and, per case and schema, in how many orders the relevant candidate came first. Each case
also has a clearer variant (the URL's title is the question; a page of two sections). Nothing here is tuned:
the figures decide which assertions the test can make.

    .venv/bin/python bench/bench_smollm2_choices.py     # 54 completions; about 10 minutes on two idle cores
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hifirag_core.llm.job import object_schema  # noqa: E402
from hifirag_core.llm.parsing import parse_section_indices, parse_url_selection  # noqa: E402
from hifirag_core.llm.prompts import (  # noqa: E402
    PromptSet,
    render_page_overview,
    render_search_results,
    render_section_previews,
)
from hifirag_core.types import PageOverview, SectionPreview, UrlCandidate  # noqa: E402
from tests.support.llama_server import SMOLLM2, llama_server, unavailable_reason  # noqa: E402

URL_QUESTION = "How do I reverse a list in Python?"
PYTHON = UrlCandidate("https://docs.python.org/3/tutorial/datastructures.html", "5. Data Structures: More on Lists",
                      "list.reverse(): reverse the elements of the list in place. reversed(a) returns an iterator.")
DECOYS = [
    UrlCandidate("https://www.example-bakery.com/recipes/banana-bread", "Easy banana bread recipe",
                 "Mash three ripe bananas, mix with flour, sugar and butter, and bake for an hour."),
    UrlCandidate("https://www.example-football.com/results/2024", "Football results of the 2024 season",
                 "All the scores of the league's 380 matches, team by team."),
]
PYTHON_CLEARER = UrlCandidate("https://docs.python.org/3/faq/reverse-a-list.html", URL_QUESTION,
                              "To reverse a list in Python, call list.reverse() or use reversed(a).")

SECTION_QUESTION = "How do I reverse a list?"
GOLD = SectionPreview("s2", SECTION_QUESTION, f"Lists > {SECTION_QUESTION}: Call list.reverse() to reverse it in "
                      "place, or use reversed(a) for an iterator.")
OTHERS = [
    SectionPreview("s0", "Installing", "Lists > Installing: Download the installer and run it."),
    SectionPreview("s1", "Release notes", "Lists > Release notes: Version 3.2 fixes two bugs in sorting."),
    SectionPreview("s3", "License", "Lists > License: This software is distributed under the MIT license."),
]
PAGE = PageOverview("https://docs.example.org/lists.html", "Lists", "Working with lists.")


def schemas(key: str, item_type: str, choices: list) -> dict[str, dict]:
    pipeline = object_schema(key, item_type)
    enum = object_schema(key, item_type)
    enum["properties"][key]["items"] = {"type": item_type, "enum": choices}
    one = object_schema(key, item_type)
    one["properties"][key] = {**enum["properties"][key], "minItems": 1, "maxItems": 1}
    return {"pipeline": pipeline, "enum": enum, "enum, one": one}


def orders(gold, others: list) -> Iterator[list]:
    """The candidates with the gold one at every position, the others in their order (all orders of the
    others when there are two)."""
    rests = [others, others[::-1]] if len(others) == 2 else [others]
    for rest in rests:
        for at in range(len(rest) + 1):
            yield [*rest[:at], gold, *rest[at:]]


def ask(client: httpx.Client, base_url: str, text: str, schema: dict, max_tokens: int) -> tuple[str, str]:
    body = {"model": SMOLLM2.alias, "messages": [{"role": "user", "content": text}], "temperature": 0,
            "max_tokens": max_tokens, "response_format": {"type": "json_object", "schema": schema}}
    reply = client.post(f"{base_url}/chat/completions", json=body, timeout=900)
    reply.raise_for_status()
    choice = reply.json()["choices"][0]
    return choice["message"]["content"], choice["finish_reason"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-tokens", type=int, default=96, help="the reply ceiling [96, as the test]")
    parser.add_argument("--log", type=Path, default=Path("/tmp/hifirag-bench-smollm2-choices.log"),
                        help="the server's log")
    args = parser.parse_args()
    if reason := unavailable_reason():
        print(f"skipped: {reason}")
        return
    prompts = PromptSet.load(None)
    cases = []
    for name, gold in (("URL filter", PYTHON), ("URL filter, title is the question", PYTHON_CLEARER)):
        for cands in orders(gold, DECOYS):
            text = prompts["url_filter"].render(question=URL_QUESTION, search_results=render_search_results(cands))
            urls = [c.url for c in cands]
            order = ", ".join("python" if c is gold else c.url.split("example-")[1].split(".")[0] for c in cands)
            cases.append((name, order, cands.index(gold), text, schemas("urls", "string", urls),
                          lambda reply, urls=urls: parse_url_selection(reply, candidate_urls=urls)))
    for name, others in (("section ranker", OTHERS), ("section ranker, two sections", OTHERS[2:])):
        for secs in orders(GOLD, others):
            text = prompts["section_rank"].render(question=SECTION_QUESTION, page_overview=render_page_overview(PAGE),
                                                  section_previews=render_section_previews(secs))
            order = ", ".join("the question" if s is GOLD else s.heading for s in secs)
            cases.append((name, order, secs.index(GOLD), text, schemas("sections", "integer", list(range(len(secs)))),
                          lambda reply, n=len(secs): parse_section_indices(reply, n_sections=n)))
    firsts: dict[tuple[str, str], list[bool]] = {}
    began = time.monotonic()
    print("| case | candidates in order | schema | reply | parsed (0-based) | relevant first |")
    print("|---|---|---|---|---|---|")
    with llama_server(args.log, model=SMOLLM2) as base_url, httpx.Client() as client:
        for name, order, at, text, variants, parse in cases:
            for schema_name, schema in variants.items():
                reply, finish = ask(client, base_url, text, schema, args.max_tokens)
                parsed = parse(reply)
                first = bool(parsed.value) and parsed.value[0] == at
                firsts.setdefault((name, schema_name), []).append(first)
                shown = " ".join(reply.split()) + ("" if finish == "stop" else f" [{finish}]")
                print(f"| {name} | {order} | {schema_name} | `{shown}` | {parsed.value} | {'yes' if first else 'no'} |",
                      flush=True)
    print(f"\n{sum(len(v) for v in firsts.values())} completions in {time.monotonic() - began:.0f} s\n")
    print("| case | schema | relevant first, orders |")
    print("|---|---|---|")
    for (name, schema_name), hits in firsts.items():
        print(f"| {name} | {schema_name} | {sum(hits)} of {len(hits)} |")


if __name__ == "__main__":
    main()
