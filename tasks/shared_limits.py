"""A run's rate limits and budget on the Prefect server, so they hold across processes and machines.

Each Dask worker builds its own adapters, so counts kept in memory would let every worker use a
provider's whole requests-per-minute and spend the whole budget. This ledger keeps them in the
server's global concurrency limits instead, which every worker reaches through the Prefect API:

* requests per minute: a limit with slot decay, taken as Prefect's ``rate_limit`` takes it. A decaying
  limit is a token bucket: ``burst`` slots refilled at ``decay`` per second. With
  ``burst + 60 * decay = rpm - burst`` (a margin for arrival delays) no 60-second window holds more than ``rpm`` starts;
* the budget: a limit without decay used as a counter, in units of 1e-5 USD and in tokens. A call
  adds its cost after it finishes; a cost that would pass the limit fills it, and from then on
  every process sees the budget spent.

When the server does not answer (stopped, restarting, unreachable), the ledger fails closed: a paid
call whose start or budget cannot be counted is not made. The ledger raises :class:`TransientError`,
so the call's retries (``limits.retries``, with backoff, within the question's deadline) ride out a
restart; past them the call ends with status ``failed`` saying why, and its stage falls back as it does
when a provider is down. Spending and rate limits are never counted in this process alone instead:
N processes doing so would spend N budgets. A finished call's cost that cannot be added is kept and
added with the next one that can, and a warning says so; the call's reply is kept (it was paid for).

Limit names: ``hifirag-rpm-<provider[-model]>`` (shared by every run against that provider, as the
provider's limit is) and ``hifirag-budget-{usd,tokens}-<run id>``, or ``-<limits.budget_name>`` for a
budget several runs share.
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
import threading
import time

import httpx
from prefect import get_client
from prefect.client.schemas.actions import GlobalConcurrencyLimitUpdate
from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

from hifirag_core.config import LimitsConfig
from hifirag_core.errors import TransientError

log = logging.getLogger(__name__)
# The server is away: refused or dropped connections, timeouts, 5xx after the Prefect client's own retries
# (TimeoutError, which take_start raises when its wait outlasts the deadline, is not among them).
UNREACHABLE = (httpx.HTTPError, ConnectionError)

USD_UNIT = 1e-5  # a budget counter slot; $21,474 fits PostgreSQL's 32-bit integer limit column


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-")


def bucket(rpm: float) -> tuple[int, float]:
    """``(burst, decay per second)`` of a token bucket that never starts more than ``rpm`` in 60 s."""
    burst = max(1, int(rpm // 10))
    if rpm < 2:  # one slot and a slower refill: at most rpm per minute after the first call
        return 1, rpm / 120
    # The provider counts a call when it arrives, which lags the start taken here by a varying delay
    # (the budget's second check, a loaded machine): at rpm >= 10 one burst's worth of the minute is
    # left as a margin for it (the two-process test saw 31 and 33 arrivals in a minute without it).
    margin = burst if rpm >= 10 else 0
    return burst, (rpm - burst - margin) / 60


class LimitMissing(Exception):
    """A counter the ledger made is not on the server (a server with a new database)."""


class PrefectLedger:
    """:class:`hifirag_core.limits.Ledger` on the Prefect server's global concurrency limits."""

    def __init__(self, run_id: str, limits: LimitsConfig):
        self.limits = limits
        scope = _slug(limits.budget_name or run_id)
        self.usd_name = f"hifirag-budget-usd-{scope}"[:120]
        self.tokens_name = f"hifirag-budget-tokens-{scope}"[:120]
        self._ready: set[str] = set()
        self._lock = threading.Lock()
        self._unsent_usd = 0  # spent while the server was away, in USD_UNIT and tokens: added when it answers
        self._unsent_tokens = 0

    # --- requests per minute ---------------------------------------------------------------------

    def rpm_limit_name(self, key: str) -> str:
        return f"hifirag-rpm-{_slug(key)}"[:120]

    def take_start(self, key: str, rpm: float, timeout: float | None) -> None:
        """Take one start from the provider's bucket, waiting as the server says (``Retry-After``).

        This is what Prefect's ``rate_limit`` sends, asked here with a new client each time: a client
        that has connected once retries a refused connection (``PREFECT_CLIENT_MAX_RETRIES``, minutes
        of doubling waits), and ``rate_limit``'s client lives for the whole process, so a server gone
        away would hold every call for minutes instead of failing it in about a second.
        """
        name = self.rpm_limit_name(key)
        burst, decay = bucket(rpm)
        ends = None if timeout is None else time.monotonic() + timeout
        missing = 0
        try:
            while True:
                self._ensure(name, burst, decay)
                try:
                    with get_client(sync_client=True) as client:
                        taken = client.increment_concurrency_slots([name], 1, mode="rate_limit").json()
                except httpx.HTTPStatusError as exc:
                    if exc.response.status_code != 423:  # 423 Locked: the bucket is empty for now
                        raise
                    wait = float(exc.response.headers.get("Retry-After") or 1.0)
                    if ends is not None and time.monotonic() + wait > ends:
                        raise TimeoutError(f"no start for {key} within {timeout:.1f} s") from None
                    time.sleep(wait)
                    continue
                if taken:
                    return
                missing += 1  # no such limit (a server whose database is new): made again, once
                if missing > 1:
                    raise unavailable(LimitMissing(name))
                self._forget(name)
        except UNREACHABLE as exc:
            raise unavailable(exc) from None

    # --- the budget ----------------------------------------------------------------------------------

    def ensure_budget(self) -> None:
        """Create the run's budget counters (idempotent; a rerun of the run keeps what it spent)."""
        if self.limits.budget_usd is not None:
            self._ensure(self.usd_name, math.ceil(self.limits.budget_usd / USD_UNIT), 0.0)
        if self.limits.budget_tokens is not None:
            self._ensure(self.tokens_name, int(self.limits.budget_tokens), 0.0)

    def spent(self) -> tuple[float, int]:
        try:
            self.ensure_budget()
            usd = self._read(self.usd_name) * USD_UNIT if self.limits.budget_usd is not None else 0.0
            tokens = self._read(self.tokens_name) if self.limits.budget_tokens is not None else 0
        except UNREACHABLE as exc:
            raise unavailable(exc) from None
        with self._lock:  # what this process spent while the server was away counts too
            return usd + self._unsent_usd * USD_UNIT, tokens + self._unsent_tokens

    def spend(self, usd: float, tokens: int) -> None:
        """Add a finished call's cost; with the server away, keep it for the next call's (and warn)."""
        with self._lock:
            if self.limits.budget_usd is not None and usd > 0:
                self._unsent_usd += math.ceil(usd / USD_UNIT)  # rounded up: never under-counted
            if self.limits.budget_tokens is not None and tokens > 0:
                self._unsent_tokens += int(tokens)
            units, count = self._unsent_usd, self._unsent_tokens
            self._unsent_usd = self._unsent_tokens = 0
        try:
            self.ensure_budget()
            if units:
                self._add(self.usd_name, units)
                units = 0
            if count:
                self._add(self.tokens_name, count)
                count = 0
        except UNREACHABLE as exc:
            with self._lock:
                self._unsent_usd += units
                self._unsent_tokens += count
                units, count = self._unsent_usd, self._unsent_tokens
            log.warning("%s; its cost (with earlier ones: %d tokens, $%.5f) is added when the server answers",
                        unavailable(exc, "a finished call's cost could not be added"), count, units * USD_UNIT)

    # --- the server ----------------------------------------------------------------------------------

    def _ensure(self, name: str, limit: int, decay: float) -> None:
        with self._lock:
            if name in self._ready:
                return
            with get_client(sync_client=True) as client:
                try:
                    current = client.read_global_concurrency_limit_by_name(name)
                except ObjectNotFound:
                    current = None
                if current is None:
                    with contextlib.suppress(ObjectAlreadyExists):  # another process created it first
                        client.upsert_global_concurrency_limit_by_name(name, limit, slot_decay_per_second=decay)
                elif current.limit != limit or current.slot_decay_per_second != decay:
                    client.update_global_concurrency_limit(
                        name, GlobalConcurrencyLimitUpdate(limit=limit, slot_decay_per_second=decay))
            self._ready.add(name)

    def _read(self, name: str) -> int:
        try:
            with get_client(sync_client=True) as client:
                return int(client.read_global_concurrency_limit_by_name(name).active_slots)
        except ObjectNotFound:  # a server whose database is new (or a limit deleted): made again, empty
            self._forget(name)
            self.ensure_budget()
            return 0

    def _add(self, name: str, units: int) -> None:
        try:
            self._add_once(name, units)
        except (ObjectNotFound, LimitMissing):
            self._forget(name)
            self.ensure_budget()
            self._add_once(name, units)

    def _forget(self, name: str) -> None:
        with self._lock:
            self._ready.discard(name)

    @staticmethod
    def _add_once(name: str, units: int) -> None:
        """Add ``units`` to a counter; what would pass its limit fills it instead (the budget is spent)."""
        with get_client(sync_client=True) as client:
            try:
                taken = client.increment_concurrency_slots([name], units, mode="concurrency").json()
                if not taken:  # the server has no such limit (it answers 200 and takes nothing)
                    raise LimitMissing(name)
                return
            except httpx.HTTPStatusError as exc:
                if exc.response.status_code not in (422, 423):  # 422: more than the whole limit
                    raise
            limit = client.read_global_concurrency_limit_by_name(name).limit
            client.update_global_concurrency_limit(name, GlobalConcurrencyLimitUpdate(active_slots=limit))


def unavailable(exc: BaseException, outcome: str = "the call was not made") -> TransientError:
    """The error a paid call gets when the server that counts its limits does not answer."""
    from prefect.settings import get_current_settings

    return TransientError(f"the Prefect API server that counts rate limits and budgets across processes "
                          f"({get_current_settings().api.url}) does not answer ({type(exc).__name__}: {exc}); "
                          f"{outcome}")


def prefect_ledger(ctx) -> PrefectLedger:
    """The ledger of a run context (``runtime_for(..., ledger=prefect_ledger)``)."""
    return PrefectLedger(ctx.run_id, ctx.cfg.limits)
