"""How the project's token estimate compares with a real tokenizer (Gemma 3's, through the llama.cpp server).

The window check (``hifirag_core/llm/window.py``) counts a prompt's tokens without the model's tokenizer. This
prints, over real prompts built from the documentation corpus (every section-ranking prompt of a page's whole
section list, and writer prompts of a page's sections), the server's own count (``POST /extras/tokenize/count``
of llama-cpp-python's server, plus the chat template's tokens) against the check's estimate: the ratio real/estimate (below 1: the estimate errs on the
side of fitting), the share of prompts the estimate undercounts, and characters per real token. It also
measures the chat template's tokens per turn (``usage.prompt_tokens`` of a one-token completion less the text's
own count) against ``TURN_OVERHEAD_TOKENS``, and, for comparison, the writer context's older bound of three
characters per token.

    /work/main/.venv/bin/python bench/bench_token_counts.py              # every 25th corpus page
    /work/main/.venv/bin/python bench/bench_token_counts.py --sample 5

Needs the ``local-model`` extra and the shared corpus (``HIFIRAG_SHARED_DATA``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hifirag_core.corpus.sites import docs_html_dir, iter_tarball_pages  # noqa: E402
from hifirag_core.llm.prompts import PromptSet, render_section_previews, render_sources  # noqa: E402
from hifirag_core.llm.window import TURN_OVERHEAD_TOKENS, estimate_tokens  # noqa: E402
from hifirag_core.sectioning import parse_sections  # noqa: E402
from hifirag_core.types import SectionPreview, SourceDoc, SourceSection  # noqa: E402
from tests.support.llama_server import MODEL_ALIAS, llama_server, unavailable_reason  # noqa: E402

QUESTION = "How do I configure this, and what are the defaults?"
# A few texts the corpus lacks (it is English documentation), for information: not part of the verdict.
OTHER = {
    "German prose": "Die Verbindung zum Datenbankserver wird nach dreißig Sekunden Untätigkeit geschlossen. " * 20,
    "Japanese prose": "接続プールのタイムアウトは秒単位で設定します。既定値は三十秒です。" * 20,
    "numbers": "2024-11-03 12:45:07.123 1048576 3.14159 0x7fff 255.255.255.0 " * 20,
}


def prompts_of(sample: int, prompts: PromptSet) -> list[tuple[str, str]]:
    """(kind, prompt text) for every sampled corpus page: its whole section list, and its first sections as a
    writer would get them (up to 20,000 characters)."""
    out = []
    for tarball in sorted(docs_html_dir().glob("*.html.tar.xz")):
        for i, page in enumerate(iter_tarball_pages(tarball)):
            if i % sample:
                continue
            sections = parse_sections(page.html, page.url).sections
            if not sections:
                continue
            previews = [SectionPreview(s.section_id, s.heading, f"{' > '.join(s.heading_path)}: {s.text[:200]}")
                        for s in sections]
            out.append(("section_rank", prompts["section_rank"].render(
                question=QUESTION, page_overview=f"{page.title or ''} ({page.url})",
                section_previews=render_section_previews(previews))))
            kept, size = [], 0
            for s in sections:
                if size + len(s.text) > 20_000:
                    break
                kept.append(SourceSection(s.section_id, tuple(s.heading_path), s.text))
                size += len(s.text)
            if kept:
                doc = SourceDoc(1, page.url, page.title or "", "", tuple(kept))
                out.append(("draft", prompts["draft"].render(question=QUESTION, web_content=render_sources([doc]))))
    return out


def count(client: httpx.Client, base: str, text: str) -> int:
    reply = client.post(f"{base}/extras/tokenize/count", json={"input": text, "model": MODEL_ALIAS})
    reply.raise_for_status()
    return int(reply.json()["count"])


def template_tokens(client: httpx.Client, base: str, text: str) -> int:
    """The chat template's tokens around one user turn: what the server bills less the text's own count."""
    reply = client.post(f"{base}/v1/chat/completions", json={
        "model": MODEL_ALIAS, "messages": [{"role": "user", "content": text}], "max_tokens": 1, "temperature": 0})
    reply.raise_for_status()
    return int(reply.json()["usage"]["prompt_tokens"]) - count(client, base, text)


def summary(name: str, rows: list[tuple[int, int, int]]) -> None:
    """rows: (chars, real tokens, estimate)."""
    ratios = sorted(real / est for _, real, est in rows)
    old = sorted(real / (chars / 3.0) for chars, real, _ in rows)
    under = sum(1 for _, real, est in rows if real > est)
    chars = sum(c for c, _, _ in rows)
    real = sum(r for _, r, _ in rows)
    p99 = ratios[min(len(ratios) - 1, int(0.99 * len(ratios)))]
    print(f"{name:<16}{len(rows):>7}{chars / real:>11.2f}{ratios[0]:>8.2f}{statistics.median(ratios):>8.2f}"
          f"{p99:>8.2f}{ratios[-1]:>8.2f}{under:>7}{old[-1]:>10.2f}{max(r for _, r, _ in rows):>10,}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample", type=int, default=25, help="every Nth corpus page [25]")
    args = parser.parse_args()
    if reason := unavailable_reason():
        print(f"skipped: {reason}")
        return
    if not docs_html_dir().is_dir():
        print(f"skipped: no corpus at {docs_html_dir()} (set HIFIRAG_SHARED_DATA)")
        return
    prompts = PromptSet.load()
    texts = prompts_of(args.sample, prompts)
    log = Path(tempfile.mkdtemp(prefix="hifirag-bench-tokens-")) / "server.log"
    with llama_server(log) as base_url, httpx.Client(timeout=600) as client:
        base = base_url.removesuffix("/v1")
        template = [template_tokens(client, base, t) for t in ("Hello.", texts[0][1][:2000])]
        # as the window check compares them: the prompt as the server bills it (the text and the chat template)
        # against the estimate with TURN_OVERHEAD_TOKENS
        rows: dict[str, list[tuple[int, int, int]]] = {}
        for kind, text in texts:
            rows.setdefault(kind, []).append((len(text), count(client, base, text) + max(template),
                                              estimate_tokens(text) + TURN_OVERHEAD_TOKENS))
        other = {name: (len(t), count(client, base, t) + max(template), estimate_tokens(t) + TURN_OVERHEAD_TOKENS)
                 for name, t in OTHER.items()}
    print(f"\nGemma 3 tokenizer (llama.cpp server) vs the estimate; corpus pages: one in {args.sample}")
    print(f"{'prompts':<16}{'n':>7}{'chars/tok':>11}{'min':>8}{'median':>8}{'p99':>8}{'max':>8}{'under':>7}"
          f"{'chars/3':>10}{'max real':>10}")
    print("  (min..max: real tokens (text + chat template) / the check's estimate (text + "
          f"{TURN_OVERHEAD_TOKENS}); under: prompts it undercounts; chars/3: the highest real / (chars / 3), "
          "the writer context's older bound)")
    for kind, kind_rows in rows.items():
        summary(kind, kind_rows)
    summary("all", [r for kind_rows in rows.values() for r in kind_rows])
    for name, row in other.items():
        summary(name, [row])
    print(f"chat template tokens per user turn: {template} (the estimate adds {TURN_OVERHEAD_TOKENS})")


if __name__ == "__main__":
    main()
