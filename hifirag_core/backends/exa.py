"""The Exa search API as a ``SearchBackend`` through its client, ``exa-py`` (key: ``EXA_API_KEY``).

Wire format (https://docs.exa.ai/reference/search), which ``Exa(api_key, base_url=...).search(...)`` sends:
``POST {base}/search`` with the header ``x-api-key`` and a JSON body ``{"query", "numResults" (1–100), "type":
"auto", "includeDomains"?, "excludeDomains"?, "startPublishedDate"?, "endPublishedDate"? (ISO 8601 date-times),
"contents"?}``. The reply is ``{"requestId", "resolvedSearchType", "results": [{"id", "title", "url",
"publishedDate", "author", "highlights"?, ...}], "costDollars": {"total", ...}}``. This adapter asks for
highlights (short extracts, the snippet the URL filter reads) and charges the run what ``costDollars.total`` says
(else ``limits.call_cost_usd.exa``). The client reports an HTTP error as a ``ValueError`` that names the status,
which the adapter reads back: 429 and 5xx are retried with backoff, another status fails at once; a timeout
(``ExaTimeoutError``) and a failed connection are retried.

Steering: site rules as ``includeDomains`` / ``excludeDomains``; a date window as ``startPublishedDate`` /
``endPublishedDate``. The stages after search enforce every rule again.
"""

from __future__ import annotations

import re
from typing import Any

from hifirag_core.backend_registry import search_url
from hifirag_core.backends.http_common import error_for_status, transport_error
from hifirag_core.backends.search_common import KeyedClientBackend, charge, domain_fields, hit
from hifirag_core.errors import CallTimeoutError, TransientError
from hifirag_core.secrets import get_secret, redact
from hifirag_core.types import SearchHit, SearchSteer

MAX_RESULTS = 100
_STATUS = re.compile(r"status code (\d{3}): ?(.*)", re.DOTALL)


def steered_fields(steer: SearchSteer | None) -> dict[str, object]:
    """The ``search()`` arguments that carry ``steer`` (see the module docstring)."""
    if steer is None or not steer.active:
        return {}
    fields = domain_fields(steer, "include_domains", "exclude_domains")
    if steer.window.after:
        fields["start_published_date"] = f"{steer.window.after.isoformat()}T00:00:00.000Z"
    if steer.window.before:
        fields["end_published_date"] = f"{steer.window.before.isoformat()}T23:59:59.999Z"
    return fields


class ExaSearchBackend(KeyedClientBackend):
    """Exa's search with highlights as snippets, behind the run's guard."""

    provider = "exa"

    def _once(self, query: str, num: int, steering: dict[str, Any], timeout: float) -> Any:
        import requests
        from exa_py import Exa
        from exa_py.errors import ExaTimeoutError

        client = Exa(api_key=self._key.reveal(), base_url=self._url, timeout=timeout)
        try:
            return client.search(query, num_results=num, type="auto", contents={"highlights": True}, **steering)
        except ExaTimeoutError as exc:
            raise CallTimeoutError(redact(f"exa: timed out ({exc})") or "") from None
        except requests.RequestException as exc:
            raise transport_error("exa", exc) from None
        except ValueError as exc:  # the client's HTTP errors, and a body that is not JSON
            found = _STATUS.search(str(exc))
            if found is None:
                raise TransientError(redact(f"exa: unreadable reply: {exc}") or "") from None
            raise error_for_status("exa", int(found[1]), None, found[2]) from None

    def search(self, query: str, *, num: int, steer: SearchSteer | None = None) -> list[SearchHit]:
        """Up to ``num`` results in Exa's order."""
        size = max(1, min(num, MAX_RESULTS))
        reply, _ = self._guard.call(lambda t: self._once(query, size, steered_fields(steer), t),
                                    timeout=self._timeout, paid=True)
        stated = getattr(getattr(reply, "cost_dollars", None), "total", None)
        charge(self._guard, float(stated) if isinstance(stated, (int, float)) else self._cost)
        hits = []
        for r in reply.results or []:
            highlights = [str(x) for x in (getattr(r, "highlights", None) or [])]
            found = hit(getattr(r, "title", ""), getattr(r, "url", ""),
                        " ".join(highlights) or getattr(r, "text", None))
            if found:
                hits.append(found)
        return hits[:num]


def build(cfg, guards, env) -> ExaSearchBackend:
    """The backend of the ``exa`` row (hifirag_core.backend_registry)."""
    return ExaSearchBackend(api_key=get_secret("exa_api_key", env), base_url=search_url(cfg, "exa"),
                            guard=guards.guard("exa"), timeout_s=cfg.limits.search_timeout_s,
                            call_cost_usd=guards.call_cost("exa"))
