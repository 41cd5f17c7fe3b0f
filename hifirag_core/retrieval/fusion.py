"""Several search providers' result lists as one: reciprocal rank fusion, duplicates merged by URL.

Reciprocal rank fusion (Cormack, Clarke and Büttcher, SIGIR 2009) scores a result by the sum over the
lists that hold it of ``1 / (k + rank)``; ``k`` (60 in the paper) damps the head of each list, so a page
two providers both rank fifth beats one that a single provider ranks first. It needs no scores, only
ranks, which is all a web search API gives. Two results are one page when their URLs are the same once
normalised (:func:`url_identity`); the merged row keeps every provider that found it and its rank there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from hifirag_core.types import SearchHit

RRF_K = 60  # the paper's constant

# Query parameters that track a click and never choose the page.
_TRACKING = ("utm_", "gclid", "fbclid", "msclkid", "mc_cid", "mc_eid", "ref_src")


def url_identity(url: str) -> str:
    """The form two results are compared in: lower-case scheme and host, ``http`` as ``https``, no ``www.``,
    no default port, fragment or tracking parameters, sorted parameters, no trailing slash."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return url.strip()
    scheme = parts.scheme.lower()
    scheme = "https" if scheme == "http" else scheme
    host = (parts.hostname or "").lower().removeprefix("www.")
    if port is not None and port not in (80, 443):
        host = f"{host}:{port}"
    query = sorted(
        (k, v)
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
        if not k.lower().startswith(_TRACKING)
    )
    path = parts.path.rstrip("/") or ""
    return urlunsplit((scheme, host, path, urlencode(query), ""))


@dataclass(frozen=True)
class FusedHit:
    """One page of the fused list: the hit shown (from the provider that ranked it best), its fused score,
    and every provider that found it with its rank there, in the providers' order."""

    hit: SearchHit
    provider: str
    score: float
    found_by: tuple[tuple[str, int], ...]


def reciprocal_rank_fusion(ranked: Mapping[str, Sequence[SearchHit]], k: int = RRF_K) -> list[FusedHit]:
    """The providers' lists (in the mapping's order; each best first) fused, best first.

    Ties in score go to the page with the better single rank, then to the earlier provider's, then to
    the order the pages were first seen, so the fused order is deterministic. A provider that lists a page
    twice counts its better rank only.
    """
    if k < 0:
        raise ValueError(f"the fusion constant k must be >= 0, not {k}")
    found: dict[str, dict[str, int]] = {}  # url identity -> provider -> its best rank
    shown: dict[
        str, tuple[int, int, str, SearchHit]
    ] = {}  # url identity -> (rank, provider index, name, hit)
    for p_index, (provider, hits) in enumerate(ranked.items()):
        for rank, hit in enumerate(hits, 1):
            if not hit.url:
                continue
            key = url_identity(hit.url)
            ranks = found.setdefault(key, {})
            if provider in ranks:
                continue
            ranks[provider] = rank
            best = shown.get(key)
            if best is None or (rank, p_index) < best[:2]:
                shown[key] = (rank, p_index, provider, hit)
    order = {key: i for i, key in enumerate(found)}
    fused = [
        FusedHit(
            hit=shown[key][3],
            provider=shown[key][2],
            score=sum(1.0 / (k + r) for r in ranks.values()),
            found_by=tuple(ranks.items()),
        )
        for key, ranks in found.items()
    ]
    fused.sort(
        key=lambda f: (
            -f.score,
            min(r for _, r in f.found_by),
            list(ranked).index(f.provider),
            order[url_identity(f.hit.url)],
        )
    )
    return fused
