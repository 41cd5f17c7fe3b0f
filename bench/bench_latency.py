"""What one person waiting for one answer feels: the service's /run, one question at a time, through the
real clients against fakes whose latencies are drawn from distributions, before and after ``limits.overlap``.

The fakes (``tests/support/fakes``) serve the documentation corpus (FAQ pages excluded) as the web. Each call's
latency is drawn from a seeded lognormal per provider (figures and sources in ``bench/README.md``):

* Gemini 2.5 Flash (the filter model) and 2.5 Pro (the writer): time to first token, plus the reply's
  tokens (answer and thinking, as the fake's ``usageMetadata`` counts them) at a drawn tokens/s;
* Programmable Search: one draw per request; Scrapingdog's scrape API: one draw per page.

A streamed reply (``streamGenerateContent``, ``limits.stream_writer``) sends its first chunk at the drawn
first token and spreads the rest over the drawn token time. A call's draws are seeded by its content (the prompt, the query, the URL), so the same call takes the
same time in both modes whatever order it arrives in; a fake answers exactly its latency after the
request arrived, its own work included (``bench_backends.answer_after_latency``).

Both modes run in one invocation, each on a fresh data root (cold stage, page and vector caches) with
``hifirag serve`` (a Prefect server started here), ``--questions`` FAQ questions (``sample=N``) asked
one after another. Per question the client notes, from the POST:

* the first /run event;
* the first answer words: the first event that carries the opening words of the writer's draft or of the
  answer (today the answer's pieces after the last stage; with a streamed writer, the growing draft);
  the report says which it was;
* the whole answer: the last event.

Each is set against its critical path, computed from the calls the fakes served for that question (their
drawn latencies): the calls that cannot overlap, in the old ordering (searches one after another, every
fetch before any ranking) and in the new one (searches at once; each page's ranking right after its own
fetch), with fetches through ``min(PAGE_PARALLELISM, Scrapingdog's slots)`` and rankings through
``PAGE_PARALLELISM`` at a time; local work counts as zero. The first words' path ends at the call whose
text they are: the writer's first token when the draft streams, the last call (citations) otherwise.
It prints p50 and p95, and each stage's CPU seconds per question (``stage_runs.cpu_seconds``). Nothing
is asserted.

With ``--limits server`` (the default) the service counts rate limits and budgets on a Prefect server, as a
deployment does (every paid call takes its start there); ``--limits process`` lets it count them in memory.

    PYTHONPATH=. .venv/bin/python bench/bench_latency.py --questions 20 [--limits process]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import heapq
import json
import math
import os
import random
import re
import shutil
import statistics
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_backends import FAQ, CorpusWeb, corpus_base  # noqa: E402
from hifirag_core.config import PipelineConfig  # noqa: E402
from hifirag_core.corpus.sites import FAQ_PAGE_PATTERNS  # noqa: E402
from hifirag_core.pipeline.overlap import PAGE_PARALLELISM  # noqa: E402
from hifirag_core.pipeline.specs import STAGE_NAMES  # noqa: E402
from tests.support.fakes import llm_brain  # noqa: E402
from tests.support.fakes.server import FakeServer, Request, Response  # noqa: E402

OUT = ROOT / "bench" / "out" / "latency"
MODES = (("before", False), ("after", True))  # limits.overlap


@dataclass(frozen=True)
class Lognormal:
    """A lognormal by its median and the standard deviation of its log (sigma)."""

    median: float
    sigma: float

    def draw(self, rng: random.Random) -> float:
        return self.median * math.exp(rng.gauss(0.0, self.sigma))


@dataclass(frozen=True)
class ModelLatency:
    ttft: Lognormal  # seconds to the first token
    tokens_per_s: Lognormal  # output speed after it

    def draw(self, rng: random.Random, tokens: int) -> tuple[float, float]:
        """(time to first token, whole call) for a reply of ``tokens`` tokens."""
        first = self.ttft.draw(rng)
        return first, first + tokens / self.tokens_per_s.draw(rng)


# The figures and where each comes from: bench/README.md ("Latency figures").
MODELS = {
    "gemini-2.5-flash": ModelLatency(Lognormal(0.40, 0.25), Lognormal(270.0, 0.15)),
    "gemini-2.5-pro": ModelLatency(Lognormal(2.50, 0.35), Lognormal(150.0, 0.15)),
}
SEARCH = Lognormal(0.55, 0.30)  # Programmable Search, per request
SCRAPE = Lognormal(2.0, 0.50)  # Scrapingdog's scrape API, per page (no JavaScript rendering)
# Thinking tokens the fake reports per reply (its defaults are 40 and 10): the writer thinks before it drafts.
THINKING = {"gemini-2.5-pro": 600, "gemini-2.5-flash": 60}


@dataclass
class Call:
    """One request a fake served: what it was, when it came and what it was made to take."""

    provider: str  # gemini | google | scrapingdog
    kind: str  # the prompt kind, search, scrape
    at: float
    seconds: float
    first_token_s: float | None = None
    key: str = ""  # the page URL of a scrape, the prompt of a section ranking
    drawn: float = 0.0  # the latency drawn for it; ``seconds`` is what serving it took (more when the fake's
    #                     own work outran the draw: its BM25 or reply building, on a loaded machine)


class LatencyModel:
    """Makes each fake answer after a drawn latency, and keeps every call it served."""

    def __init__(self, seed: int):
        self.seed = seed
        self.calls: list[Call] = []
        self._lock = threading.Lock()

    def rng(self, *content: str) -> random.Random:
        digest = hashlib.sha256("\x00".join((str(self.seed), *content)).encode()).digest()
        return random.Random(int.from_bytes(digest[:8], "big"))

    def attach(self, fake: FakeServer, provider: str) -> None:
        route = fake.route
        fake.request_latency = lambda request: 0.0  # type: ignore[method-assign]

        def timed(request: Request) -> Response:
            response = route(request)
            call = self._call(provider, request, response)
            if response.events:  # a streamed reply: its first chunk at the first token, the rest spread to the end
                fake.sleep((call.first_token_s or 0.0) - (time.monotonic() - request.at))
                gap = (call.seconds - (call.first_token_s or 0.0)) / max(1, len(response.events) - 1)
                response.event_gap_s = max(response.event_gap_s, gap)
                served = time.monotonic() - request.at + response.event_gap_s * (len(response.events) - 1)
            else:
                fake.sleep(call.seconds - (time.monotonic() - request.at))
                served = time.monotonic() - request.at
            call.drawn, call.seconds = call.seconds, max(call.seconds, served)
            with self._lock:
                self.calls.append(call)
            return response

        fake.route = timed  # type: ignore[method-assign]

    def _call(self, provider: str, request: Request, response: Response) -> Call:
        if provider == "google":
            q = request.param("q") or ""
            return Call("google", "search", request.at, SEARCH.draw(self.rng("google", q, request.param("start") or "")))
        if provider == "scrapingdog":
            url = request.param("url") or request.param("query") or ""
            return Call("scrapingdog", "scrape", request.at, SCRAPE.draw(self.rng("scrape", url)), key=url)
        body = request.json() or {}
        users = [c for c in body.get("contents", []) if c.get("role", "user") == "user"]
        # the last user turn says what is asked (a refine request carries the draft's turns before it)
        prompt = "".join(p.get("text", "") for p in (users[-1].get("parts", []) if users else []))
        kind = llm_brain.prompt_kind(prompt)
        model = request.path.rsplit("/", 1)[-1].split(":", 1)[0]
        last = json.loads(response.events[-1].decode().removeprefix("data: ")) if response.events else response.body
        usage = (last if isinstance(last, dict) else {}).get("usageMetadata", {})
        tokens = int(usage.get("candidatesTokenCount", 0)) + int(usage.get("thoughtsTokenCount", 0))
        first, whole = MODELS[model].draw(self.rng("gemini", model, prompt), tokens)
        # a ranking's page is named in its prompt, "Title (URL)": kept to pair it with that page's fetch
        return Call("gemini", kind, request.at, whole, first, key=prompt if kind == "section_rank" else "")

    def between(self, start: float, end: float) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if start <= c.at <= end]


# --- critical paths -------------------------------------------------------------------------------


def makespan(durations: list[float], slots: int, ready: list[float] | None = None) -> list[float]:
    """When each job ends, jobs started in order on ``slots`` workers, each no earlier than its ``ready``."""
    free = [0.0] * max(1, slots)
    heapq.heapify(free)
    ends = []
    for i, d in enumerate(durations):
        start = max(heapq.heappop(free), ready[i] if ready else 0.0)
        ends.append(start + d)
        heapq.heappush(free, ends[-1])
    return ends


def _page_of(prompt: str, scrapes: list[Call]) -> str:
    """The fetched page a ranking prompt judges (its overview reads "Title (URL)"), or the prompt itself."""
    return next((c.key for c in scrapes if f"({c.key})" in prompt), prompt)


@dataclass
class Paths:
    old: float
    new: float
    first_words_new: float  # to the writer's first token, new ordering (a streamed draft's first words)


def critical_paths(calls: list[Call], fetch_slots: int, search_slots: int) -> Paths:
    """The calls that could not overlap, summed, in the old and the new ordering."""
    by = lambda kind: [c for c in calls if c.kind == kind]  # noqa: E731
    one = lambda kind: sum(c.seconds for c in by(kind))  # noqa: E731  (stages that make one call, or in turn)
    searches = [c.seconds for c in by("search")]
    scrapes = by("scrape")
    ranks = {_page_of(c.key, scrapes): c.seconds for c in by("section_rank")}
    fetch_ends = makespan([c.seconds for c in scrapes], fetch_slots)
    old_fetch = max(fetch_ends, default=0.0)
    old_rank = max(makespan(list(ranks.values()), PAGE_PARALLELISM), default=0.0)
    # new: each page's ranking starts when its own fetch ends (pages without a ranking end at their fetch)
    ranked = [(end, ranks.pop(c.key)) for c, end in zip(scrapes, fetch_ends, strict=True) if c.key in ranks]
    unpaired = list(ranks.values())  # a ranking whose page the pairing missed: after every fetch
    new_pages = max([*fetch_ends,
                     *makespan([d for _, d in ranked], PAGE_PARALLELISM, [e for e, _ in ranked]),
                     *(old_fetch + d for d in unpaired)], default=0.0)
    before = one("query_plan") + one("url_filter")
    after = one("refine") + one("citations")
    draft = by("draft")
    old = before + sum(searches) + old_fetch + old_rank + one("draft") + after
    new_search = max(makespan(searches, search_slots), default=0.0)
    new = before + new_search + new_pages + one("draft") + after
    first = before + new_search + new_pages + ((draft[0].first_token_s or 0.0) if draft else 0.0)
    return Paths(old, new, first)


# --- asking the service ---------------------------------------------------------------------------


@dataclass
class Asked:
    question_id: str | None
    started: float  # monotonic
    ended: float
    first_event_s: float | None = None
    first_words_s: float | None = None
    whole_s: float | None = None
    answered: bool = False
    messages: list[tuple[float, dict]] = field(default_factory=list)


def ask(url: str, question: str) -> Asked:
    import httpx

    began = time.monotonic()
    asked = Asked(None, began, began)
    with httpx.Client(timeout=700) as client, client.stream("POST", f"{url}/run", json={"question": question}) as r:
        asked.question_id = r.headers.get("x-hifirag-question-id")
        for line in r.iter_lines():
            if line.startswith("data: "):
                asked.messages.append((time.monotonic() - began, json.loads(line[6:])))
    asked.ended = time.monotonic()
    if asked.messages:
        asked.first_event_s = asked.messages[0][0]
        last = asked.messages[-1]
        asked.whole_s = last[0]
        asked.answered = bool(last[1].get("complete") and last[1].get("final_report") and not last[1].get("error"))
    return asked


def _words(text: str | None, n: int = 4) -> str | None:
    found = re.findall(r"[A-Za-z0-9][\w'-]*", text or "")
    return " ".join(found[:n]) if len(found) >= n else None


def first_words(asked: Asked, draft: str | None, answer: str | None) -> tuple[float | None, str]:
    """When the first event carrying the opening words of the draft or of the answer came, and where they were:
    in ``final_report`` (the answer's pieces) or in ``intermediate_steps`` (a growing draft)."""
    openings = [o for o in (_words(draft), _words(answer)) if o]
    for at, message in asked.messages:
        for where in ("final_report", "intermediate_steps"):
            said = " ".join(re.findall(r"[A-Za-z0-9][\w'-]*", str(message.get(where) or "")))
            if any(o in said for o in openings):
                return at, where
    return None, "none"


# --- one mode -------------------------------------------------------------------------------------


def fresh_root(root: Path, base: Path) -> Path:
    """A data root on the built corpus with empty caches and an empty warehouse."""
    shutil.rmtree(root, ignore_errors=True)
    (root / "corpus").mkdir(parents=True)
    (root / "corpus" / "docs").symlink_to(base / "corpus" / "docs")
    (root / "blobs").symlink_to(base / "blobs")
    return root


def run_mode(label: str, overlap: bool, questions: list[str], base: Path, model: LatencyModel,
             fake_overrides: list[str], api: str) -> dict:
    from hifirag_core.store.warehouse import Warehouse
    from tests.support.service_process import hifirag_service

    root = fresh_root(OUT / label, base)
    args = [f"--set={o}" for o in (*fake_overrides, f"corpus.exclude={json.dumps(list(FAQ_PAGE_PATTERNS))}",
                                   f"limits.overlap={str(overlap).lower()}", "limits.concurrency=1")]
    results = []
    env = {"PREFECT_API_URL": api} if api else {}  # without one the service starts its own temporary server
    with hifirag_service(root, *args, env=env, log_path=OUT / f"service-{label}.log") as url:
        for n, q in enumerate(questions, 1):
            asked = ask(url, q)
            results.append(asked)
            print(f"  [{label} {n}/{len(questions)}] {asked.whole_s or 0:.1f} s", flush=True)
    w = Warehouse(root)
    rows = []
    cfg = PipelineConfig()
    fetch_slots = min(PAGE_PARALLELISM, cfg.limits.provider_concurrency.get("scrapingdog", PAGE_PARALLELISM))
    search_slots = min(PAGE_PARALLELISM, cfg.limits.provider_concurrency.get("google", PAGE_PARALLELISM))
    for asked in results:
        draft = _one(w, "SELECT text FROM drafts WHERE stage = 'draft' AND question_id = ?", asked.question_id)
        answer = _one(w, "SELECT text FROM answers WHERE question_id = ?", asked.question_id)
        words_s, words_from = first_words(asked, draft, answer)
        paths = critical_paths(model.between(asked.started, asked.ended), fetch_slots, search_slots)
        rows.append({"question_id": asked.question_id, "answered": asked.answered, "first_event_s": asked.first_event_s,
                     "first_words_s": words_s, "first_words_from": words_from, "whole_s": asked.whole_s,
                     **asdict(paths)})
    cpu = dict(w.query("SELECT stage, avg(cpu_seconds) FROM stage_runs WHERE NOT cached GROUP BY ALL").rows)
    wall = dict(w.query("SELECT stage, avg(seconds) FROM stage_runs GROUP BY ALL").rows)
    calls = [{"kind": c.kind, "seconds": c.seconds, "drawn": c.drawn} for a in results
             for c in model.between(a.started, a.ended)]
    return {"label": label, "overlap": overlap, "rows": rows, "cpu": cpu, "wall": wall, "calls": calls,
            "messages": [[(round(t, 2), m) for t, m in a.messages] for a in results[:1]]}


def _one(w, sql: str, qid: str | None) -> str | None:
    rows = w.query(sql, [qid]).rows if qid else []
    return rows[0][0] if rows else None


# --- the report -----------------------------------------------------------------------------------


def pct(values: list[float], p: float) -> float:
    """The nearest-rank percentile."""
    ordered = sorted(v for v in values if v is not None)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)] if ordered else float("nan")


def report(modes: list[dict], n: int, limits: str = "server") -> list[str]:
    where = ("rate limits and budget counted on a Prefect server (PREFECT_API_URL)" if limits == "server"
             else "rate limits and budget counted in the service's process")
    out = [f"\n/run, one question at a time, {n} FAQ questions (docs corpus, FAQ pages excluded), cold caches,"
           f" real clients against latency-drawing fakes ({os.cpu_count()} cores, load {os.getloadavg()[0]:.1f});"
           f" {where}",
           "  seconds, p50 / p95 over the questions; critical paths from the calls each question made", ""]
    head = f"  {'':<34}" + "".join(f"{m['label'] + (' (overlap)' if m['overlap'] else ' (no overlap)'):>26}" for m in modes)
    out.append(head)

    def line(name: str, key: str) -> None:
        cells = "".join(f"{pct([r[key] for r in m['rows']], 50):>12.2f} /{pct([r[key] for r in m['rows']], 95):>7.2f}"
                        + " " * 5 for m in modes)
        out.append(f"  {name:<34}{cells}")

    line("first /run event", "first_event_s")
    line("first answer words", "first_words_s")
    line("whole answer", "whole_s")
    line("critical path, old ordering", "old")
    line("critical path, new ordering", "new")
    line("first words' path (streamed draft)", "first_words_new")
    out.append("")
    for m in modes:
        rows = m["rows"]
        whole = pct([r["whole_s"] for r in rows], 50)
        path = pct([r["new" if m["overlap"] else "old"] for r in rows], 50)
        words = pct([r["first_words_s"] for r in rows], 50)
        origin = sorted({r["first_words_from"] for r in rows})
        out.append(f"  {m['label']}: whole answer p50 / its ordering's critical path p50 = {whole / path:.2f} "
                   f"(target <= 1.10); first words p50 / whole p50 = {words / whole:.2f} (target <= 0.60; "
                   f"first words came in {', '.join(origin)}); answered {sum(r['answered'] for r in rows)}/{len(rows)}")
    out.append("")
    excess = [c["seconds"] - c["drawn"] for m in modes for c in m.get("calls", [])]
    if excess:
        out.append(f"  the fakes' own work outran a drawn latency by {statistics.mean(excess):.3f} s a call on average "
                   f"(max {max(excess):.2f} s); the critical paths use what each call took")
    out.append("")
    out.append("  CPU seconds per question by stage (stage_runs.cpu_seconds, computed stages; and wall seconds)")
    out.append(f"  {'stage':<14}" + "".join(f"{m['label'] + ' cpu':>12}{m['label'] + ' wall':>13}" for m in modes))
    for stage in STAGE_NAMES:
        if not any(stage in m["cpu"] for m in modes):
            continue
        out.append(f"  {stage:<14}" + "".join(f"{m['cpu'].get(stage) or 0:>12.3f}{m['wall'].get(stage) or 0:>13.2f}"
                                               for m in modes))
    out.append(f"  {'total':<14}" + "".join(f"{sum(v or 0 for v in m['cpu'].values()):>12.3f}"
                                            f"{sum(v or 0 for v in m['wall'].values()):>13.2f}" for m in modes))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--seed", type=int, default=29)
    parser.add_argument("--limits", choices=("server", "process"), default="server",
                        help="server: the service talks to a Prefect server started here (PREFECT_API_URL, as a "
                             "deployment does), which counts rate limits and budgets for every process; process: "
                             "it starts its own temporary server and counts them in memory")
    parser.add_argument("--report-only", action="store_true", help="re-print the last result")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if args.report_only:
        result = json.loads((OUT / f"result-{args.limits}.json").read_text())
        print("\n".join(report(result["modes"], result["questions"], args.limits)))
        return
    if not FAQ.exists():
        raise SystemExit(f"needs the shared data ({FAQ}); set HIFIRAG_SHARED_DATA")
    from hifirag_core.pipeline.plan import plan_run
    from tests.support.fakes.services import fake_services
    from tests.support.prefect_server import prefect_server

    base = corpus_base()
    web = CorpusWeb(base)
    questions = [q.query for q in plan_run(str(FAQ), sample=args.questions).questions.questions]
    model = LatencyModel(args.seed)
    modes = []
    server = prefect_server(OUT / "prefect-home") if args.limits == "server" else contextlib.nullcontext(None)
    with fake_services(search=web.search, page=web.page) as fakes, fakes.environment(), server as api:
        fakes.gemini.thinking_tokens.update(THINKING)
        model.attach(fakes.gemini, "gemini")
        model.attach(fakes.google, "google")
        model.attach(fakes.scrapingdog, "scrapingdog")
        web.search("python", 10)  # load the BM25 index and the page store before the clock starts
        overrides = fakes.config_overrides_pairs(llm="gemini", search="google", fetch="scrapingdog")
        for label, overlap in MODES:
            modes.append(run_mode(label, overlap, questions, base, model, overrides, api))
    (OUT / f"result-{args.limits}.json").write_text(json.dumps({"questions": len(questions), "modes": modes},
                                                                 indent=1, default=str))
    text = "\n".join(report(modes, len(questions), args.limits))
    (OUT / f"report-{args.limits}.txt").write_text(text + "\n")
    print(text)
    print(f"\n  medians of the critical paths: old {statistics.median(r['old'] for r in modes[0]['rows']):.2f} s, "
          f"new {statistics.median(r['new'] for r in modes[0]['rows']):.2f} s (the same calls, before)")


if __name__ == "__main__":
    main()
