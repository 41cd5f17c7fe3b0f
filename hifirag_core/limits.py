"""Rate limits, retries, the run budget and the per-question deadline, all thread-safe.

Questions run in threads, so one :class:`RunGuards` per run is shared by every adapter:

* a :class:`RateLimiter` per provider (or ``provider:model``): at most ``concurrency`` calls in
  flight and at most ``rpm`` call starts in any sliding 60-second window (plus a small margin);
  a call the server turned away for its rate limit gives its start back;
* a :class:`RetryPolicy`: exponential backoff with jitter on :class:`TransientError` only (429,
  5xx, timeouts, dropped connections), honouring the server's ``Retry-After``; anything else is
  raised at once;
* a :class:`Budget` in dollars and/or tokens: once spent, :meth:`Budget.check` raises
  :class:`BudgetExceededError` before a new paid call starts (checked before the call waits for its
  rate-limit slot and again once it has one). Calls already sent finish and are charged, so the
  total can end slightly above the limit;
* a :class:`Deadline` per question, carried in a context variable so that adapters shorten their
  timeouts and stop retrying when the question's time is up.

Within one process these are counted in memory. When a run's questions are spread over several
processes (Dask workers, on one machine or many), a :class:`Ledger` counts the rpm starts and the
spending instead, outside the process: ``tasks/shared_limits.py`` keeps them in the Prefect server's global
concurrency limits, so the providers' limits and the run's budget hold for the run as a whole.
Concurrency caps stay per process: they bound sockets and threads, which are a process's own.

Clocks and sleeps are injectable so tests run without waiting.
"""

from __future__ import annotations

import contextlib
import contextvars
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from hifirag_core.config import LimitsConfig
from hifirag_core.errors import BudgetExceededError, DeadlineExceededError, PermanentError, TransientError

T = TypeVar("T")
Clock = Callable[[], float]
Sleep = Callable[[float], None]

_WINDOW_S = 60.0
# Our minute is this much longer than the server's. Our window starts a call when we send it, the
# server's when it arrives, and that delay varies from call to call: without a margin, a call sent
# the instant our window frees reaches a server whose window is still full about half the time
# (20 refusals in 100 rate-bound writer calls in bench_backends). 0.5 s is far above the jitter of
# a request's way to the server and costs under 1% of a minute's calls.
WINDOW_MARGIN_S = 0.5


class Ledger(Protocol):
    """Counts kept outside the process, shared by every process of a run."""

    def take_start(self, key: str, rpm: float, timeout: float | None) -> None:
        """Block until ``key`` may start one more call within ``rpm``; ``TimeoutError`` after ``timeout``."""
        ...

    def spent(self) -> tuple[float, int]:
        """Dollars and tokens the run has spent so far, in every process."""
        ...

    def spend(self, usd: float, tokens: int) -> None:
        """Add a finished call's cost to the run's total."""
        ...


class RateLimiter:
    """Bounded concurrency plus a sliding-window requests-per-minute cap.

    With a ``ledger``, the rpm starts are counted there (for every process of the run) instead of in
    this process's window.
    """

    def __init__(self, *, concurrency: int | None = None, rpm: float | None = None,
                 clock: Clock = time.monotonic, sleep: Sleep = time.sleep,
                 window_margin_s: float = WINDOW_MARGIN_S, key: str = "", ledger: Ledger | None = None):
        if concurrency is not None and concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if rpm is not None and rpm <= 0:
            raise ValueError("rpm must be positive")
        self.concurrency = concurrency
        self.rpm = rpm
        self.window_s = _WINDOW_S + window_margin_s
        self._slots = threading.BoundedSemaphore(concurrency) if concurrency else None
        self._starts: deque[float] = deque()
        self._lock = threading.Lock()
        self._clock = clock
        self._sleep = sleep
        self.waited_s = 0.0  # total time callers spent waiting for a rpm slot (for benchmarks)
        self.refunded = 0  # starts given back after the server refused the call for its rate limit
        self.key = key
        self.ledger = ledger

    def _reserve_start(self) -> tuple[float, float]:
        """Record a call start if the window allows one now: ``(0, start)``, else ``(wait, 0)``."""
        limit = int(self.rpm) if self.rpm else 0
        with self._lock:
            now = self._clock()
            while self._starts and now - self._starts[0] >= self.window_s:
                self._starts.popleft()
            if not limit or len(self._starts) < max(1, limit):
                self._starts.append(now)
                return 0.0, now
            return self._starts[0] + self.window_s - now, 0.0

    def _refund(self, start: float) -> None:
        """Take a start out of the window (it may already have left it)."""
        with self._lock:
            try:
                self._starts.remove(start)
            except ValueError:
                return
            self.refunded += 1

    @contextlib.contextmanager
    def slot(self, deadline: Deadline | None = None) -> Iterator[None]:
        """Hold one concurrency slot and one rpm start for the duration of a call."""
        if self._slots is not None:
            timeout = deadline.remaining() if deadline else None
            if timeout is not None and timeout <= 0:
                raise DeadlineExceededError("deadline passed while waiting for a free slot")
            if not self._slots.acquire(timeout=timeout):
                raise DeadlineExceededError("deadline passed while waiting for a free slot")
        try:
            if self.ledger is not None and self.rpm:
                self._take_shared_start(deadline)
                yield
                return
            while True:
                wait, start = self._reserve_start()
                if wait <= 0:
                    break
                if deadline is not None and deadline.remaining() < wait:
                    raise DeadlineExceededError(f"rate limit wait {wait:.1f}s exceeds the deadline")
                with self._lock:
                    self.waited_s += wait
                self._sleep(wait)
            try:
                yield
            except TransientError as exc:
                # Our window starts a call when we send it, the server's when it arrives, so a
                # call sent the moment our window allows can reach a server whose window is not
                # yet free. A refusal for the rate limit is turned away before any work, and we
                # take it as not counted (the fakes do not count it; providers do not document
                # it either way). Keeping the start would leave our window a call short of the
                # server's for a whole minute, a lost slot per refusal (7 of 100 writer calls in
                # bench_backends at 12 rpm). The retry still waits for the server's Retry-After
                # and takes a new start, so a server that did count it answers with another
                # Retry-After, which the retry honours.
                if exc.rate_limited:
                    self._refund(start)
                raise
        finally:
            if self._slots is not None:
                self._slots.release()

    def _take_shared_start(self, deadline: Deadline | None) -> None:
        assert self.ledger is not None and self.rpm
        timeout = deadline.remaining() if deadline is not None else None
        began = self._clock()
        try:
            self.ledger.take_start(self.key, self.rpm, timeout)
        except TimeoutError:
            raise DeadlineExceededError("deadline passed while waiting for the shared rate limit") from None
        finally:
            with self._lock:
                self.waited_s += self._clock() - began


@dataclass
class RetryPolicy:
    """Exponential backoff with full jitter for transient errors; Retry-After wins when given."""

    retries: int = 3
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0
    sleep: Sleep = time.sleep
    rng: random.Random = field(default_factory=random.Random)

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based)."""
        if retry_after is not None and retry_after >= 0:
            return min(retry_after, self.max_delay_s)
        ceiling = min(self.max_delay_s, self.base_delay_s * (2 ** (attempt - 1)))
        # "Full jitter": spreads the retries of many threads that failed together.
        return self.rng.uniform(ceiling / 2, ceiling)


class Budget:
    """A run's spending limit in dollars and/or tokens, shared by every paid call.

    With a ``ledger`` the totals are the run's over every process; without, this process's.
    """

    def __init__(self, *, usd: float | None = None, tokens: int | None = None, ledger: Ledger | None = None):
        self.limit_usd = usd
        self.limit_tokens = tokens
        self.ledger = ledger if usd is not None or tokens is not None else None
        self.spent_usd = 0.0  # by this process
        self.spent_tokens = 0
        self.refused = 0  # calls not started because the budget was spent
        self._lock = threading.Lock()

    def spent(self) -> tuple[float, int]:
        """Dollars and tokens the run has spent: in every process with a ledger, else in this one."""
        return self._totals()

    def _totals(self) -> tuple[float, int]:
        if self.ledger is not None:
            return self.ledger.spent()
        with self._lock:
            return self.spent_usd, self.spent_tokens

    def _exhausted(self, usd: float, tokens: int) -> bool:
        return (self.limit_usd is not None and usd >= self.limit_usd) or (
            self.limit_tokens is not None and tokens >= self.limit_tokens
        )

    @property
    def exhausted(self) -> bool:
        """True once either limit is reached."""
        return self._exhausted(*self._totals())

    def check(self) -> None:
        """Raise ``BudgetExceededError`` if no new paid call may start."""
        usd, tokens = self._totals()
        if self._exhausted(usd, tokens):
            with self._lock:
                self.refused += 1
            raise BudgetExceededError(f"run budget spent: ${usd:.4f} of {self.limit_usd} USD, "
                                      f"{tokens} of {self.limit_tokens} tokens")

    def charge(self, *, usd: float | None = None, tokens: int | None = None) -> None:
        """Add a finished call's cost (to the run's total, and to the tally of the call being counted)."""
        with self._lock:
            self.spent_usd += usd or 0.0
            self.spent_tokens += tokens or 0
        tally = _current_tally.get()
        if tally is not None and usd:
            tally.cost_usd = (tally.cost_usd or 0.0) + usd
        if self.ledger is not None and (usd or tokens):
            self.ledger.spend(usd or 0.0, tokens or 0)

    def summary(self) -> dict[str, float | int | None]:
        """Spent and limits, for the run's closing note."""
        usd, tokens = self._totals()
        with self._lock:
            refused = self.refused
        return {"spent_usd": round(usd, 6), "limit_usd": self.limit_usd, "spent_tokens": tokens,
                "limit_tokens": self.limit_tokens, "refused_calls": refused}


class Deadline:
    """A point in time by which a question must be finished."""

    def __init__(self, seconds: float, *, clock: Clock = time.monotonic, start: float | None = None):
        self._clock = clock
        self.expires_at = (clock() if start is None else start) + seconds

    def remaining(self) -> float:
        """Seconds left (negative once passed)."""
        return self.expires_at - self._clock()

    def check(self) -> None:
        """Raise ``DeadlineExceededError`` once the deadline has passed."""
        if self.remaining() <= 0:
            raise DeadlineExceededError("the question's deadline has passed")

    def cap(self, timeout: float) -> float:
        """``timeout`` shortened to the time left; at least a few ms so a call can fail cleanly."""
        return max(0.01, min(timeout, self.remaining()))


_current_deadline: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar("hifirag_deadline",
                                                                                    default=None)


@contextlib.contextmanager
def question_deadline(seconds: float, *, clock: Clock = time.monotonic,
                      start: float | None = None) -> Iterator[Deadline]:
    """Make every adapter call in this thread (context) respect a deadline.

    ``start`` lets a task that runs in another thread rebuild the same deadline from the
    question's start time (``time.monotonic()`` taken when the question began).
    """
    deadline = Deadline(seconds, clock=clock, start=start)
    token = _current_deadline.set(deadline)
    try:
        yield deadline
    finally:
        _current_deadline.reset(token)


def current_deadline() -> Deadline | None:
    """The deadline of the question being worked on in this context, if any."""
    return _current_deadline.get()


@dataclass
class CallTally:
    """What one adapter call came to behind its guard: the attempts, the back-off waited between them (and
    how many of them the provider had turned away for its rate limit), and the USD charged. A stage opens
    one around each call it wants a row for (``counting``); the guard and the budget fill it in."""

    attempts: int = 0
    backoff_s: float = 0.0
    rate_limited: int = 0
    queued_s: float = 0.0  # waiting for a slot under the provider's concurrency and rpm limits
    cost_usd: float | None = None


_current_tally: contextvars.ContextVar[CallTally | None] = contextvars.ContextVar("hifirag_call_tally",
                                                                                default=None)


@contextlib.contextmanager
def counting() -> Iterator[CallTally]:
    """Tally the guarded calls made in this context (this thread, or a copy of its context)."""
    tally = CallTally()
    token = _current_tally.set(tally)
    try:
        yield tally
    finally:
        _current_tally.reset(token)


class ProviderGuard:
    """The limiter, retry policy and budget in front of one provider's calls."""

    def __init__(self, name: str, limiter: RateLimiter, retry: RetryPolicy, budget: Budget | None):
        self.name = name
        self.limiter = limiter
        self.retry = retry
        self.budget = budget

    def call(self, fn: Callable[[float], T], *, timeout: float, paid: bool) -> tuple[T, int]:
        """Run ``fn(timeout)`` with limits and retries; returns its value and the attempt count.

        Errors raised carry the attempt count in ``exc.attempts``. ``TransientError`` is retried
        up to ``retry.retries`` times; ``PermanentError``, budget and deadline errors are not.
        """
        attempt = 0
        tally = _current_tally.get()
        while True:
            attempt += 1
            if tally is not None:
                tally.attempts += 1
            deadline = current_deadline()
            try:
                if deadline is not None:
                    deadline.check()
                if paid and self.budget is not None:
                    self.budget.check()
                asked = time.monotonic()
                with self.limiter.slot(deadline):
                    if tally is not None:
                        tally.queued_s += time.monotonic() - asked
                    if paid and self.budget is not None:
                        # again: the wait for a slot can be long, and other calls (other processes' too)
                        # may have spent the budget meanwhile
                        self.budget.check()
                    call_timeout = deadline.cap(timeout) if deadline else timeout
                    return fn(call_timeout), attempt
            except TransientError as exc:
                if attempt > self.retry.retries:
                    exc.attempts = attempt  # type: ignore[attr-defined]
                    raise
                wait = self.retry.delay(attempt, exc.retry_after)
                if deadline is not None and deadline.remaining() <= wait:
                    err = DeadlineExceededError(f"no time left to retry after: {exc}")
                    err.attempts = attempt  # type: ignore[attr-defined]
                    raise err from exc
                if tally is not None:
                    tally.backoff_s += wait
                    tally.rate_limited += bool(getattr(exc, "rate_limited", False))
                self.retry.sleep(wait)
            except (PermanentError, BudgetExceededError, DeadlineExceededError) as exc:
                exc.attempts = attempt  # type: ignore[attr-defined]
                raise


class RunGuards:
    """One per run: a guard per provider key, sharing the run's budget."""

    def __init__(self, cfg: LimitsConfig, *, budget: Budget | None = None, clock: Clock = time.monotonic,
                 sleep: Sleep = time.sleep, rng: random.Random | None = None, ledger: Ledger | None = None):
        self.cfg = cfg
        self.ledger = ledger
        self.budget = budget if budget is not None else Budget(usd=cfg.budget_usd, tokens=cfg.budget_tokens,
                                                               ledger=ledger)
        self._clock = clock
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._guards: dict[str, ProviderGuard] = {}
        self._lock = threading.Lock()

    def guard(self, provider: str, model: str | None = None) -> ProviderGuard:
        """The guard for ``provider`` (and ``model``: a ``provider:model`` entry overrides)."""
        key = f"{provider}:{model}" if model else provider
        with self._lock:
            if key not in self._guards:
                conc = self.cfg.provider_concurrency.get(key, self.cfg.provider_concurrency.get(provider))
                rpm = self.cfg.provider_rpm.get(key, self.cfg.provider_rpm.get(provider))
                limiter = RateLimiter(concurrency=conc, rpm=rpm, clock=self._clock, sleep=self._sleep, key=key,
                                      ledger=self.ledger)
                retry = RetryPolicy(retries=self.cfg.retries, base_delay_s=self.cfg.retry_base_delay_s,
                                    max_delay_s=self.cfg.retry_max_delay_s, sleep=self._sleep, rng=self._rng)
                self._guards[key] = ProviderGuard(key, limiter, retry, self.budget)
            return self._guards[key]

    def call_cost(self, provider: str) -> float | None:
        """USD per successful call for providers billed per request (search APIs)."""
        return self.cfg.call_cost_usd.get(provider)


def parse_retry_after(value: str | None, *, now: Callable[[], float] = time.time) -> float | None:
    """Seconds from a ``Retry-After`` header: delta-seconds or an HTTP date (RFC 9110 §10.2.3)."""
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now())
