"""Deterministic, plausible replies to the paper's prompts, shared by the Gemini and OpenAI fakes.

The fake recognizes which prompt it received from a phrase of each prompt file (the test suite
checks that every file still contains its phrase) and answers the way a model would: a JSON list
of queries (A.1), the URLs whose title and preview share words with the question (A.2, about a
third dropped, as the paper reports), the section labels that share words with the question,
best first (A.3), a short paragraph from the best-matching source sentences (A.4 draft), that
answer shortened to the examples' length (A.4 refine), and the source numbers whose text shares
words with the answer (A.5).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

from hifirag_core.text import content_terms, split_sentences

# One phrase per prompt file, as it appears in prompts/<name>.txt (looked for in this order: the follow-up
# prompt shares the query plan's opening, so its own phrase comes first).
MARKERS: dict[str, str] = {
    "sufficiency": "Check whether the web content found so far is enough to answer",
    "followup": "find what is still missing to answer this question",
    "restate": "Rewrite the follow-up question as one question that can be understood without the conversation",
    "query_plan": "Create efficient and concise Google search queries",
    "url_filter": "Which of the URLs in the list below would be helpful",
    "section_rank": "determine which sections would be helpful for further reading",
    "draft": "You are a helpful and knowledgeable assistant.",
    "refine": "Revise your answer so that its style and length match",
    "citations": "identify which sources (marked by [number]) directly support",
    "baseline_q": "Please limit your answer to 200 words.",
    # Never sent alone: the draft prompt carries it at its end when the answer may abstain.
    "answerability": "add one last line that says whether the web content above answers the question",
    "testset_fresh": "question-answer pairs, in the following style/length",
    "grounded_search": "Search the web for pages that answer the following query",
    # Never sent alone: steering's additions ride at the end of the prompts above (after their markers).
    "query_language": "Write the search queries in",
    "answer_language": "Write the answer in",
    "answer_short": "Keep the answer short",
    "answer_long": "Give a longer answer, organized in sections",
    "source_dates": "Each source shows its publication date",
}
ANSWERABILITY_MARKER = MARKERS["answerability"]
JSON_KINDS = frozenset({"query_plan", "url_filter", "section_rank", "citations", "sufficiency", "followup",
                        "restate"})
FILTER_KINDS = JSON_KINDS
WRITER_KINDS = frozenset({"draft", "refine", "baseline_q"})


def prompt_kind(text: str) -> str:
    """Which prompt ``text`` is (``unknown`` when none matches)."""
    for kind, marker in MARKERS.items():
        if marker in text:
            return kind
    return "unknown"


def _overlap(query_terms: set[str], text: str) -> int:
    return len(query_terms & set(content_terms(text)))


@dataclass
class BrainReply:
    """The reply text and how it was made."""

    kind: str
    text: str
    is_json: bool


def reply(turns: list[tuple[str, str]]) -> BrainReply:
    """Answer the last user turn of a conversation (``(role, text)`` pairs; roles user/model)."""
    last_user = next((t for r, t in reversed(turns) if r == "user"), "")
    kind = prompt_kind(last_user)
    handler = _HANDLERS.get(kind, _unknown)
    return BrainReply(kind, handler(last_user, turns), kind in JSON_KINDS)


def _between(text: str, start: str, end: str) -> str:
    i = text.find(start)
    if i < 0:
        return ""
    i += len(start)
    j = text.find(end, i)
    return text[i : j if j >= 0 else len(text)].strip()


def _query_plan(prompt: str, turns: list[tuple[str, str]]) -> str:
    question = _between(prompt, "question:\n", "\nReturn a JSON list")
    m = re.search(r"containing the (\d+)(?:-(\d+))? best", prompt)
    wanted = int(m.group(2) or m.group(1)) if m else 2
    terms = list(dict.fromkeys(content_terms(question)))
    queries = [" ".join(terms[:6]) or question]
    if len(terms) > 2:
        queries.append(" ".join(terms[:3]) + " guide")
    return json.dumps(queries[:wanted])


def _url_filter(prompt: str, turns: list[tuple[str, str]]) -> str:
    question = _between(prompt, 'to answer\n"', '"?')
    terms = set(content_terms(question))
    blocks = re.findall(r"URL: (\S+)\nTitle: (.*)\nPreview: (.*)", prompt)
    scored = [(_overlap(terms, f"{title} {preview} {url}"), i, url) for i, (url, title, preview) in enumerate(blocks)]
    keep = max(1, math.ceil(len(blocks) * 2 / 3)) if blocks else 0
    relevant = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))
    chosen = relevant[:keep] if relevant else scored[:keep]
    return json.dumps([url for _, _, url in chosen])


def _section_rank(prompt: str, turns: list[tuple[str, str]]) -> str:
    question = _between(prompt, "\nanswer ", " without additional searching")
    terms = set(content_terms(question))
    previews = re.findall(r"^\[(\d+)\] (.*)$", _between(prompt, "Section previews in the page:", "\nUseful chunks:"),
                          re.MULTILINE)
    scored = sorted(((_overlap(terms, text), int(i)) for i, text in previews), key=lambda s: (-s[0], s[1]))
    keep = max(1, math.ceil(len(previews) * 0.4)) if previews else 0
    chosen = [i for score, i in scored if score > 0][:keep] or [i for _, i in scored[:1]]
    return json.dumps(chosen)


def _source_blocks(web_content: str) -> list[tuple[int, str]]:
    parts = re.split(r"(?m)^\[(\d+)\] ", web_content)
    return [(int(parts[i]), parts[i + 1]) for i in range(1, len(parts) - 1, 2)]


def _draft(prompt: str, turns: list[tuple[str, str]]) -> str:
    asked = ANSWERABILITY_MARKER in prompt
    if asked:  # the instruction follows the web content: read the prompt without it
        prompt = prompt[: prompt.index(ANSWERABILITY_MARKER)].rsplit("\n", 1)[0]
    answer, overlap = _draft_answer(prompt)
    if not asked:
        return answer
    # The fake's verdict follows its own evidence: a sentence sharing two of the question's words
    # answers it; one shared word ("make" in "How do you make paella?") is a coincidence.
    if overlap < 2:
        return f"{answer}\nANSWERABILITY: not_found - no source sentence is about the question"
    return f"{answer}\n**Answerability:** answered - the sources state it"


def _draft_answer(prompt: str) -> tuple[str, int]:
    question = _between(prompt, "User question: ", "\n-----------")
    terms = set(content_terms(question))
    web = _between(prompt, "may help you:", "\n" + question) if question else ""
    sentences = []
    for _, block in _source_blocks(web):
        for line in block.splitlines()[1:]:  # the first line is the source's title
            if line.startswith(("URL:", "Preview:", "## ")):
                continue
            sentences.extend(split_sentences(line))
    ranked = sorted(((_overlap(terms, s), i, s) for i, s in enumerate(sentences) if len(s) > 20),
                    key=lambda t: (-t[0], t[1]))
    best = [s for score, _, s in ranked[:3] if score > 0]
    if not best:
        return (f"There is no specific information available, but in general {question.rstrip('?').lower()} "
                "depends on the context."), 0
    return " ".join(best), ranked[0][0]


def _refine(prompt: str, turns: list[tuple[str, str]]) -> str:
    previous = next((t for r, t in reversed(turns) if r == "model"), "")
    answers = re.findall(r"^Answer: (.*)$", prompt, re.MULTILINE)
    target = max(8, round(sum(len(a.split()) for a in answers) / len(answers))) if answers else 40
    words = previous.split()
    text = " ".join(words[:target])
    return text if text.endswith((".", "!", "?")) else text.rstrip(",;:") + "."


def _citations(prompt: str, turns: list[tuple[str, str]]) -> str:
    answer = _between(prompt, "Answer: ", "\nSources:")
    terms = set(content_terms(answer))
    sources = _source_blocks(prompt.split("\nSources:", 1)[-1])
    cited = [n for n, block in sources if _overlap(terms, block) >= 2]
    return json.dumps(cited)


def _sufficiency(prompt: str, turns: list[tuple[str, str]]) -> str:
    """Ours: a part of the question (split at ", and") is covered when a kept section's line shares two of
    its words; the verdict follows."""
    question = _between(prompt, "enough to answer this question:\n", "\n")
    lines = [line for line in _between(prompt, "\n<web_text>\n", "\n</web_text>").splitlines() if line.startswith("- ")]
    parts = [p.strip(" ?.") for p in re.split(r",?\s+and\s+(?=what|how|why|which|who|when|where|is|does|do)", question)
             if p.strip(" ?.")]
    covered = [p for p in parts if any(_overlap(set(content_terms(p)), line) >= 2 for line in lines)]
    missing = [p for p in parts if p not in covered]
    verdict = "sufficient" if not missing else ("partial" if covered else "not_found")
    return json.dumps({"verdict": verdict, "covered": covered, "missing": missing})


def _followup(prompt: str, turns: list[tuple[str, str]]) -> str:
    """Ours: the missing parts themselves as queries, minus any searched before."""
    missing = [m.strip() for m in _between(prompt, "What is missing: ", "\n").split(";") if m.strip()]
    earlier = {e.strip().lower() for e in _between(prompt, "not to be repeated: ", "\n").split(";")}
    return json.dumps([m for m in missing if m.lower() not in earlier and m != "(nothing listed)"])


def _restate(prompt: str, turns: list[tuple[str, str]]) -> str:
    """Ours: the follow-up with the subject of the last earlier question named ("... (about: <it>)")."""
    follow_up = _between(prompt, "Their follow-up question:\n", "\n\nRewrite")
    earlier = [line.split(". ", 1)[-1] for line in _between(prompt, "oldest first:\n", "\n\n").splitlines()]
    return json.dumps({"question": f"{follow_up.rstrip('?')} (about: {earlier[-1].rstrip('?')})?" if earlier
                       else follow_up})


def _baseline(prompt: str, turns: list[tuple[str, str]]) -> str:
    question = prompt.split("200 words.", 1)[-1].strip()
    return f"In short: {question.rstrip('?')} is answered by the relevant documentation."


def _unknown(prompt: str, turns: list[tuple[str, str]]) -> str:
    return "I am a fake model and did not recognize this prompt."


_HANDLERS = {
    "query_plan": _query_plan,
    "url_filter": _url_filter,
    "section_rank": _section_rank,
    "draft": _draft,
    "refine": _refine,
    "citations": _citations,
    "baseline_q": _baseline,
    "sufficiency": _sufficiency,
    "followup": _followup,
    "restate": _restate,
}


def shaped(text: str, schema: dict | None) -> str:
    """A JSON-list reply as a schema of one object holding one list asks for it (``{"urls": [...]}``),
    the way constrained decoding shapes a real model's reply; anything else unchanged."""
    if not isinstance(schema, dict) or str(schema.get("type", "")).lower() != "object":
        return text
    properties = schema.get("properties") or {}
    lists = [k for k, v in properties.items() if str((v or {}).get("type", "")).lower() == "array"]
    if len(lists) != 1:
        return text
    try:
        return json.dumps({lists[0]: json.loads(text)})
    except json.JSONDecodeError:
        return text


def approx_tokens(text: str) -> int:
    """A stable token estimate (about 4/3 tokens per word)."""
    return max(1, round(len(text.split()) * 4 / 3))


def stream_pieces(text: str, words: int = 4) -> list[str]:
    """``text`` cut into the pieces a streaming model sends: ``words`` words each, whitespace kept, so that
    joining them gives ``text`` back."""
    tokens = re.findall(r"\s*\S+", text) or [text]
    pieces = ["".join(tokens[i:i + words]) for i in range(0, len(tokens), words)]
    pieces[-1] += text[len("".join(tokens)):]
    return pieces
