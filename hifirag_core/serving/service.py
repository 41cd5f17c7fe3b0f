"""The pipeline as a service with the MMU-RAGent API: one ``Service`` per process, its slots and its streams.

    request ─► validate (422) ─► a free slot? (else 503 + Retry-After) ─► the question joins the day's
            service run ─► the answerer runs the pipeline (every stage cached, as in a batch run)
                 │   each finished stage ─► a step of the stream (query plan, URLs kept, sections kept, ...)
                 │   the draft and refinement as the writer streams them ─► a step that grows in place
                 └─► the answers row ─► the report, streamed, then the last message: complete, with citations

Questions run in threads of this process, at most ``concurrency`` at once. What runs a question is a
``QuestionAnswerer``: ``flows.service`` gives the Prefect one (the batch flow's ``answer_question``
task, every stage a cached Prefect task); an observer on its stage runner hands each finished stage to
the request's stream. The stage cache is the batch runs' (a repeated question computes nothing) and
every question's rows go through the warehouse's one writer into the day's service run
(``hifirag_core.serving.ledger``), also when the client has gone away.

The writer's draft and refinement reach the stream while they are written (``limits.stream_writer``): the
question's thread listens to the writer (``hifirag_core.llm.streaming``) and hands the text so far to the
stream at most every ``WRITING_EVERY_S``, where it replaces its own previous step until the stage finishes.

A request never waits past its deadline (at most the competition's 10 minutes): it then gets what
exists, the answer or the last draft, while the pipeline stops spending and records the rest. An
idle stream gets the last message again as a heartbeat, so every line stays a contract message.
Replies never hold an error message from the pipeline or a traceback; the log has them.
"""

from __future__ import annotations

import asyncio
import logging
import math
import statistics
import threading
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from hifirag_core.corpus.build import ensure_corpus
from hifirag_core.llm.streaming import listening
from hifirag_core.pipeline.output import StageOutput
from hifirag_core.pipeline.persistence import write_result
from hifirag_core.pipeline.plan import RunPlan
from hifirag_core.pipeline.runner import QuestionResult, StageObserver
from hifirag_core.pipeline.specs import ANSWER_STAGE, spec
from hifirag_core.pipeline.threads import load_earlier_turn
from hifirag_core.pipeline.trail import Trail
from hifirag_core.questions import Question
from hifirag_core.records import AnswerRecord, StageRunRecord, utcnow
from hifirag_core.records.serving import ServedRequestRecord
from hifirag_core.secrets import redact
from hifirag_core.serving.answer_report import (
    DRAFT,
    Report,
    answer_pieces,
    partial_report,
    render_report,
    stage_step,
    writing_step,
)
from hifirag_core.serving.contract import NO_ANSWER_RESPONSE, StreamMessage, Transcript
from hifirag_core.serving.ledger import ServiceRuns
from hifirag_core.serving.settings import (
    ServiceSettings,
    capacity,
    service_config,
    service_examples,
    service_profile,
)
from hifirag_core.store.disk import free_mb, is_disk_full
from hifirag_core.store.warehouse import Warehouse
from hifirag_core.turns import EarlierTurn

log = logging.getLogger("hifirag.service")


class QuestionAnswerer(Protocol):
    """What runs a served question through the pipeline (the orchestrator's side of the service)."""

    def warm_up(self, plan: RunPlan) -> None:
        """Load what the first question would wait for, and check the orchestrator answers (raise if not)."""
        ...

    def answer(self, question: Question, plan: RunPlan, observer: StageObserver) -> QuestionResult:
        """Every stage of ``question`` under ``plan``; ``observer`` sees each stage as it finishes."""
        ...


RECEIVED_STEP = "**Question received**; planning the searches."
REFRESH_EVERY_S = 30.0  # the day run's counts in the runs table
FAILED = "The service could not answer this question (request {qid}); its log says why."
FAILED_DISK_FULL = ("The service could not store this question's answer: its disk is full (request {qid}); ask again "
                    "once space is freed.")
WRITING_EVERY_S = 0.25  # at most one step of the growing draft (or refinement) per this many seconds


class _Gate:
    """At most ``capacity`` questions in the pipeline; how long until a slot frees, for Retry-After."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._lock = threading.Lock()
        self._started: dict[str, float] = {}
        self._durations: deque[float] = deque(maxlen=50)

    def enter(self, token: str) -> bool:
        with self._lock:
            if len(self._started) >= self.capacity:
                return False
            self._started[token] = time.monotonic()
            return True

    def leave(self, token: str) -> None:
        with self._lock:
            began = self._started.pop(token, None)
            if began is not None:
                self._durations.append(time.monotonic() - began)

    @property
    def in_flight(self) -> int:
        with self._lock:
            return len(self._started)

    def retry_after(self) -> int:
        """Seconds until the question nearest its end is expected to finish (1 to 60)."""
        with self._lock:
            typical = statistics.median(self._durations) if self._durations else 10.0
            now = time.monotonic()
            soonest = min((typical - (now - began) for began in self._started.values()), default=1.0)
        return max(1, min(60, math.ceil(soonest)))


@dataclass
class Ticket:
    """One request on its way through the pipeline, shared by its worker thread and its response."""

    question: Question
    endpoint: str
    token: str  # its slot
    plan: RunPlan
    loop: asyncio.AbstractEventLoop
    deadline_at: float  # time.monotonic()
    received: float = field(default_factory=time.monotonic)
    received_at: datetime = field(default_factory=utcnow)
    # ("stage", output), ("writing", (stage, text so far)) ... ("done", None)
    events: asyncio.Queue = field(default_factory=asyncio.Queue)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    outputs: dict[str, StageOutput] = field(default_factory=dict)
    ledger: list[StageRunRecord] = field(default_factory=list)
    failed: bool = False
    disk_full: bool = False  # it failed because its rows found no space (the client is told so)
    pipeline_seconds: float | None = None
    served: ServedRequestRecord | None = None  # set when the response has ended
    settled: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    wrote_at: float = -math.inf  # when the stream last got the writer's text (time.monotonic())

    def stage_done(self, output: StageOutput, row: StageRunRecord) -> None:
        """The stage runner's observer (in the worker thread)."""
        self.outputs[output.stage] = output
        self.ledger.append(row)
        self.loop.call_soon_threadsafe(self.events.put_nowait, ("stage", output))

    def writing(self, stage: str, text: str) -> None:
        """The writer's listener (in the worker thread): the text so far, at most every ``WRITING_EVERY_S``.

        The first piece goes at once (the first words are what a waiting reader wants); a piece inside the
        gap is dropped, as a later one, or the finished stage, shows more.
        """
        now = time.monotonic()
        if now - self.wrote_at < WRITING_EVERY_S:
            return
        self.wrote_at = now
        self.loop.call_soon_threadsafe(self.events.put_nowait, ("writing", (stage, text)))

    def pipeline_done(self) -> None:
        self.pipeline_seconds = round(time.monotonic() - self.received, 4)
        self.loop.call_soon_threadsafe(self.events.put_nowait, ("done", None))
        self.loop.call_soon_threadsafe(self.done.set)

    @property
    def remaining(self) -> float:
        return self.deadline_at - time.monotonic()

    def elapsed(self) -> float:
        return round(time.monotonic() - self.received, 4)


class Service:
    """The state of a running service: its configuration, slots, threads and the day's service run."""

    def __init__(self, settings: ServiceSettings, answerer: QuestionAnswerer):
        self.settings = settings
        self.answerer = answerer
        self.cfg = service_config(settings)
        self.examples = service_examples(self.cfg)
        self.warehouse = Warehouse(settings.data_root)
        self.profile = service_profile(settings)
        self.runs = ServiceRuns(self.warehouse, self.profile, self.cfg, self.examples, settings.overrides,
                                compact_every=settings.compact_every)
        self.gate = _Gate(capacity(settings, self.cfg))
        self.pipeline = ThreadPoolExecutor(self.gate.capacity, thread_name_prefix="hifirag-question")
        self.bookkeeping = ThreadPoolExecutor(1, thread_name_prefix="hifirag-ledger")  # writes off the event loop
        self.started = time.monotonic()
        self._refresher: asyncio.Task | None = None
        self._disk_full = False  # a question's rows found the disk full: refuse until space is freed

    # --- life -----------------------------------------------------------------------------------------

    def warm_up(self) -> None:
        """Everything the first question would otherwise wait for: the corpus, the models, the orchestrator."""
        plan = self.runs.plan()
        ensure_corpus(plan.cfg, plan.data_root, log.info)
        self.answerer.warm_up(plan)
        log.info("HiFi-RAG service ready: profile %s, variant %s, %d at a time, deadline %.0f s, data in %s",
                 self.profile, self.cfg.variant, self.gate.capacity, self.settings.deadline_s,
                 self.settings.data_root)

    async def start(self) -> None:
        await asyncio.to_thread(self.warm_up)
        self._refresher = asyncio.create_task(self._refresh_now_and_then())

    async def stop(self) -> None:
        if self._refresher is not None:
            self._refresher.cancel()
        await asyncio.to_thread(self.pipeline.shutdown, wait=True)  # questions in flight still write their rows
        self.bookkeeping.shutdown(wait=True)
        await asyncio.to_thread(self.runs.close)

    async def _refresh_now_and_then(self) -> None:
        while True:
            await asyncio.sleep(REFRESH_EVERY_S)
            try:
                await asyncio.get_running_loop().run_in_executor(self.bookkeeping, self.runs.refresh)
            except Exception as exc:
                self._bookkeeping_failed(exc, "could not refresh the service run's counts")

    # --- a request --------------------------------------------------------------------------------------

    def disk_problem(self) -> str | None:
        """Why no question is taken now (the data root's disk below ``limits.min_free_mb``, or full at the last
        write), or None; /health still answers, and the reason goes to the client with 503."""
        floor = self.cfg.limits.min_free_mb
        free = free_mb(self.settings.data_root)
        if self._disk_full and free >= max(floor, 1.0):
            self._disk_full = False  # space was freed
        if self._disk_full or free < floor:
            return (f"the service's disk is full ({free:.1f} MB free at its data root, it needs {floor:g} MB): "
                    "no question is taken until space is freed; retry later")
        return None

    def earlier_turn(self, follows: str) -> EarlierTurn:
        """The earlier answer of this service a request follows, read from the warehouse (so a thread survives a
        restart); ``ThreadError`` (a 422) when it is unknown, another run's, or did not answer."""
        return load_earlier_turn(self.warehouse, follows, owner=self.runs.foreign)

    def admit(self, query: str, endpoint: str, iid: str | None = None, steering: dict | None = None,
              earlier: EarlierTurn | None = None) -> Ticket | None:
        """A ticket for the question, or None when every slot is taken. ``steering``: the request's own
        steering fields (checked by the contract), which the question carries as a file's would; ``earlier``:
        the answer it follows (``earlier_turn``), for a follow-up turn."""
        stamp, token = utcnow(), uuid.uuid4().hex
        qid = iid or f"run-{stamp:%Y%m%dT%H%M%S}-{token[:8]}"
        if not self.gate.enter(token):
            return None
        meta = {"endpoint": endpoint, **({"iid": iid} if iid else {}), **(steering or {}),
                **({"follows": earlier.answer.id} if earlier is not None else {})}
        line_no = int(stamp.timestamp() * 1000) % 86_400_000  # requests in arrival order within the day's run
        ticket = Ticket(Question(qid, query, None, line_no, meta, earlier), endpoint, token, self.runs.plan(),
                         asyncio.get_running_loop(), time.monotonic() + self.settings.deadline_s)
        self.pipeline.submit(self._answer, ticket)
        return ticket

    def _answer(self, ticket: Ticket) -> None:
        """The worker thread: the question through the pipeline, its rows into the day's service run."""
        q = ticket.question
        result: QuestionResult | None = None
        try:
            self.runs.add_question(ticket.plan, q)
            with listening(ticket.writing):
                result = self.answerer.answer(q, ticket.plan, ticket.stage_done)
        except Exception as exc:
            if is_disk_full(exc):
                self._disk_full = ticket.disk_full = True
                log.error("request %s: the pipeline stopped: %s", q.id, exc)
            else:
                log.exception("request %s: the pipeline failed", q.id)
            ticket.failed = True
            answer = spec(ANSWER_STAGE).failed(q, Trail(q), exc)
            result = QuestionResult(q, [*ticket.outputs.values(), answer],
                                    [*ticket.ledger, StageRunRecord(stage=ANSWER_STAGE, status=answer.status,
                                                                    error=answer.error)])
            ticket.outputs[ANSWER_STAGE] = answer
        try:
            write_result(self.warehouse, ticket.plan.run_id, result)
            self.runs.answered()
        except Exception as exc:
            if is_disk_full(exc):  # one line, and later requests get 503 until space is freed
                self._disk_full = ticket.disk_full = True
                log.error("request %s: its rows could not be written: %s", q.id, exc)
            else:
                log.exception("request %s: its rows could not be written", q.id)
            ticket.failed = True
        finally:
            self.gate.leave(ticket.token)
            # the runs table counts the answer as it lands: before the stream's last message, so that a client
            # reading the runs once its answer is complete (the Ask page's table) finds it counted
            self.bookkeeping.submit(self._refresh).result()
            ticket.pipeline_done()
            self._settle(ticket)

    def finish_response(self, ticket: Ticket, outcome: str, report: Report | None, *, first_event_s: float | None = None,
                        answer_s: float | None = None, events: int = 0, heartbeats: int = 0) -> None:
        """The response has ended: remember how, and record it once the pipeline has ended too."""
        ticket.served = ServedRequestRecord(
            endpoint=ticket.endpoint, iid=ticket.question.meta.get("iid"), outcome=outcome,
            report=report.kind if report else "none", received_at=ticket.received_at, first_event_s=first_event_s,
            answer_s=answer_s, seconds=ticket.elapsed(), events=events, heartbeats=heartbeats,
            status="failed" if outcome == "failed" else "ok")
        log.info("%s %s: %s (%s) in %.2f s", ticket.endpoint, ticket.question.id, outcome,
                 ticket.served.report, ticket.served.seconds)
        self._settle(ticket)

    def _settle(self, ticket: Ticket) -> None:
        with ticket.lock:
            if ticket.settled or ticket.served is None or ticket.pipeline_seconds is None:
                return
            ticket.settled = True
        ledger = ticket.ledger
        record = ticket.served
        record.pipeline_seconds = ticket.pipeline_seconds
        record.stages, record.stages_from_cache = len(ledger), sum(1 for row in ledger if row.cached)
        self.bookkeeping.submit(self._record, ticket.plan, ticket.question.id, record)

    def _refresh(self) -> None:
        try:
            self.runs.refresh(compact=False)  # a compaction that is due waits for the periodic refresh
        except Exception as exc:
            self._bookkeeping_failed(exc, "could not refresh the service run's counts")

    def _record(self, plan: RunPlan, qid: str, record: ServedRequestRecord) -> None:
        try:
            self.runs.record_served(plan, qid, record)
        except Exception as exc:
            self._bookkeeping_failed(exc, f"request {qid}: its served_requests row could not be written")

    def _bookkeeping_failed(self, exc: Exception, what: str) -> None:
        """A bookkeeping write that failed: on a full disk one line (and 503 until space is freed), else the
        traceback."""
        if is_disk_full(exc):
            self._disk_full = True
            log.error("%s: %s", what, exc)
        else:
            log.exception(what)

    # --- the two answers -----------------------------------------------------------------------------

    async def stream(self, ticket: Ticket) -> AsyncIterator[bytes]:
        """``/run``: a step per finished stage, the answer in growing pieces, then the last message."""
        transcript = Transcript()
        sent = heartbeats = 0
        first_event_s = answer_s = None
        outcome, report = "disconnected", None

        def send(message: StreamMessage) -> bytes:
            nonlocal sent, first_event_s
            sent += 1
            first_event_s = first_event_s if first_event_s is not None else ticket.elapsed()
            return redact(message.sse().decode("utf-8")).encode("utf-8")

        try:
            yield send(transcript.thinking(RECEIVED_STEP))
            while True:
                wait = min(self.settings.heartbeat_s, ticket.remaining)
                if wait <= 0:
                    outcome = "deadline"
                    break
                try:
                    kind, output = await asyncio.wait_for(ticket.events.get(), wait)
                except TimeoutError:
                    if ticket.remaining > 0 and transcript.last is not None:
                        heartbeats += 1
                        yield send(transcript.last)
                    continue
                if kind == "done":
                    outcome = "failed" if ticket.failed else "complete"
                    break
                if kind == "writing":
                    if report is None:  # never after the answer began (the contract's phases)
                        yield send(transcript.writing(writing_step(*output)))
                    continue
                if output.stage == ANSWER_STAGE:
                    report = render_report(_answer_row(output))
                    answer_s = ticket.elapsed()
                    for piece in answer_pieces(report.markdown or "")[:-1]:
                        yield send(transcript.answering(piece))
                    continue
                step = stage_step(output, ticket.outputs)
                if step:
                    yield send(transcript.thinking(step))
            if outcome == "deadline" and report is None:
                report = partial_report(ticket.outputs)
                if report.kind == DRAFT:
                    yield send(transcript.thinking(f"**Deadline**: {self.settings.deadline_s:.0f} s passed; the "
                                                   "answer is the last draft. Its sources were not checked, so "
                                                   "it cites none."))
            yield send(self._last_message(transcript, ticket, outcome, report))
        except Exception:  # a bug here must still end the stream as the contract says
            log.exception("request %s: the stream failed", ticket.question.id)
            outcome = "failed"
            yield send(transcript.failed(FAILED.format(qid=ticket.question.id)))
        finally:
            self.finish_response(ticket, outcome, report, first_event_s=first_event_s, answer_s=answer_s,
                                 events=sent, heartbeats=heartbeats)

    def _last_message(self, transcript: Transcript, ticket: Ticket, outcome: str,
                      report: Report | None) -> StreamMessage:
        if outcome == "failed":
            return transcript.failed((FAILED_DISK_FULL if ticket.disk_full else FAILED).format(qid=ticket.question.id))
        if report is None or report.markdown is None:
            if outcome == "deadline":
                return transcript.failed(f"No answer was written within the {self.settings.deadline_s:.0f}-second "
                                         "deadline.")
            return transcript.complete(NO_ANSWER_RESPONSE, [])  # the pipeline found no evidence to answer from
        return transcript.complete(report.markdown, report.citations)

    async def evaluate(self, ticket: Ticket) -> str:
        """``/evaluate``: the answer text, or what exists at the deadline (never empty: the static format
        cannot mark an answer as missing, as ``export-mmu`` does)."""
        outcome = "complete"
        try:
            await asyncio.wait_for(ticket.done.wait(), max(0.0, ticket.remaining))
            report = render_report(_answer_row(ticket.outputs.get(ANSWER_STAGE)))
            outcome = "failed" if ticket.failed else outcome
        except TimeoutError:
            report, outcome = partial_report(ticket.outputs), "deadline"
        self.finish_response(ticket, outcome, report)
        return redact(report.text or NO_ANSWER_RESPONSE) or NO_ANSWER_RESPONSE

    @property
    def max_depth(self) -> int:
        """The most follow-up research rounds a request may ask for (``depth``): 0 unless the variant looks again."""
        return self.cfg.research.max_rounds if self.cfg.research.enabled else 0

    def health(self) -> dict:
        plan = self.runs.plan()
        return {"status": "ok", "service": "hifirag", "profile": self.profile, "variant": self.cfg.variant,
                "config_hash": self.cfg.fingerprint()[:8], "run_id": plan.run_id, "in_flight": self.gate.in_flight,
                "concurrency": self.gate.capacity, "deadline_s": self.settings.deadline_s,
                "uptime_s": round(time.monotonic() - self.started, 1)}


def _answer_row(output: StageOutput | None) -> AnswerRecord | None:
    return next((r for r in output.records if isinstance(r, AnswerRecord)), None) if output else None
