"""Rate limiter, retries, budget and deadline: deterministic with a fake clock."""

from __future__ import annotations

import random
import threading
import time

import pytest

from hifirag_core.config import build_config
from hifirag_core.errors import BudgetExceededError, DeadlineExceededError, PermanentError, TransientError
from hifirag_core.limits import (
    WINDOW_MARGIN_S,
    Budget,
    Deadline,
    ProviderGuard,
    RateLimiter,
    RetryPolicy,
    RunGuards,
    current_deadline,
    parse_retry_after,
    question_deadline,
)


class FakeClock:
    """A clock that only moves when something sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_rpm_limit_spaces_starts_over_a_sliding_minute() -> None:
    clock = FakeClock()
    limiter = RateLimiter(rpm=3, clock=clock, sleep=clock.sleep)
    starts = []
    for _ in range(7):
        with limiter.slot():
            starts.append(clock.now)
    # three at once, then each new start waits for the oldest to leave the 60 s window (and the
    # margin that keeps our window behind the server's)
    m = WINDOW_MARGIN_S
    assert starts == [1000.0, 1000.0, 1000.0, 1060.0 + m, 1060.0 + m, 1060.0 + m, 1120.0 + 2 * m]
    assert limiter.waited_s == pytest.approx(120.0 + 2 * m)


def test_concurrency_bound_holds_across_threads() -> None:
    limiter = RateLimiter(concurrency=2)
    active, peak, lock = 0, 0, threading.Lock()

    def work() -> None:
        nonlocal active, peak
        with limiter.slot():
            with lock:
                active += 1
                peak = max(peak, active)
            time.sleep(0.02)
            with lock:
                active -= 1

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak == 2


def test_slot_wait_beyond_the_deadline_raises() -> None:
    clock = FakeClock()
    limiter = RateLimiter(rpm=1, clock=clock, sleep=clock.sleep)
    with limiter.slot():
        pass
    with pytest.raises(DeadlineExceededError), limiter.slot(Deadline(10, clock=clock)):
        pass
    assert clock.sleeps == []


def test_backoff_is_exponential_with_jitter_and_honours_retry_after() -> None:
    policy = RetryPolicy(base_delay_s=1.0, max_delay_s=10.0, rng=random.Random(1))
    for attempt, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (6, 10.0)]:
        delay = policy.delay(attempt, None)
        assert ceiling / 2 <= delay <= ceiling
    assert policy.delay(1, 7.0) == 7.0
    assert policy.delay(1, 500.0) == 10.0  # capped


def make_guard(retries: int = 3, budget: Budget | None = None, clock: FakeClock | None = None) -> tuple[ProviderGuard, FakeClock]:
    clock = clock or FakeClock()
    policy = RetryPolicy(retries=retries, base_delay_s=1.0, max_delay_s=30.0, sleep=clock.sleep, rng=random.Random(0))
    return ProviderGuard("p", RateLimiter(clock=clock, sleep=clock.sleep), policy, budget), clock


def test_transient_errors_are_retried_and_attempts_counted() -> None:
    guard, clock = make_guard()
    outcomes = [TransientError("429", retry_after=5.0), TransientError("503"), "ok"]

    def fn(timeout: float) -> str:
        out = outcomes.pop(0)
        if isinstance(out, Exception):
            raise out
        return out

    assert guard.call(fn, timeout=3, paid=False) == ("ok", 3)
    assert clock.sleeps[0] == 5.0 and 0.5 <= clock.sleeps[1] <= 1.0 * 2


@pytest.mark.parametrize(("refusal", "second_start"), [
    (TransientError("429", retry_after=1.0, rate_limited=True), 1001.0),  # not counted: retry at once
    (TransientError("503", retry_after=1.0), 1060.0 + WINDOW_MARGIN_S),  # the server ran it: still counted
])
def test_a_call_refused_for_the_rate_limit_gives_its_start_back(refusal: TransientError,
                                                                 second_start: float) -> None:
    clock = FakeClock()
    policy = RetryPolicy(retries=3, sleep=clock.sleep, rng=random.Random(0))
    guard = ProviderGuard("p", RateLimiter(rpm=2, clock=clock, sleep=clock.sleep), policy, None)
    starts: list[float] = []
    outcomes: list[object] = ["first", refusal, "second"]

    def fn(timeout: float) -> object:
        starts.append(clock.now)
        out = outcomes.pop(0)
        if isinstance(out, Exception):
            raise out
        return out

    assert guard.call(fn, timeout=3, paid=False) == ("first", 1)
    assert guard.call(fn, timeout=3, paid=False) == ("second", 2)
    assert starts == [1000.0, 1000.0, second_start]
    assert guard.limiter.refunded == (1 if refusal.rate_limited else 0)


def test_retries_run_out() -> None:
    guard, clock = make_guard(retries=2)
    calls = []

    def fn(timeout: float) -> None:
        calls.append(timeout)
        raise TransientError("500")

    with pytest.raises(TransientError) as info:
        guard.call(fn, timeout=3, paid=False)
    assert len(calls) == 3 and info.value.attempts == 3 and len(clock.sleeps) == 2


def test_permanent_errors_are_not_retried() -> None:
    guard, clock = make_guard()
    calls = []

    def fn(timeout: float) -> None:
        calls.append(1)
        raise PermanentError("400")

    with pytest.raises(PermanentError):
        guard.call(fn, timeout=3, paid=False)
    assert calls == [1] and clock.sleeps == []


def test_budget_stops_new_paid_calls_but_not_free_ones() -> None:
    budget = Budget(usd=0.01)
    guard, _ = make_guard(budget=budget)
    assert guard.call(lambda t: "paid", timeout=1, paid=True) == ("paid", 1)
    budget.charge(usd=0.02)
    assert budget.exhausted
    ran = []
    with pytest.raises(BudgetExceededError):
        guard.call(lambda t: ran.append(1), timeout=1, paid=True)
    assert ran == [] and budget.refused == 1
    assert guard.call(lambda t: "free", timeout=1, paid=False) == ("free", 1)


def test_token_budget_and_summary() -> None:
    budget = Budget(tokens=100)
    budget.charge(tokens=60)
    budget.check()
    budget.charge(tokens=60, usd=0.5)
    with pytest.raises(BudgetExceededError, match="120 of 100 tokens"):
        budget.check()
    assert budget.summary() == {"spent_usd": 0.5, "limit_usd": None, "spent_tokens": 120, "limit_tokens": 100,
                                "refused_calls": 1}


def test_budget_is_thread_safe() -> None:
    budget = Budget(usd=1000)

    def spend() -> None:
        for _ in range(1000):
            budget.charge(usd=0.001, tokens=1)

    threads = [threading.Thread(target=spend) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert budget.spent_tokens == 8000 and budget.spent_usd == pytest.approx(8.0)


def test_deadline_caps_timeouts_and_stops_retries() -> None:
    clock = FakeClock()
    guard, _ = make_guard(clock=clock)
    seen = []

    def fn(timeout: float) -> None:
        seen.append(timeout)
        clock.now += timeout
        raise TransientError("timeout", retry_after=20.0)

    with question_deadline(25, clock=clock) as deadline:
        assert current_deadline() is deadline
        with pytest.raises(DeadlineExceededError, match="no time left to retry"):
            guard.call(fn, timeout=30, paid=False)
    assert seen == [25.0]  # capped to the time left; the 20 s retry wait would pass the deadline
    assert current_deadline() is None


def test_passed_deadline_means_no_call() -> None:
    clock = FakeClock()
    guard, _ = make_guard(clock=clock)
    with question_deadline(5, clock=clock, start=clock.now - 10), pytest.raises(DeadlineExceededError):
        guard.call(lambda t: pytest.fail("must not run"), timeout=1, paid=False)


def test_deadline_is_per_thread() -> None:
    results: dict[str, object] = {}
    with question_deadline(100):
        t = threading.Thread(target=lambda: results.update(other=current_deadline()))
        t.start()
        t.join()
        results["here"] = current_deadline()
    assert results["other"] is None and results["here"] is not None


def test_run_guards_pick_model_specific_limits_and_share_the_budget() -> None:
    cfg = build_config(overrides={"limits": {"budget_usd": 2.0, "provider_rpm": {"gemini": 10, "gemini:big": 2},
                                             "provider_concurrency": {"gemini": 3}}})
    guards = RunGuards(cfg.limits)
    big, small = guards.guard("gemini", "big"), guards.guard("gemini", "small")
    assert big.limiter.rpm == 2 and small.limiter.rpm == 10 and big.limiter.concurrency == 3
    assert guards.guard("gemini", "big") is big
    assert big.budget is small.budget is guards.budget and guards.budget.limit_usd == 2.0
    assert guards.call_cost("google") == 0.005


@pytest.mark.parametrize(("value", "expected"), [
    ("7", 7.0), (" 1.5 ", 1.5), ("-3", 0.0), ("", None), (None, None), ("soon", None),
    ("Wed, 21 Oct 2015 07:28:10 GMT", 10.0),
])
def test_parse_retry_after(value: str | None, expected: float | None) -> None:
    from email.utils import parsedate_to_datetime

    now = parsedate_to_datetime("Wed, 21 Oct 2015 07:28:00 GMT").timestamp()
    assert parse_retry_after(value, now=lambda: now) == expected
