"""The answerability transfer set: the docs corpus and a health corpus, to fit on one and measure on the other.

A judgment of "do my sources answer this?" fitted on one corpus must hold on a corpus it has never seen.
This set has two corpora, each with answerable and unanswerable questions:

* **docs**: the answerability set's questions (``hifirag_core.evaluation.answerability_set``), unchanged,
  over the documentation corpus with the same pages left out;
* **health**: MedQuAD (``health/medquad_docs.jsonl.gz``) rendered as a site (:func:`render_health_site`):
  one HTML page per document at its own URL, titled by its focus, one ``h2`` section per question-answer
  pair headed by the question type ("Symptoms", "Treatment"), the answer as its body. It is built into the
  local corpus ``health`` (``hifirag corpus build --name health --folder DIR --manifest DIR/manifest.jsonl``).
  - answerable: a question whose page stays in the corpus; its gold section is the pair's ``h2``;
  - unanswerable: a question whose page group leaves the corpus, with every page found to carry its
    gold answer (``transfer_set.json``, chosen by ``tools/answerability_transfer.py``);
  - the MMU-RAGent validation questions (the first 100), which the health pages do not answer either.

**Page groups.** Pages about the same focus (GARD and MedlinePlus both have "Marfan syndrome"), and pages
with an identical answer, form one group (:func:`page_groups`); a docs FAQ page is its own group, and each
MMU question its own. **Halves** are assigned by group, never by question (:func:`split_halves`), so no
page has questions in both halves: the largest groups first, each into the half with fewer questions of
its corpus and label so far (ties by a fixed hash of the group). Calibrations are fitted on ``tune`` halves
only; figures are reported on ``report`` halves.
"""

from __future__ import annotations

import gzip
import hashlib
import html
import json
import os
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from hifirag_core.evaluation import answerability_set
from hifirag_core.evaluation.answerability_set import Half
from hifirag_core.resources import shared_data_dir

SPEC_PATH = Path(__file__).with_name("transfer_set.json")
Corpus = Literal["docs", "health"]
CORPORA: tuple[Corpus, ...] = ("docs", "health")
HEALTH_CORPUS = "health"
MEDQUAD = Path("health") / "medquad_docs.jsonl.gz"
# Every rendered page carries this modification time (MedQuAD @577bd37's commit day), so two renderings
# build the same corpus, dates and all.
PAGE_MTIME = 1_546_300_800  # 2019-01-01T00:00:00Z


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


# --- the health site --------------------------------------------------------------------------------


def load_medquad(shared: Path | None = None) -> list[dict]:
    """MedQuAD's documents, in file order."""
    path = (shared or shared_data_dir()) / MEDQUAD
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@dataclass(frozen=True)
class HealthPage:
    """One page of the health site: a URL, its focus, and its question-answer pairs with their anchors."""

    url: str
    focus: str
    source: str
    qa: tuple[dict, ...]  # each MedQuAD pair plus "anchor" and "heading"

    @property
    def slug(self) -> str:
        return _hash(self.url)[:16]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section"


def health_pages(docs: Iterable[dict]) -> list[HealthPage]:
    """The site's pages: one per URL without its fragment (documents MedQuAD lists under one page, such
    as ``.../causes-diabetes/Pages/index.aspx#type2``, hold all their pairs), in first-seen order; each
    pair's section anchor is its question type, numbered when a page repeats it.

    Each pair gets a ``key`` that names it alone: MedQuAD's ``qid`` repeats across its collections
    (GARD's and GHR's ``0000093-1`` are different questions), so the key is the collection's number and
    the qid, numbered again in the few places a collection repeats one."""
    by_url: dict[str, list[dict]] = {}
    first: dict[str, dict] = {}
    keys: dict[str, int] = defaultdict(int)
    for doc in docs:
        url = doc["url"].split("#", 1)[0]
        for pair in doc["qa"]:
            key = f"{doc['collection'].split('_', 1)[0]}:{pair['qid']}"
            keys[key] += 1
            by_url.setdefault(url, []).append({**pair, "key": key if keys[key] == 1 else f"{key}.{keys[key]}"})
        first.setdefault(url, doc)
    pages = []
    for url, pairs in by_url.items():
        seen: dict[str, int] = defaultdict(int)
        anchored = []
        for pair in pairs:
            base = _slug(pair["qtype"])
            seen[base] += 1
            anchor = base if seen[base] == 1 else f"{base}-{seen[base]}"
            anchored.append({**pair, "anchor": anchor, "heading": pair["qtype"].capitalize()})
        pages.append(HealthPage(url, first[url]["focus"], first[url]["source"], tuple(anchored)))
    return pages


def answer_paragraphs(answer: str) -> list[str]:
    lines = [" ".join(line.split()) for line in answer.splitlines()]
    return [line for line in lines if line]


def page_html(page: HealthPage) -> str:
    """The page as its site would serve it: a title, an ``h1`` with the focus, one ``h2`` per pair."""
    title = html.escape(page.focus)
    parts = [f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title></head>",
             f"<body><main><h1>{title}</h1>"]
    for pair in page.qa:
        parts.append(f"<h2 id=\"{pair['anchor']}\">{html.escape(pair['heading'])}</h2>")
        parts += [f"<p>{html.escape(p)}</p>" for p in answer_paragraphs(pair["answer"])]
    parts.append("</main></body></html>\n")
    return "\n".join(parts)


def render_health_site(folder: Path, shared: Path | None = None) -> Path:
    """Write every page under ``folder/pages/`` and the manifest ``folder/manifest.jsonl`` (each page at its
    own URL, titled by its focus); files whose bytes are unchanged are left alone. Returns the manifest."""
    pages_dir = folder / "pages"
    pages_dir.mkdir(parents=True, exist_ok=True)
    lines = []
    for page in health_pages(load_medquad(shared)):
        path = pages_dir / f"{page.slug}.html"
        data = page_html(page).encode("utf-8")
        if not path.exists() or path.read_bytes() != data:
            path.write_bytes(data)
        os.utime(path, (PAGE_MTIME, PAGE_MTIME))
        lines.append(json.dumps({"path": f"pages/{page.slug}.html", "url": page.url, "title": page.focus},
                                ensure_ascii=False))
    manifest = folder / "manifest.jsonl"
    text = "\n".join(lines) + "\n"
    if not manifest.exists() or manifest.read_text(encoding="utf-8") != text:
        manifest.write_text(text, encoding="utf-8")
    return manifest


def site_folder(root: Path) -> Path:
    """Where the rendered health site lives under a data root."""
    return Path(root) / "datasets" / "health_site"


def _normal_answer(answer: str) -> str:
    return " ".join(answer.lower().split())


def page_groups(pages: Iterable[HealthPage]) -> dict[str, str]:
    """URL -> its group's key: pages with the same focus (case and spacing aside) or an identical answer
    are one group (the transitive closure); the key is the group's first URL in site order."""
    pages = list(pages)
    parent = {p.url: p.url for p in pages}

    def find(url: str) -> str:
        while parent[url] != url:
            parent[url] = parent[parent[url]]
            url = parent[url]
        return url

    def union(a: str, b: str) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:  # the earlier page stays the root, so the key does not depend on the order of unions
            order = {ra: index[ra], rb: index[rb]}
            keep, drop = sorted((ra, rb), key=order.__getitem__)
            parent[drop] = keep

    index = {p.url: i for i, p in enumerate(pages)}
    owner: dict[str, str] = {}
    for page in pages:
        keys = [f"focus:{' '.join(page.focus.lower().split())}"]
        keys += [f"answer:{_hash(_normal_answer(q['answer']))}" for q in page.qa if len(q["answer"].split()) >= 10]
        for key in keys:
            if key in owner:
                union(owner[key], page.url)
            else:
                owner[key] = page.url
    return {p.url: find(p.url) for p in pages}


# --- the halves -------------------------------------------------------------------------------------


def split_halves(rows: list[dict]) -> dict[str, Half]:
    """Group key -> half, for rows carrying ``corpus``, ``answerable`` and ``group``.

    Within each corpus and label, the groups go largest first (ties by a fixed hash of the key) into the
    half with fewer questions so far (ties to ``tune``): balanced halves, and no group in both."""
    sizes: dict[tuple[str, bool, str], int] = defaultdict(int)
    for r in rows:
        sizes[(r["corpus"], bool(r["answerable"]), r["group"])] += 1
    half: dict[str, Half] = {}
    counts: dict[tuple[str, bool], dict[Half, int]] = defaultdict(lambda: {"tune": 0, "report": 0})
    for (corpus, answerable, group), n in sorted(sizes.items(), key=lambda kv: (kv[0][0], kv[0][1], -kv[1],
                                                                                 _hash(f"transfer:{kv[0][2]}"))):
        if group in half:  # a group with answerable and unanswerable questions stays where it went first
            counts[(corpus, answerable)][half[group]] += n
            continue
        tally = counts[(corpus, answerable)]
        chosen: Half = "tune" if tally["tune"] <= tally["report"] else "report"
        half[group] = chosen
        tally[chosen] += n
    return half


# --- the set ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TransferSet:
    """Each corpus's questions (question-file rows) and the pages it leaves out."""

    rows: dict[str, list[dict]]
    exclude: dict[str, tuple[str, ...]]

    def write(self, path: Path, corpus: Corpus, half: Half | None = None) -> Path:
        rows = [r for r in self.rows[corpus] if half is None or r["half"] == half]
        text = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
        return path


def load_spec(path: Path = SPEC_PATH) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _docs_rows(shared: Path) -> tuple[list[dict], tuple[str, ...]]:
    built = answerability_set.build_set(shared)
    rows = []
    for r in built.rows:
        group = f"mmu:{r['id']}" if r["origin"] == "mmu" else r["id"].split("#", 1)[0]
        rows.append({**{k: v for k, v in r.items() if k != "half"}, "corpus": "docs", "group": group})
    return rows, built.exclude


def health_rows(spec: dict, pages: list[HealthPage], mmu: list[dict]) -> list[dict]:
    """The health questions the spec selects (answerable, unanswerable), then the MMU questions (their
    references kept, as in the docs set)."""
    by_key = {q["key"]: (p, q) for p in pages for q in p.qa}
    rows = []
    for label, selected in ((True, "answerable"), (False, "unanswerable")):
        for key, group in spec[selected].items():
            page, pair = by_key[key]
            # no reference text: the health questions are scored by their gold section (kept and cited), and
            # 400 MedQuAD answers would overflow the run's flow parameters (Prefect's 512 KiB)
            row = {"id": f"medquad:{key}", "question": pair["question"], "answer": None,
                   "answerable": label, "origin": "health-b" if label else "health-a", "corpus": "health",
                   "group": group, "qtype": pair["qtype"]}
            if label:
                row.update(gold_url=page.url, gold_anchor=pair["anchor"])
            rows.append(row)
    for m in mmu:
        if m["iid"] in spec.get("mmu_dropped", {}):
            continue
        rows.append({"id": m["iid"], "question": m["query"], "answer": m.get("reference"), "answerable": False,
                     "origin": "mmu", "corpus": "health", "group": f"mmu:{m['iid']}"})
    return rows


def build_transfer_set(shared: Path | None = None, spec: dict | None = None) -> TransferSet:
    """Both corpora's questions from the shared data and the committed selection, with their halves."""
    shared = shared or shared_data_dir()
    spec = spec or load_spec()
    docs, docs_exclude = _docs_rows(shared)
    mmu_lines = (shared / "mmu_ragent" / "t2t_val.jsonl").read_text(encoding="utf-8").splitlines()
    mmu = [json.loads(line) for line in mmu_lines[: spec["mmu_lines"]]]
    health = health_rows(spec, health_pages(load_medquad(shared)), mmu)
    halves = split_halves(docs + health)
    rows = {c: [{**r, "half": halves[r["group"]]} for r in rs] for c, rs in (("docs", docs), ("health", health))}
    return TransferSet(rows, {"docs": docs_exclude, "health": tuple(sorted(spec["left_out_pages"]))})


def dataset_file(root: Path, corpus: Corpus, half: Half | None = None) -> Path:
    """Where one corpus's question file (or one half of it) lives under a data root."""
    name = f"transfer_{corpus}" + (f"_{half}" if half else "")
    return Path(root) / "datasets" / f"{name}.jsonl"
