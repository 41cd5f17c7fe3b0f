"""How much web content the writer is sent.

The paper sends the writer every section the filters kept. Its bound is the model itself: the
content must fit the model's context window, and the run must be able to pay for it. So with a
model writer the content is bounded in tokens, by the smallest window of the models that read it
(the writer's two passes, and the filter model's citation check), less ``generation.reserve_tokens``
for the prompts' own text and the replies, and by what is left of the run's budget (the content is
sent three times: draft, refine, citations). The offline writer keeps its own cap in characters
(``generation.max_context_chars``), and so does any writer under ``limits.caps=on``.

Tokens are estimated from characters: English prose averages about four characters per token with
the Gemini, GPT and Gemma tokenizers; :data:`CHARS_PER_TOKEN` takes three, so an estimate errs on
the side of fitting.
"""

from __future__ import annotations

from dataclasses import dataclass

from hifirag_core.config import PipelineConfig, caps_apply
from hifirag_core.limits import Budget

CHARS_PER_TOKEN = 3.0
# The fewest content tokens a bound leaves: a few sections, so a nearly spent budget still answers.
MIN_CONTENT_TOKENS = 256


@dataclass(frozen=True)
class ContextLimit:
    """The bound on the writer's web content, and how content over it is cut."""

    chars: int
    proportional: bool  # True: every section trimmed alike (the offline cap); False: best sections kept whole
    why: str


def context_limit(cfg: PipelineConfig, budget: Budget | None = None) -> ContextLimit:
    """The bound for this configuration and what is left of the run's ``budget``."""
    gen = cfg.generation
    if caps_apply(cfg, "writer"):
        return ContextLimit(gen.max_context_chars, True, f"generation.max_context_chars={gen.max_context_chars}")
    readers = [cfg.models.writer]
    if cfg.citations.enabled and cfg.backends.filter_llm != "offline":
        readers.append(cfg.models.filter)
    windows = {m: cfg.models.context_tokens.get(m, cfg.models.default_context_tokens) for m in readers}
    model = min(windows, key=lambda m: windows[m])
    tokens = windows[model] - gen.reserve_tokens
    why = f"{model}'s window of {windows[model]:,} tokens less {gen.reserve_tokens:,} reserved"
    affordable = _affordable_tokens(cfg, budget)
    if affordable is not None and affordable < tokens:
        tokens, why = affordable, f"what is left of the run's budget ({affordable:,} content tokens)"
    tokens = max(MIN_CONTENT_TOKENS, tokens)
    return ContextLimit(int(tokens * CHARS_PER_TOKEN), False, why)


def _affordable_tokens(cfg: PipelineConfig, budget: Budget | None) -> int | None:
    """Content tokens the rest of the budget pays for, sent to the draft, refine and citation calls."""
    if budget is None:
        return None
    readers = 2 + (cfg.citations.enabled and cfg.backends.filter_llm != "offline")
    spent_usd, spent_tokens = budget.spent()  # the run's, over every process when they share a ledger
    bounds = []
    if budget.limit_tokens is not None:
        bounds.append((budget.limit_tokens - spent_tokens) // readers)
    if budget.limit_usd is not None:
        prices = [cfg.models.prices.get(cfg.models.writer)] * 2
        if readers == 3:
            prices.append(cfg.models.prices.get(cfg.models.filter))
        if all(p is not None for p in prices):
            per_token = sum(p.input for p in prices if p is not None) / 1_000_000
            bounds.append(int(round((budget.limit_usd - spent_usd) / per_token, 3)) if per_token > 0 else None)
    known = [b for b in bounds if b is not None]
    return max(0, min(known)) if known else None
