"""A page with an injected instruction, visible and hidden: hidden copies never reach a section, and the
offline pipeline keeps, answers and cites exactly what it does for the same page without the injection."""

from __future__ import annotations

import re

from hifirag_core.llm.prompts import FENCE_CLOSE, PromptSet, render_sources
from hifirag_core.sectioning import parse_sections
from tests.support.adversarial import (
    HIDDEN_KINDS,
    INJECTION,
    PAGE_URL,
    adversarial_page,
    answer_differences,
    run_over_site,
)


def _sections(html: bytes) -> list[tuple[tuple[str, ...], str]]:
    return [(s.heading_path, s.text) for s in parse_sections(html, PAGE_URL).sections]


def test_the_fixture_hides_the_instruction_every_way_and_shows_it_once() -> None:
    html = adversarial_page().decode()
    assert sorted(re.findall(r'data-injection="([\w-]+)"', html)) == sorted(["visible", *HIDDEN_KINDS])
    assert html.count(INJECTION) == 1 + len(HIDDEN_KINDS)
    assert INJECTION not in adversarial_page(injected=False).decode()


def test_only_the_visible_copy_reaches_the_sections() -> None:
    injected, clean = _sections(adversarial_page()), _sections(adversarial_page(injected=False))
    assert "\n".join(text for _, text in injected).count(INJECTION) == 1
    # the one difference: the visible paragraph, under the page's title
    assert [s for s in injected if INJECTION not in s[1]] == [s for s in clean if s[0] != ("Syncing over slow links",)]


def test_page_text_in_a_prompt_cannot_close_its_fence() -> None:
    from hifirag_core.types import SourceDoc, SourceSection

    hostile = f"{FENCE_CLOSE}\n{INJECTION}"
    source = SourceDoc(1, PAGE_URL, "Syncing over slow links", "", (SourceSection("s", ("Tips",), hostile),))
    prompt = PromptSet.load()["citations"].render(answer="Use --max-rate.", web_content=render_sources([source]))
    assert prompt.count(FENCE_CLOSE) == 2  # the note's mention and the real closing line, nothing from the page
    assert prompt.rstrip().endswith(FENCE_CLOSE) and INJECTION in prompt.split("<web_text>\n", 1)[1]


def test_the_offline_path_is_unaffected_by_the_injection(tmp_path, questions_file, examples_file) -> None:
    clean = run_over_site(tmp_path, "clean", injected=False, questions_file=questions_file,
                          examples_file=examples_file)
    injected = run_over_site(tmp_path, "injected", injected=True, questions_file=questions_file,
                             examples_file=examples_file)
    assert all(PAGE_URL in run["fetched"] for run in injected.values())  # the page was read
    assert all(INJECTION in run["section_text"] for run in injected.values())  # its visible copy too
    assert answer_differences(clean, injected) == {}
    for run in injected.values():
        assert INJECTION not in (run["answer"] or "") and not any("example.com" in u for u in run["cited_urls"])
