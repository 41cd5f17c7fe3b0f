"""Throughput of the answer flow through the real clients, against fakes with realistic latency.

The fakes (``tests/support/fakes``) run in this process on 127.0.0.1: Gemini answers after
``--filter-latency`` seconds for the filter model's prompts (query plan, URL filter, section
ranking, citations) and ``--writer-latency`` for the writer's (draft, refine); Programmable Search
answers after ``--search-latency`` and Scrapingdog's scrape API after ``--scrape-latency``. They
serve the local documentation corpus (FAQ pages excluded) as the web, and enforce the same
requests-per-minute limits server-side (429 with Gemini's RetryInfo or Retry-After) that the
client is configured with: Gemini per model (``--rpm`` for the writer, gemini-2.5-pro;
``--filter-rpm`` for gemini-2.5-flash), Programmable Search with the config's ``google`` limit.
Each fake answers exactly its latency after a request arrives, its own work (a BM25 search with
snippets, a reply built from the prompt) included rather than added.
The flow runs in a child process with a fresh data root and a fresh Prefect home (cold caches, its
own temporary Prefect server), on ``--questions`` FAQ questions (``docs_faq/faq_qa.jsonl``,
``sample=N``) at ``--concurrency`` questions in flight (default: the config's).

How the bound is computed (printed with every term):

* Calls per question are what the flow really made, read back from the warehouse: LLM calls per
  stage and model from ``llm_calls`` (first attempts; retries are a cost the bound does not
  grant), search calls = queries in ``query_plans`` x result pages per query, scrape calls = rows
  of ``pages``.
* Critical path of a question = the sum over stages of (sequential calls x that call's latency),
  because the flow runs a question's stages in order and, within a stage, calls one after
  another (the two search queries) -- except fetching and section ranking, whose per-page calls
  run in parallel (up to ``PAGE_PARALLELISM``): each costs ceil(calls / PAGE_PARALLELISM)
  latencies. Local work (sectioning, parsing, writing) counts as zero.
* Throughput bound (questions/min) = the smallest of
  - questions in flight: concurrency x 60 / mean critical path (Little's law: every slot busy
    with no gap between questions);
  - for each rate-limited provider key: its rpm limit / its mean calls per question (the client
    keeps its minute ``limits.WINDOW_MARGIN_S`` longer than the server's; the bound does not
    grant that back);
  - for each provider key with a client-side concurrency limit: slots x 60 /
    (mean calls per question x call latency), the most calls those slots can complete.

Measured throughput is questions / the flow body's wall time (``runs.wall_seconds``: from the
flow's start to its last write), and also over the whole flow call, which includes starting
Prefect's temporary server (a deployment talks to a server already running). The script prints
figures and ratios; it never asserts.

    PYTHONPATH=. .venv/bin/python bench/bench_backends.py --questions 50
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hifirag_core.config import PipelineConfig, build_config, parse_overrides  # noqa: E402
from hifirag_core.corpus.sites import FAQ_PAGE_PATTERNS  # noqa: E402
from hifirag_core.pipeline.overlap import PAGE_PARALLELISM  # noqa: E402
from hifirag_core.pipeline.specs import STAGE_NAMES  # noqa: E402
from hifirag_core.resources import shared_data_dir  # noqa: E402
from tests.support.fakes.server import FakeServer, Request, Response  # noqa: E402

OUT = ROOT / "bench" / "out" / "backends"
FAQ = shared_data_dir() / "docs_faq" / "faq_qa.jsonl"
RUN_ID = "bench-backends"
# Programmable Search returns at most 10 results per request (``num`` 1-10).
GOOGLE_PAGE_SIZE = 10
FILTER_STAGES = ("query_plan", "url_filter", "section_rank", "citations")
WRITER_STAGES = ("draft", "refine")


@dataclass
class Setup:
    """What one measurement runs with; also the child's instructions."""

    questions: int
    concurrency: int
    filter_latency: float
    writer_latency: float
    search_latency: float
    scrape_latency: float
    writer_rpm: float
    filter_rpm: float
    root: str = ""
    overrides: list[str] = field(default_factory=list)
    settings: list[str] = field(default_factory=list)  # --set: other config settings (limits.overlap=false)


# --- the flow, in a child process ------------------------------------------------------------------


def run_child(spec: Path) -> None:
    """Run the flow once as `hifirag run` would, and print its timings as one JSON line."""
    setup = Setup(**json.loads(spec.read_text()))
    root = Path(setup.root)
    os.environ["PREFECT_HOME"] = str(root / "prefect-home")
    from flows.environment import configure, stage_cache_at

    configure(root)
    began = time.perf_counter()
    from flows.answer import answer_questions

    imported = time.perf_counter()
    with stage_cache_at(root):
        summary = answer_questions(questions=str(FAQ), sample=setup.questions, overrides=setup.overrides,
                                   data_root=str(root), run_id=RUN_ID)
    done = time.perf_counter()
    print(json.dumps({"import_s": imported - began, "call_s": done - imported, "summary": summary}))


# --- the fakes, serving the local corpus ---------------------------------------------------------


def corpus_base() -> Path:
    """A data root holding the built documentation corpus (built once, reused by every run)."""
    base = OUT / "base"
    from hifirag_core.corpus.store import corpus_at

    corpus = corpus_at(base, "docs")
    if not corpus.is_current():  # absent, or built by an older version
        from hifirag_core.corpus.build import build_default

        t = time.perf_counter()
        build_default(corpus.root, corpus.blobs)
        print(f"corpus built in {time.perf_counter() - t:.1f}s", flush=True)
    return base


class CorpusWeb:
    """The corpus minus its FAQ pages, as the search and scrape fakes' content."""

    def __init__(self, base: Path):
        from hifirag_core.backends.offline import LocalSearch
        from hifirag_core.corpus.store import open_corpus

        self.corpus = open_corpus(base, "docs")
        self.index = self.corpus.index(FAQ_PAGE_PATTERNS)
        self._search = LocalSearch(self.index)

    def search(self, query: str, n: int) -> list:
        return self._search.search(query, num=n)

    def page(self, url: str) -> bytes | None:
        found = self.corpus.page(url)
        if found is None or url not in self.index:  # excluded pages are not on this "web"
            return None
        return self.corpus.blobs.get(found.sha256)


def answer_after_latency(fake: FakeServer) -> None:
    """Make ``fake`` reply ``latency`` seconds after a request arrived, its own work included.

    A fake sleeps its latency and then computes the reply; the search fake's BM25 query with
    snippets costs 0.1-0.3 s of CPU per call here (more on a loaded machine). A real service's
    latency already contains its work, and the bound grants a call exactly its latency, so the
    fake's work is folded into the latency instead of added to it.
    """
    latency_of = fake.request_latency
    route = fake.route

    def padded(request: Request) -> Response:
        target = latency_of(request)
        response = route(request)
        fake.sleep(target - (time.monotonic() - request.at))
        return response

    fake.request_latency = lambda request: 0.0  # type: ignore[method-assign]
    fake.route = padded  # type: ignore[method-assign]


def effective_config(overrides: list[str]) -> PipelineConfig:
    """The configuration the flow will run with (the same overrides, the default variant's)."""
    from hifirag_core.pipeline.variants import variant_overrides

    return build_config(variant_overrides("final"), parse_overrides(overrides), variant="final")


def measure(setup: Setup, label: str) -> dict:
    """Start the fakes, run the flow in a child against them, collect what both sides saw."""
    from tests.support.fakes.services import fake_services

    web = CorpusWeb(corpus_base())
    root = OUT / label
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    defaults = PipelineConfig().models
    writer, flt = defaults.writer, defaults.filter
    google_rpm = PipelineConfig().limits.provider_rpm.get("google")
    with fake_services(search=web.search, page=web.page,
                       llm_latency={"filter": setup.filter_latency, "writer": setup.writer_latency},
                       search_latency=setup.search_latency, scrape_latency=setup.scrape_latency,
                       gemini_rpm={writer: int(setup.writer_rpm), flt: int(setup.filter_rpm)},
                       google_rpm=int(google_rpm) if google_rpm else None) as fakes, fakes.environment():
        for fake in (fakes.gemini, fakes.google, fakes.scrapingdog):
            answer_after_latency(fake)
        web.search("python", 10)  # load the BM25 index and the page store before the clock starts
        setup.root = str(root)
        setup.overrides = [
            *fakes.config_overrides_pairs(llm="gemini", search="google", fetch="scrapingdog"),
            f"corpus.exclude={json.dumps(list(FAQ_PAGE_PATTERNS))}",
            f"limits.concurrency={setup.concurrency}",
            # the client holds the same per-model limits the fake enforces
            "limits.provider_rpm=" + json.dumps({f"gemini:{writer}": setup.writer_rpm,
                                                 f"gemini:{flt}": setup.filter_rpm}),
            *setup.settings,
        ]
        spec = root / "setup.json"
        spec.write_text(json.dumps(asdict(setup)))
        load_before = os.getloadavg()
        with open(root / "flow.log", "w") as log:
            done = subprocess.run([sys.executable, __file__, "--child", str(spec)], stdout=subprocess.PIPE,
                                  stderr=log, text=True, cwd=ROOT, env=os.environ.copy())
        load_after = os.getloadavg()
        if done.returncode != 0:
            raise SystemExit(f"the flow failed; see {root / 'flow.log'}")
        # kept with the result so that --report-only uses the limits this run had
        config = effective_config(setup.overrides).model_dump(mode="json")
        child = json.loads(done.stdout.strip().splitlines()[-1])
        served = {
            "gemini_models": dict(fakes.gemini.models), "gemini_kinds": dict(fakes.gemini.kinds),
            "gemini_requests": fakes.gemini.count(), "gemini_429": fakes.gemini.rate_limited_count,
            "google_requests": fakes.google.count(), "google_429": fakes.google.rate_limited_count,
            "scrape_requests": fakes.scrapingdog.count(lambda r: r.path.rstrip("/") == "/scrape"),
            "scrapingdog_429": fakes.scrapingdog.rate_limited_count,
        }
    return {"setup": asdict(setup), "config": config, "child": child, "served": served,
            "load": [load_before, load_after]}


# --- the bound --------------------------------------------------------------------------------


@dataclass
class QuestionCalls:
    """The calls one question made, by stage (``llm``: stage -> model -> calls)."""

    llm: dict[str, dict[str, int]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(int)))
    attempts: int = 0
    search: int = 0
    scrape: int = 0


def observed_calls(root: Path, cfg: PipelineConfig) -> dict[str, QuestionCalls]:
    """Per question, the calls the flow made, from the warehouse."""
    from hifirag_core.store.warehouse import Warehouse

    w = Warehouse(root)
    calls: dict[str, QuestionCalls] = defaultdict(QuestionCalls)
    for qid, stage, model, n, attempts in w.query(
            "SELECT question_id, stage, model, count(*), sum(attempts) FROM llm_calls "
            "WHERE run_id = ? AND NOT cache_hit GROUP BY ALL", [RUN_ID]).rows:
        calls[qid].llm[stage][model] += n
        calls[qid].attempts += attempts
    pages_per_query = max(1, math.ceil(cfg.search.results_per_query / GOOGLE_PAGE_SIZE))
    for qid, n_queries in w.query("SELECT question_id, sum(len(queries)) FROM query_plans WHERE run_id = ? "
                                  "GROUP BY ALL", [RUN_ID]).rows:
        calls[qid].search = int(n_queries or 0) * pages_per_query
    for qid, n in w.query("SELECT question_id, count(*) FROM pages WHERE run_id = ? AND fetcher = 'scrapingdog' "
                          "GROUP BY ALL", [RUN_ID]).rows:
        calls[qid].scrape = n
    return calls


@dataclass
class Bound:
    critical_path_s: float  # mean over questions
    stage_path_s: dict[str, float]  # mean seconds each stage adds to the critical path
    calls_per_question: dict[str, float]  # provider key -> mean calls
    terms: list[tuple[str, float]]  # (what limits, questions/min)

    @property
    def value(self) -> float:
        return min(q for _, q in self.terms)

    @property
    def binding(self) -> str:
        return min(self.terms, key=lambda t: t[1])[0]


def compute_bound(calls: dict[str, QuestionCalls], cfg: PipelineConfig, setup: Setup) -> Bound:
    """The throughput the latencies and limits allow, from the calls observed (see the docstring)."""
    latency = {cfg.models.filter: setup.filter_latency, cfg.models.writer: setup.writer_latency}
    keys = {"search": "google", "fetch": "scrapingdog"}
    n = max(1, len(calls))
    stage_path: dict[str, float] = defaultdict(float)
    per_key: dict[str, float] = defaultdict(float)
    for qc in calls.values():
        for stage, by_model in qc.llm.items():
            for model, k in by_model.items():
                per_key[f"gemini:{model}"] += k / n
                waves = math.ceil(k / PAGE_PARALLELISM) if stage == "section_rank" else k
                stage_path[stage] += waves * latency.get(model, 0.0) / n
        stage_path["search"] += qc.search * setup.search_latency / n
        stage_path["fetch"] += math.ceil(qc.scrape / PAGE_PARALLELISM) * setup.scrape_latency / n
        per_key[keys["search"]] += qc.search / n
        per_key[keys["fetch"]] += qc.scrape / n
    critical = sum(stage_path.values())
    key_latency = {**{f"gemini:{m}": s for m, s in latency.items()},
                   "google": setup.search_latency, "scrapingdog": setup.scrape_latency}
    terms = [(f"{cfg.limits.concurrency} questions in flight / {critical:.2f} s critical path",
              cfg.limits.concurrency * 60 / critical if critical else math.inf)]
    limits = cfg.limits
    for key, mean_calls in sorted(per_key.items()):
        if mean_calls <= 0:
            continue
        provider = key.split(":", 1)[0]
        rpm = limits.provider_rpm.get(key, limits.provider_rpm.get(provider))
        if rpm:
            terms.append((f"{key}: {rpm:g} rpm / {mean_calls:.2f} calls per question", rpm / mean_calls))
        slots = limits.provider_concurrency.get(key, limits.provider_concurrency.get(provider))
        if slots and key_latency.get(key):
            terms.append((f"{key}: {slots} slots x 60 / ({mean_calls:.2f} calls x {key_latency[key]:g} s)",
                          slots * 60 / (mean_calls * key_latency[key])))
    return Bound(critical, dict(stage_path), dict(per_key), terms)


# --- the report ---------------------------------------------------------------------------------


def stage_table(root: Path, stage_path: dict[str, float]) -> Iterator[str]:
    """Per stage: paid calls (stage_costs), calls per question, the latency model's and the measured seconds."""
    from hifirag_core.store.warehouse import Warehouse

    w = Warehouse(root)
    costs = {r[0]: r[1:] for r in w.query(
        "SELECT stage, question_stages, llm_calls_paid, mean_latency_s, cost_usd FROM stage_costs WHERE run_id = ?",
        [RUN_ID]).rows}
    measured = dict(w.query("SELECT stage, avg(seconds) FROM stage_runs WHERE run_id = ? GROUP BY ALL",
                            [RUN_ID]).rows)
    yield (f"  {'stage':<13}{'paid LLM':>9}{'client s/call':>14}{'cost $':>9}{'ideal s/q':>11}{'measured s/q':>14}"
           f"{'extra':>8}")
    for stage in STAGE_NAMES:
        n_q, paid, mean_lat, cost = costs.get(stage, (0, 0, None, 0.0))
        ideal, got = stage_path.get(stage, 0.0), measured.get(stage)
        lat = f"{mean_lat:.2f}" if mean_lat is not None else "-"
        got_s = f"{got:.2f}" if got is not None else "-"
        extra = f"{got - ideal:+.2f}" if got is not None else "-"
        yield f"  {stage:<13}{paid:>9}{lat:>14}{cost or 0:>9.4f}{ideal:>11.2f}{got_s:>14}{extra:>8}"


def report(result: dict, root: Path) -> Iterator[str]:
    setup = Setup(**result["setup"])
    cfg = (PipelineConfig.model_validate(result["config"]) if "config" in result
           else effective_config(setup.overrides))
    calls = observed_calls(root, cfg)
    bound = compute_bound(calls, cfg, setup)
    child, served = result["child"], result["served"]
    summary = child["summary"]
    n = summary["n_questions"]
    body_s, call_s = summary["wall_seconds"], child["call_s"]
    qpm_body, qpm_call = 60 * n / body_s, 60 * n / call_s
    attempts = sum(c.attempts for c in calls.values())
    llm_calls = sum(k for c in calls.values() for by in c.llm.values() for k in by.values())
    yield (f"\nAnswer flow through the real clients against latency-injecting fakes: {n} FAQ questions "
           f"(docs corpus, FAQ pages excluded), cold caches")
    yield (f"  latency: filter {setup.filter_latency:g} s, writer {setup.writer_latency:g} s, search "
           f"{setup.search_latency:g} s, scrape {setup.scrape_latency:g} s per call")
    if setup.settings:
        yield f"  set    : {' '.join(setup.settings)}"
    yield (f"  limits : {cfg.limits.concurrency} questions in flight; rpm {json.dumps(cfg.limits.provider_rpm)}; "
           f"provider concurrency {json.dumps(cfg.limits.provider_concurrency)}; the fakes enforce the same rpm")
    yield (f"  machine: {os.cpu_count()} cores, load average {result['load'][0][0]:.2f} before, "
           f"{result['load'][1][0]:.2f} after (1-min)")
    yield f"  answered {summary['n_answered']}/{n}; run status {summary['status']}"
    yield ""
    yield "Measured"
    yield f"  flow body            : {body_s:7.1f} s  {qpm_body:6.2f} questions/min"
    yield (f"  whole flow call      : {call_s:7.1f} s  {qpm_call:6.2f} questions/min  (includes starting "
           f"Prefect's temporary server; Prefect import {child['import_s']:.1f} s not counted)")
    yield ""
    yield "Bound (questions/min; the smallest term binds)"
    for what, q in sorted(bound.terms, key=lambda t: t[1]):
        yield f"  {q:8.2f}  {what}"
    path = " + ".join(f"{s} {bound.stage_path_s[s]:.2f}" for s in STAGE_NAMES if bound.stage_path_s.get(s))
    yield f"  critical path per question (mean s): {path} = {bound.critical_path_s:.2f}"
    per_q = ", ".join(f"{k} {v:.2f}" for k, v in sorted(bound.calls_per_question.items()))
    yield f"  calls per question (mean, observed): {per_q}"
    yield ""
    yield f"Ratio measured / bound: {qpm_body / bound.value:.1%} (flow body), {qpm_call / bound.value:.1%} (whole call)"
    yield f"  bound {bound.value:.2f} questions/min, set by: {bound.binding}"
    waves = math.ceil(n / cfg.limits.concurrency)
    if n % cfg.limits.concurrency and bound.binding == bound.terms[0][0]:
        # Context, not part of the bound: a finite run's last wave is not full.
        perfect = 60 * n / (waves * bound.critical_path_s)
        yield (f"  (with {n} questions in {cfg.limits.concurrency} lanes the last wave is partly idle: even a "
               f"zero-overhead run takes {waves} x {bound.critical_path_s:.2f} s -> {perfect:.2f} questions/min, "
               f"{perfect / bound.value:.1%} of the bound)")
    yield ""
    yield "Calls (client side from the warehouse, server side from the fakes)"
    yield (f"  LLM: {llm_calls} calls, {attempts} attempts; Gemini fake served {served['gemini_requests']} requests "
           f"({served['gemini_429']} answered 429), by model {json.dumps(served['gemini_models'])}")
    search = sum(c.search for c in calls.values())
    scrape = sum(c.scrape for c in calls.values())
    yield (f"  search: {search} calls counted; Programmable Search fake served {served['google_requests']} "
           f"({served['google_429']} answered 429)")
    yield (f"  scrape: {scrape} calls counted; Scrapingdog fake served {served['scrape_requests']} "
           f"({served['scrapingdog_429']} answered 429)")
    yield ""
    yield "Per stage (paid LLM calls and cost from stage_costs; ideal = the latency model's share of the"
    yield "critical path; measured = mean stage_runs.seconds per question; extra = measured - ideal)"
    yield from stage_table(root, bound.stage_path_s)


def main() -> None:
    defaults = PipelineConfig()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=defaults.limits.concurrency,
                        help="questions in flight (default: the config's limits.concurrency)")
    parser.add_argument("--filter-latency", type=float, default=0.8, help="seconds per filter-model call")
    parser.add_argument("--writer-latency", type=float, default=6.0, help="seconds per writer-model call")
    parser.add_argument("--search-latency", type=float, default=0.5, help="seconds per Programmable Search call")
    parser.add_argument("--scrape-latency", type=float, default=1.0, help="seconds per Scrapingdog scrape")
    parser.add_argument("--rpm", type=float,
                        default=defaults.limits.provider_rpm[f"gemini:{defaults.models.writer}"],
                        help="requests per minute for the writer model (client and fake); default: the config's")
    parser.add_argument("--filter-rpm", type=float,
                        default=defaults.limits.provider_rpm[f"gemini:{defaults.models.filter}"],
                        help="requests per minute for the filter model (client and fake); default: the config's")
    parser.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                        help="a config setting for the flow (repeatable), e.g. limits.overlap=false")
    parser.add_argument("--label", default="run", help="output folder under bench/out/backends/")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--report-only", action="store_true", help="re-print the last result of --label")
    args = parser.parse_args()
    if args.child:
        run_child(args.child)
        return
    if not FAQ.exists():
        raise SystemExit(f"needs the shared data ({FAQ}); set HIFIRAG_SHARED_DATA")
    root = OUT / args.label
    if args.report_only:
        if not (root / "result.json").exists():
            raise SystemExit(f"no result for --label {args.label} yet ({root / 'result.json'}); run without --report-only")
        result = json.loads((root / "result.json").read_text())
    else:
        setup = Setup(questions=args.questions, concurrency=args.concurrency, filter_latency=args.filter_latency,
                      writer_latency=args.writer_latency, search_latency=args.search_latency,
                      scrape_latency=args.scrape_latency, writer_rpm=args.rpm, filter_rpm=args.filter_rpm,
                      settings=args.settings)
        result = measure(setup, args.label)
        (root / "result.json").write_text(json.dumps(result, indent=1))
    text = "\n".join(report(result, root))
    (root / "report.txt").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
