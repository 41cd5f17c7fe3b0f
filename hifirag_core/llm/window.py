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
from dataclasses import dataclass

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
