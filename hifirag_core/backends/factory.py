"""Builds the real backends from the configuration: one function per external role.

Every builder takes the run's :class:`~hifirag_core.limits.RunGuards` (rate limits, retries and
the shared budget; build one per run with :func:`build_guards`) and reads secrets from the
environment (or from ``env``, for tests). A selected backend whose key is missing raises
``MissingSecretError`` naming the variable; :func:`check_secrets` reports every missing one at
once, before a run starts. The offline and local backends are built by the runtime, not here.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Mapping
from datetime import date
from pathlib import Path
from typing import Literal

from hifirag_core import backend_registry as registry
from hifirag_core.backend_registry import Backend
from hifirag_core.config import ConfigError, PipelineConfig, search_providers
from hifirag_core.errors import MissingSecretError
from hifirag_core.limits import Budget, Clock, Ledger, RunGuards, Sleep
from hifirag_core.llm.filter_model import LLMFilterModel
from hifirag_core.llm.job import Scorer, Support
from hifirag_core.llm.prompts import PIPELINE_PROMPTS, RESEARCH_PROMPTS, PromptSet
from hifirag_core.llm.window import DEFAULT_REPLY_TOKENS, PromptWindow
from hifirag_core.llm.writer_model import LLMWriterModel
from hifirag_core.secrets import (
    REDDIT_USER_AGENT_ENV,
    SECRETS,
    get_secret,
    install_log_redaction,
    optional_secret,
)
from hifirag_core.types import ChatModel, Fetcher, SearchBackend
from hifirag_core.web.reddit import RedditSource

Role = Literal["filter", "writer"]
logger = logging.getLogger(__name__)


def build_guards(cfg: PipelineConfig, *, budget: Budget | None = None, clock: Clock = time.monotonic,
                 sleep: Sleep = time.sleep, rng: random.Random | None = None, ledger: Ledger | None = None) -> RunGuards:
    """The run's rate limiters, retry policy and budget (share one instance across threads; a
    ``ledger`` counts the rpm and the spending across processes)."""
    return RunGuards(cfg.limits, budget=budget, clock=clock, sleep=sleep, rng=rng, ledger=ledger)


def _llm_backend(cfg: PipelineConfig, role: Role) -> str:
    return cfg.backends.filter_llm if role == "filter" else cfg.backends.writer_llm


def openai_base_url(cfg: PipelineConfig, role: Role) -> str | None:
    """The OpenAI-compatible endpoint of a role: its own setting, else the shared one."""
    per_role = cfg.models.openai_filter_base_url if role == "filter" else cfg.models.openai_writer_base_url
    return per_role or cfg.models.openai_base_url


def required_secrets(cfg: PipelineConfig) -> list[str]:
    """The secret names (keys of ``SECRETS``) the configured real backends need."""
    needed: list[str] = []
    for role in ("filter", "writer"):
        backend = _llm_backend(cfg, role)  # type: ignore[arg-type]
        if backend == "gemini":
            needed.append("gemini_api_key")
        elif backend == "openai" and not cfg.models.openai_api_key_optional:
            needed.append("openai_api_key")
    rows = [registry.backend("search", p) for p in search_providers(cfg)] + [registry.backend("fetch", cfg.backends.fetch)]
    for row in rows:
        needed += [k.name for k in row.keys]
    if cfg.backends.reddit == "praw":
        needed += ["reddit_client_id", "reddit_client_secret"]
    return list(dict.fromkeys(needed))


def check_secrets(cfg: PipelineConfig, env: Mapping[str, str] | None = None, *, today: date | None = None) -> None:
    """Raise ``MissingSecretError`` listing every variable the configuration needs but lacks (and a
    ``ConfigError`` for a search service that has ended); warn about one that is closing."""
    for notice in search_notices(cfg, today=today):
        logger.warning(notice)
    missing = [SECRETS[n] for n in required_secrets(cfg) if optional_secret(n, env) is None]
    if missing:
        lines = "; ".join(f"{' or '.join(s.env)} ({s.purpose})" for s in missing)
        raise MissingSecretError(f"the selected backends need environment variables that are not set: {lines}")


def prompt_window(cfg: PipelineConfig, role: Role) -> PromptWindow:
    """The role's model's window (``models.context_tokens``) with its reply's tokens kept (``models.*_max_tokens``,
    else ``DEFAULT_REPLY_TOKENS``)."""
    model = cfg.models.filter if role == "filter" else cfg.models.writer
    reply = cfg.models.filter_max_tokens if role == "filter" else cfg.models.writer_max_tokens
    return PromptWindow(cfg.models.context_tokens.get(model, cfg.models.default_context_tokens),
                        reply if reply is not None else DEFAULT_REPLY_TOKENS)


def build_chat_model(role: Role, cfg: PipelineConfig, *, guards: RunGuards | None = None,
                     env: Mapping[str, str] | None = None) -> ChatModel:
    """The transport for one model role: ``gemini`` or ``openai`` per ``backends.<role>_llm``."""
    install_log_redaction()
    guards = guards or build_guards(cfg)
    backend = _llm_backend(cfg, role)
    model = cfg.models.filter if role == "filter" else cfg.models.writer
    max_tokens = cfg.models.filter_max_tokens if role == "filter" else cfg.models.writer_max_tokens
    price = cfg.models.prices.get(model)
    stream = role == "writer" and cfg.limits.stream_writer  # the draft and refinement, as they are written
    if backend == "gemini":
        from hifirag_core.backends.gemini import GeminiChatModel

        return GeminiChatModel(model=model, role=role, api_key=get_secret("gemini_api_key", env),
                               guard=guards.guard("gemini", model), timeout_s=cfg.limits.llm_timeout_s,
                               price=price, base_url=cfg.models.gemini_base_url, max_tokens=max_tokens,
                               temperature=cfg.models.temperature, stream=stream)
    if backend == "openai":
        from hifirag_core.backends.openai_compat import OpenAIChatModel

        key = (optional_secret("openai_api_key", env) if cfg.models.openai_api_key_optional
               else get_secret("openai_api_key", env))
        return OpenAIChatModel(model=model, role=role, api_key=key, guard=guards.guard("openai", model),
                               timeout_s=cfg.limits.llm_timeout_s, price=price,
                               base_url=openai_base_url(cfg, role),
                               response_format=cfg.models.openai_response_format, max_tokens=max_tokens,
                               temperature=cfg.models.temperature, stream=stream)
    raise ValueError(f"backends.{role}_llm={backend!r} is not a real LLM backend (gemini or openai)")


def build_filter_model(cfg: PipelineConfig, *, guards: RunGuards | None = None, prompts: PromptSet | None = None,
                       scorer: Scorer | None = None, support: Support | None = None,
                       env: Mapping[str, str] | None = None) -> LLMFilterModel:
    """The cheap model's decisions (A.1, A.2, A.3, A.5) with the configured fallbacks.

    ``scorer(text, candidates) -> similarities`` drives the ``top_k`` fallback; without one it
    keeps the first k candidates in their input order. ``support(sentences, sources)`` picks each
    answer sentence's source among those the model cited.
    """
    chat = build_chat_model("filter", cfg, guards=guards, env=env)
    return LLMFilterModel(chat, prompts or _prompts(cfg), url_fallback=cfg.url_filter.fallback,
                          section_fallback=cfg.section_rank.fallback, citation_fallback=cfg.citations.fallback,
                          scorer=scorer, support=support, url_fallback_k=cfg.url_filter.max_urls,
                          section_fallback_k=cfg.section_rank.max_sections_per_page,
                          window=prompt_window(cfg, "filter"))


def build_writer_model(cfg: PipelineConfig, *, guards: RunGuards | None = None, prompts: PromptSet | None = None,
                       env: Mapping[str, str] | None = None) -> LLMWriterModel:
    """The strong model's two passes (A.4), or Baseline Q when ``generation.prompt=raw_limit``."""
    chat = build_chat_model("writer", cfg, guards=guards, env=env)
    return LLMWriterModel(chat, prompts or _prompts(cfg), draft_prompt=cfg.generation.prompt,
                          answerability=cfg.answerability.abstain or cfg.answerability.show,
                          window=prompt_window(cfg, "writer"))


def _prompts(cfg: PipelineConfig) -> PromptSet:
    names = (*PIPELINE_PROMPTS, *RESEARCH_PROMPTS) if cfg.research.enabled else PIPELINE_PROMPTS
    return PromptSet.load(Path(cfg.prompts.dir) if cfg.prompts.dir else None, names)


def search_row(name: str, *, today: date | None = None) -> Backend:
    """The search backend's row; choosing one whose service has ended is a ``ConfigError`` naming the
    alternatives (``today`` is injectable for tests)."""
    row = registry.backend("search", name)
    gone = registry.sunset_error(row, today or date.today())
    if gone:
        raise ConfigError(gone)
    return row


def search_notices(cfg: PipelineConfig, *, today: date | None = None) -> list[str]:
    """What a run should say at its start about its search providers (a service closing soon)."""
    rows = [search_row(name, today=today) for name in search_providers(cfg)]
    return [f"search provider {row.name}: {row.notice}" for row in rows if row.notice]


def build_search_provider(name: str, cfg: PipelineConfig, *, guards: RunGuards | None = None,
                          env: Mapping[str, str] | None = None, today: date | None = None) -> SearchBackend:
    """The search provider ``name`` (a row of the backends table), built from the config."""
    install_log_redaction()
    row = search_row(name, today=today)
    return row.load()(cfg, guards or build_guards(cfg), env)


def build_search_backend(cfg: PipelineConfig, *, guards: RunGuards | None = None,
                         env: Mapping[str, str] | None = None, today: date | None = None,
                         provider: str | None = None) -> SearchBackend:
    """``provider``, else the provider of ``backends.search`` (any row of the backends table but those
    the runtime builds: ``local`` and ``folder``)."""
    return build_search_provider(provider or cfg.backends.search, cfg, guards=guards, env=env, today=today)


def build_fetcher(cfg: PipelineConfig, *, guards: RunGuards | None = None, env: Mapping[str, str] | None = None,
                  allow_loopback: bool = False) -> Fetcher:
    """The fetcher of ``backends.fetch``: ``scrapingdog`` (scrape API) or ``http`` (direct, SSRF-guarded).

    ``allow_loopback`` lets the direct fetcher reach 127.0.0.1 (tests and local benchmarks only).
    """
    install_log_redaction()
    row = registry.backend("fetch", cfg.backends.fetch)
    return row.load()(cfg, guards or build_guards(cfg), env, allow_loopback=allow_loopback)


def build_reddit_source(cfg: PipelineConfig, *, guards: RunGuards | None = None,
                        env: Mapping[str, str] | None = None) -> RedditSource:
    """The praw adapter when ``backends.reddit=praw``."""
    install_log_redaction()
    guards = guards or build_guards(cfg)
    if cfg.backends.reddit != "praw":
        raise ValueError(f"backends.reddit={cfg.backends.reddit!r} is not a real Reddit source (praw)")
    from hifirag_core.backends.reddit_praw import PrawRedditSource

    environ = os.environ if env is None else env
    user_agent = environ.get(REDDIT_USER_AGENT_ENV, "").strip() or cfg.reddit.user_agent
    return PrawRedditSource(client_id=get_secret("reddit_client_id", env),
                            client_secret=get_secret("reddit_client_secret", env), user_agent=user_agent,
                            guard=guards.guard("reddit"), timeout_s=cfg.limits.reddit_timeout_s,
                            oauth_url=cfg.backends.reddit_oauth_url, reddit_url=cfg.backends.reddit_url,
                            comment_sort=cfg.reddit.comment_sort, replace_more_limit=cfg.reddit.replace_more_limit)
