"""A run's rate limits and budget on the Prefect server, so they hold across processes and machines.

Each Dask worker builds its own adapters, so counts kept in memory would let every worker use a
provider's whole requests-per-minute and spend the whole budget. This ledger keeps them in the
server's global concurrency limits instead, which every worker reaches through the Prefect API:

* requests per minute: a limit with slot decay, taken with Prefect's ``rate_limit``. A decaying
  limit is a token bucket: ``burst`` slots refilled at ``decay`` per second. With
  ``burst + 60 * decay = rpm`` no 60-second window ever holds more than ``rpm`` starts;
* the budget: a limit without decay used as a counter, in units of 1e-5 USD and in tokens. A call
  adds its cost after it finishes; a cost that would pass the limit fills it, and from then on
  every process sees the budget spent.

Limit names: ``hifirag-rpm-<provider[-model]>`` (shared by every run against that provider, as the
provider's limit is) and ``hifirag-budget-{usd,tokens}-<run id>``, or ``-<limits.budget_name>`` for a
budget several runs share.
"""

from __future__ import annotations

import contextlib
import math
import re
import threading

import httpx
from prefect import get_client
from prefect.client.schemas.actions import GlobalConcurrencyLimitUpdate
from prefect.concurrency.sync import rate_limit
from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

from hifirag_core.config import LimitsConfig

USD_UNIT = 1e-5  # a budget counter slot; $21,474 fits PostgreSQL's 32-bit integer limit column


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-")


def bucket(rpm: float) -> tuple[int, float]:
    """``(burst, decay per second)`` of a token bucket that never starts more than ``rpm`` in 60 s."""
    burst = max(1, int(rpm // 10))
    if rpm < 2:  # one slot and a slower refill: at most rpm per minute after the first call
        return 1, rpm / 120
    return burst, (rpm - burst) / 60


class PrefectLedger:
    """:class:`hifirag_core.limits.Ledger` on the Prefect server's global concurrency limits."""

    def __init__(self, run_id: str, limits: LimitsConfig):
        self.limits = limits
        scope = _slug(limits.budget_name or run_id)
        self.usd_name = f"hifirag-budget-usd-{scope}"[:120]
        self.tokens_name = f"hifirag-budget-tokens-{scope}"[:120]
        self._ready: set[str] = set()
        self._lock = threading.Lock()

    # --- requests per minute ---------------------------------------------------------------------

    def rpm_limit_name(self, key: str) -> str:
        return f"hifirag-rpm-{_slug(key)}"[:120]

    def take_start(self, key: str, rpm: float, timeout: float | None) -> None:
        name = self.rpm_limit_name(key)
        burst, decay = bucket(rpm)
        self._ensure(name, burst, decay)
        rate_limit(name, occupy=1, timeout_seconds=timeout, strict=True)

    # --- the budget ----------------------------------------------------------------------------------

    def ensure_budget(self) -> None:
        """Create the run's budget counters (idempotent; a rerun of the run keeps what it spent)."""
        if self.limits.budget_usd is not None:
            self._ensure(self.usd_name, math.ceil(self.limits.budget_usd / USD_UNIT), 0.0)
        if self.limits.budget_tokens is not None:
            self._ensure(self.tokens_name, int(self.limits.budget_tokens), 0.0)

    def spent(self) -> tuple[float, int]:
        self.ensure_budget()
        usd = self._read(self.usd_name) * USD_UNIT if self.limits.budget_usd is not None else 0.0
        tokens = self._read(self.tokens_name) if self.limits.budget_tokens is not None else 0
        return usd, tokens

    def spend(self, usd: float, tokens: int) -> None:
        self.ensure_budget()
        if self.limits.budget_usd is not None and usd > 0:
            self._add(self.usd_name, math.ceil(usd / USD_UNIT))  # rounded up: never under-counted
        if self.limits.budget_tokens is not None and tokens > 0:
            self._add(self.tokens_name, int(tokens))

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

    @staticmethod
    def _read(name: str) -> int:
        with get_client(sync_client=True) as client:
            return int(client.read_global_concurrency_limit_by_name(name).active_slots)

    @staticmethod
    def _add(name: str, units: int) -> None:
        """Add ``units`` to a counter; what would pass its limit fills it instead (the budget is spent)."""
        with get_client(sync_client=True) as client:
            try:
                client.increment_concurrency_slots([name], units, mode="concurrency")
                return
            except httpx.HTTPStatusError as exc:
                if exc.response.status_code not in (422, 423):  # 422: more than the whole limit
                    raise
            limit = client.read_global_concurrency_limit_by_name(name).limit
            client.update_global_concurrency_limit(name, GlobalConcurrencyLimitUpdate(active_slots=limit))


def prefect_ledger(ctx) -> PrefectLedger:
    """The ledger of a run context (``runtime_for(..., ledger=prefect_ledger)``)."""
    return PrefectLedger(ctx.run_id, ctx.cfg.limits)
