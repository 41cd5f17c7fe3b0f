"""Whether a prompt fits a model's window, with the reply's tokens reserved.

A model reads ``models.context_tokens`` tokens (prompt and reply together). Every prompt that carries page
text is checked before it is sent: its estimated tokens, plus the chat template's own, plus the tokens kept
for the reply (the role's ``models.*_max_tokens``, else :data:`DEFAULT_REPLY_TOKENS`) must fit.

Tokens are estimated without the model's tokenizer (a hosted model's is not public, and asking a server to
count costs a call): :func:`estimate_tokens` counts each digit, punctuation mark, line break and non-ASCII
character as one token and each run of letters as one token per :data:`LETTERS_PER_TOKEN` letters, begun.
Subword tokenizers merge more than that, so the estimate errs on the side of fitting;
``bench/bench_token_counts.py`` measures it against Gemma 3's tokenizer (the llama.cpp server's
``/extras/tokenize``) on real pages and prompts and prints the margin. When a provider still answers that a
prompt is too long (``ContextLengthError``), the caller retries once with a smaller split.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from hifirag_core.types import SourceDoc, SourceSection

# Letters a token covers at least, in the estimate (Gemma 3, GPT and Gemini tokenizers cover more).
LETTERS_PER_TOKEN = 4
# The chat template's tokens per turn (Gemma's "<start_of_turn>user\n ... <end_of_turn>\n" is 5; room to spare).
TURN_OVERHEAD_TOKENS = 16
# Kept for a reply when the role sets no output ceiling.
DEFAULT_REPLY_TOKENS = 1024
# Kept in the draft's window for the refine pass that follows it in the same conversation: its instruction with
# the few-shot examples (the project's sets estimate at 441 and 590 tokens); the draft's reply and the refine
# reply are kept besides.
REFINE_ROOM_TOKENS = 1024
# When a provider refuses a prompt as too long without saying by how much, the retry sends this share.
RETRY_SHARE = 0.5

# a run of letters; a line break; any other visible character; a space before a digit or a mark (tokenizers
# that split digits one by one cannot join it to them)
_PIECES = re.compile(r"[A-Za-z]+|\n|[^\sA-Za-z]| (?=[^\sA-Za-z])")


def estimate_tokens(text: str) -> int:
    """An estimate of ``text``'s tokens that errs high (see the module docstring)."""
    total = 0
    for piece in _PIECES.findall(text):
        total += math.ceil(len(piece) / LETTERS_PER_TOKEN) if piece[0].isascii() and piece[0].isalpha() else 1
    return total


@dataclass(frozen=True)
class PromptWindow:
    """One model's window: ``context_tokens`` in all, ``reply_tokens`` of them kept for the reply."""

    context_tokens: int
    reply_tokens: int
    reserved_for: str = "the reply"

    @property
    def prompt_tokens(self) -> int:
        """The most a prompt may take (the template's tokens included)."""
        return max(1, self.context_tokens - self.reply_tokens)

    def need(self, *turns: str) -> int:
        """The estimated tokens of a conversation of ``turns``."""
        return sum(estimate_tokens(t) + TURN_OVERHEAD_TOKENS for t in turns)

    def fits(self, *turns: str) -> bool:
        return self.need(*turns) <= self.prompt_tokens

    def describe(self, need: int) -> str:
        """Why a prompt of ``need`` tokens was split or trimmed, for a row's note."""
        return (f"about {need:,} prompt tokens; the window is {self.context_tokens:,} with {self.reply_tokens:,} "
                f"kept for {self.reserved_for}")


def retry_share(tokens: int | None, limit: int | None, reply_tokens: int) -> float:
    """The share of a refused prompt's page text a retry sends: what the provider's own count says fits (with a
    tenth to spare), else :data:`RETRY_SHARE`."""
    if tokens and limit and tokens > 0:
        return max(0.1, min(RETRY_SHARE, 0.9 * (limit - reply_tokens) / tokens))
    return RETRY_SHARE


# --- fitting what a prompt carries to the window ----------------------------------------------------


def balanced_batches(weights: list[int], capacity: int) -> list[list[int]]:
    """Consecutive index batches of about equal weight, each at most ``capacity`` (an item heavier than that
    goes alone): as many as the total weight needs, more only where items do not divide evenly."""
    if not weights:
        return []
    target = sum(weights) / max(1, -(-sum(weights) // max(1, capacity)))
    batches: list[list[int]] = []
    current: list[int] = []
    load = done = 0
    for i, w in enumerate(weights):
        # a new batch when this item would overflow, or when most of it lies past the next even boundary
        if current and (load + w > capacity or done + w / 2 > target * (len(batches) + 1)):
            batches.append(current)
            current, load = [], 0
        current.append(i)
        load += w
        done += w
    batches.append(current)
    return batches


def split_in(batch: list[int], share: float) -> list[list[int]]:
    """``batch`` cut into consecutive parts of about ``share`` of it each (at least two)."""
    parts = min(len(batch), max(2, -(-1 // share) if share > 0 else 2))
    size = -(-len(batch) // int(parts))
    return [batch[i:i + size] for i in range(0, len(batch), size)]


def trim_sources(sources: list[SourceDoc], need: Callable[[list[SourceDoc]], int],
                 budget: int) -> tuple[list[SourceDoc], int, int]:
    """``sources`` with their lowest-placed sections left out until ``need(sources) <= budget``: each page's last
    section first, the last page's before the first's (the reverse of the order the writer's context is filled
    in); the one section left is cut short if it alone is too long. Every source keeps its number. Returns the
    sources, the sections left out and the sections cut."""
    docs = [list(d.sections) for d in sources]

    def build() -> list[SourceDoc]:
        return [SourceDoc(d.index, d.url, d.title, d.preview, tuple(secs), published=d.published)
                for d, secs in zip(sources, docs, strict=True)]

    dropped = cut = 0
    current = build()
    while need(current) > budget:
        left = [(len(secs) - 1, j) for j, secs in enumerate(docs) if secs]
        if not left:
            break
        pos, j = max(left)
        if sum(len(secs) for secs in docs) > 1:
            docs[j].pop()
            dropped += 1
        else:  # one section left: keep the share of its text that fits
            section = docs[j][pos]
            share = budget / max(1, need(current))
            keep = int(len(section.text) * share * 0.9)
            if keep < 1:
                docs[j].pop()
                dropped += 1
            else:
                docs[j][pos] = SourceSection(section.section_id, section.heading_path, section.text[:keep],
                                             section.score)
                cut += 1
        current = build()
    return current, dropped, cut


def fitted_count(window: PromptWindow | None, prompt: Callable[[int], str], n: int,
                 what: str) -> tuple[int, str | None]:
    """How many of ``n`` items (the first ones) ``prompt(count)`` can carry within ``window``, and a note that says
    what was left out (None when all fit)."""
    if window is None or window.fits(prompt(n)):
        return n, None
    need = window.need(prompt(n))
    lo, hi = 0, n  # the most items that fit: prompt(lo) fits or lo == 0, prompt(hi) does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if window.fits(prompt(mid)) else (lo, mid)
    count = max(1, lo)
    return count, f"{n - count} of {n} {what} left out to fit the window ({window.describe(need)})"


def fit_sources(window: PromptWindow | None, turns: Callable[[list[SourceDoc]], list[str]],
                sources: list[SourceDoc], *, share: float | None = None,
                refused: str | None = None) -> tuple[list[SourceDoc], str | None]:
    """``sources`` trimmed (:func:`trim_sources`) until the conversation ``turns(sources)`` fits ``window``, or
    (``share``, after the provider refused the prompt) until their text is about ``share`` of what it was; with a
    note that says what was left out (None when nothing was)."""
    if window is None:
        return sources, None
    need = window.need(*turns(sources))
    if share is None and need <= window.prompt_tokens:
        return sources, None

    def page_tokens(docs: list[SourceDoc]) -> int:
        return window.need(*turns(docs))

    budget = window.prompt_tokens if share is None else int(need * share)
    trimmed, dropped, cut = trim_sources(sources, page_tokens, budget)
    total = sum(len(d.sections) for d in sources)
    why = (f"the model refused the prompt as too long ({refused})" if share is not None
           else f"to fit the window ({window.describe(need)})")
    note = f"{dropped} of {total} sections left out" + (", the last one cut short" if cut else "") + f" {why}"
    return trimmed, note
