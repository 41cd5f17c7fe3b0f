"""Prompt files: faithful to appendix A, checked variables, stable hashes, safe rendering."""

from __future__ import annotations

from pathlib import Path

import pytest

from hifirag_core.llm.prompts import (
    PROMPT_VARIABLES,
    PromptError,
    PromptSet,
    load_prompt,
    prompt_from_text,
    query_range,
    render_examples,
    render_page_overview,
    render_search_results,
    render_section_previews,
    render_sources,
)
from hifirag_core.resources import prompts_folder
from hifirag_core.types import (
    FewShotExample,
    PageOverview,
    SectionPreview,
    SourceDoc,
    SourceSection,
    UrlCandidate,
)
from tests.support.fakes.llm_brain import MARKERS, prompt_kind


def test_every_prompt_file_loads_with_exactly_its_variables() -> None:
    prompts = PromptSet.load(names=PROMPT_VARIABLES)
    for name, variables in PROMPT_VARIABLES.items():
        assert prompts[name].variables == variables
        assert len(prompts[name].hash) == 16


@pytest.mark.parametrize(("name", "phrases"), [
    ("query_plan", ["efficient and concise Google search queries", "JSON list of strings", "best search queries"]),
    ("url_filter", ["helpful for further reading to answer", "JSON list of URL strings", "with previews"]),
    ("section_rank", ["without additional searching or research", "ordered from most to least useful",
                      "Example output: [3, 2, 6, 7]", "Page overview:", "Useful chunks:"]),
    ("draft", ["helpful and knowledgeable assistant", "(1-4 sentences)", "-----------", "may help you"]),
    ("refine", ["style and length match", '"Answer"', "examples"]),
    ("citations", ["[number]", "If no source matches, return []", "most specific",
                   "single valid JSON array", "Example output: [1, 4, 6]"]),
    ("baseline_q", ["Please limit your answer to 200 words."]),
    ("testset_fresh", ["question-answer pairs", "following style/length", "retrieval-augmented generation (RAG)",
                       '".jsonl" format', "focusing on knowledge published after", "----- Example .jsonl format ----"]),
])
def test_prompts_keep_the_papers_wording_and_output_contract(name: str, phrases: list[str]) -> None:
    text = load_prompt(name).template
    for phrase in phrases:
        assert phrase in text, f"{name} lost {phrase!r}"


def test_the_fake_models_recognize_every_prompt_file() -> None:
    for name in PROMPT_VARIABLES:
        text = load_prompt(name).template
        assert MARKERS[name] in text
        assert prompt_kind(text) == name


def test_draft_prompt_repeats_the_question_after_the_web_content() -> None:
    rendered = load_prompt("draft").render(question="Q?", web_content="[1] T")
    assert rendered.splitlines()[-1] == "Q?"
    assert rendered.index("User question: Q?") < rendered.index("[1] T")


@pytest.mark.parametrize(("text", "problem"), [
    ("Return {{question}} and {{query_range}} and {{extra}}", "unknown"),
    ("Only {{question}}", "missing"),
    ("Broken {{question} {{query_range}}", "malformed"),
    ("Broken {{question}} {{query_range}} }}", "malformed"),
])
def test_bad_templates_are_rejected_at_load(text: str, problem: str) -> None:
    with pytest.raises(PromptError, match=problem):
        prompt_from_text("query_plan", text)


def test_unknown_prompt_name_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(PromptError, match="unknown prompt"):
        prompt_from_text("nope", "x")
    with pytest.raises(PromptError, match="no file"):
        load_prompt("draft", tmp_path)


def test_render_requires_every_variable_and_no_other() -> None:
    prompt = load_prompt("citations")
    with pytest.raises(PromptError, match="missing"):
        prompt.render(answer="a")
    with pytest.raises(PromptError, match="unknown"):
        prompt.render(answer="a", web_content="w", question="q")
    with pytest.raises(PromptError, match="not str"):
        prompt.render(answer="a", web_content=3)  # type: ignore[arg-type]


def test_render_is_one_pass_so_values_cannot_inject_placeholders() -> None:
    prompt = load_prompt("draft")
    out = prompt.render(question="What is {{web_content}}?", web_content="page says {{question}}")
    assert "What is {{web_content}}?" in out
    assert "page says {{question}}" in out


def test_hash_follows_content(tmp_path: Path) -> None:
    for name in PROMPT_VARIABLES:
        (tmp_path / f"{name}.txt").write_text(prompts_folder().joinpath(f"{name}.txt").read_text(encoding="utf-8"))
    same = PromptSet.load(tmp_path)
    assert same.hashes() == PromptSet.load().hashes()
    (tmp_path / "refine.txt").write_text("Please revise your answer like these:\n{{examples}}\n")
    changed = PromptSet.load(tmp_path)
    assert changed["refine"].hash != same["refine"].hash
    assert changed["draft"].hash == same["draft"].hash


def test_render_sources_numbers_sources_with_title_url_preview_and_sections_in_order() -> None:
    sources = [
        SourceDoc(1, "https://a.example/x", "Title A", "preview a", (
            SourceSection("a1", ("Guide", "Install"), "Run the installer."),
            SourceSection("a2", ("Guide", "Uninstall"), "Remove it."),
        )),
        SourceDoc(3, "https://b.example/y", "Title B", "", (SourceSection("b1", (), "Loose text."),)),
    ]
    text = render_sources(sources)
    assert text.startswith("[1] Title A\nURL: https://a.example/x\nPreview: preview a\n## Guide > Install\n")
    assert text.index("Install") < text.index("Uninstall")
    assert "\n\n[3] Title B\nURL: https://b.example/y\nLoose text." in text
    assert render_sources([]) == "(none)"


def test_other_blocks() -> None:
    cands = [UrlCandidate("https://a.example/", "A", "first\nline"), UrlCandidate("https://b.example/", "B", "")]
    assert render_search_results(cands) == ("URL: https://a.example/\nTitle: A\nPreview: first\nline\n\n"
                                            "URL: https://b.example/\nTitle: B\nPreview: ")
    previews = [SectionPreview("s0", "Intro", "Intro: hello"), SectionPreview("s1", "Usage", "how to use it")]
    assert render_section_previews(previews) == "[0] Intro: hello\n[1] Usage: how to use it"
    assert render_page_overview(PageOverview("https://a.example/", "A", "snip")) == "A (https://a.example/)\nsnip"
    assert render_examples([FewShotExample("Q1", "A1"), FewShotExample("Q2", "A2")]) == (
        "Question: Q1\nAnswer: A1\n\nQuestion: Q2\nAnswer: A2")
    with pytest.raises(PromptError):
        render_examples([])
    assert query_range(2) == "1-2" and query_range(1) == "1"
