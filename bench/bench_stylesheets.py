"""What reading ``<style>`` sheets for hiding rules costs the sectioner, and which pages it changes.

Over all 3,174 doc pages (the docs_html tarballs), each in its own subprocess, timed in CPU seconds
around ``parse_sections`` only:

- ``sheets-off``: this checkout with the style-sheet pass switched off;
- ``sheets-on``: this checkout as it is, with the CPU time of the pass itself summed apart (the
  steadier figure on a shared machine, where two whole runs differ by several per cent);
- ``base`` (with ``--base DIR``): another checkout, for example the commit before style sheets
  were read (``git worktree add --detach DIR 279942d``).

Then pages/s side by side, and the pages whose sections (heading path, anchor, text) differ from
``sheets-on``, with the headings that differ. Last, hostile pages made here: thousands of rules,
hundreds of hiding rules that match, a 690 kB sheet (past ``MAX_STYLE_CHARS``): milliseconds per
page with the pass off and on. Timings are printed, never asserted. Run:
    HIFIRAG_SHARED_DATA=/work/shared/data /work/main/.venv/bin/python bench/bench_stylesheets.py \
        [--base /work/wt30-b-base] [--sample N] [--repeat 2]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _fingerprint(page) -> str:
    body = json.dumps([page.status, [[list(s.heading_path), s.anchor, s.text] for s in page.sections]])
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def _parser(sheets: bool):
    import hifirag_core.sectioning as sectioning

    if not hasattr(sectioning, "remove_hidden_by_style_sheets"):
        return sectioning.parse_sections  # a checkout from before the pass
    real = getattr(sectioning, "_real_pass", sectioning.remove_hidden_by_style_sheets)
    sectioning._real_pass = real
    # parse_sections looks the pass up in its module at each call: off here, the rest as it is
    sectioning.remove_hidden_by_style_sheets = real if sheets else (lambda tree: [])
    return sectioning.parse_sections


def worker(tree: Path, sheets: bool, sample: int, out: Path) -> None:
    """Section every page (every ``sample``-th) and write the CPU time and each page's fingerprint."""
    sys.path.insert(0, str(tree))
    from hifirag_core.corpus.sites import docs_html_dir, iter_tarball_pages

    parse = _parser(sheets)
    pass_cpu = [0.0]
    if sheets and hasattr(sys.modules["hifirag_core.sectioning"], "_has_style"):
        _time_the_pass(sys.modules["hifirag_core.sectioning"], pass_cpu)
    cpu, prints, headings = 0.0, {}, {}
    for tarball in sorted(docs_html_dir().glob("*.html.tar.xz")):
        for i, page in enumerate(iter_tarball_pages(tarball)):
            if sample > 1 and i % sample:
                continue
            t0 = time.process_time()
            parsed = parse(page.html, page.url)
            cpu += time.process_time() - t0
            name = f"{page.site}:{page.relpath}"
            prints[name] = _fingerprint(parsed)
            headings[name] = [" > ".join(s.heading_path) + f" ({len(s.text)} chars)" for s in parsed.sections]
    out.write_text(json.dumps({"cpu_s": cpu, "pass_s": pass_cpu[0], "prints": prints, "headings": headings}))


def _time_the_pass(sectioning, total: list[float]) -> None:
    """Add the CPU time of the pass (the ``<style`` check and the sheets) to ``total[0]``."""
    def timed(fn):
        def run(*args):
            t0 = time.process_time()
            try:
                return fn(*args)
            finally:
                total[0] += time.process_time() - t0
        return run

    sectioning._has_style = timed(sectioning._has_style)
    sectioning.remove_hidden_by_style_sheets = timed(sectioning.remove_hidden_by_style_sheets)


def hostile_pages() -> dict[str, bytes]:
    """Pages built to make the pass work hard."""
    body = "".join(f'<div class="c{i % 50} box"><h2>Part {i}</h2><p class="t{i % 7}">Words of part {i}.</p></div>'
                   for i in range(300))
    many = "".join(f".r{i} .q{i} > p{{color:#333;margin:{i % 9}px}}" for i in range(5000))
    hiding = "".join(f".c{i % 50} .t{i % 7}, #x{i}{{display:none}} .c{i % 50}.box .t{i % 7}{{display:block}}"
                     for i in range(600))
    framework = ROOT.parent / "main" / ".venv" / "lib" / "python3.11" / "site-packages" / "prefect" / "server"
    big = next(iter(sorted(framework.glob("ui/assets/index-*.css"))), None)
    pages = {
        "5,000 rules, none hides": many,
        "600 hiding rules, 150 elements shown again": hiding,
        "pseudo-classes and broken CSS": ("a:hover{display:none} p::before{content:'x'} .a + .b{display:none} "
                                          "}}{{ .c{display:none !important; [x=}") * 300,
    }
    if big is not None:
        pages[f"a {big.stat().st_size // 1000} kB framework sheet"] = big.read_text(encoding="utf-8")
    return {name: f"<html><head><style>{css}</style></head><body><main><h1>Hostile</h1>{body}</main></body></html>"
            .encode() for name, css in pages.items()}


def hostile(out: Path, repeat: int = 3) -> None:
    sys.path.insert(0, str(ROOT))
    results = {}
    for name, html in hostile_pages().items():
        row = {}
        for sheets in (False, True):
            parse = _parser(sheets)
            best = min(_timed(parse, html) for _ in range(repeat))
            row["on" if sheets else "off"] = best
        results[name] = {**row, "chars": len(html)}
    out.write_text(json.dumps(results))


def _timed(parse, html: bytes) -> float:
    t0 = time.process_time()
    parse(html, "https://hostile.example/")
    return time.process_time() - t0


def _run(args: list[str], env_tree: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(env_tree)}
    subprocess.run([sys.executable, __file__, *args], check=True, env=env)


def main() -> int:
    ap = argparse.ArgumentParser(description="style-sheet pass benchmark (prints figures, asserts nothing)")
    ap.add_argument("--base", type=Path, help="another checkout to compare with (the branch point)")
    ap.add_argument("--sample", type=int, default=1, help="every Nth page of each site")
    ap.add_argument("--repeat", type=int, default=1, help="runs per method; the fastest counts")
    ap.add_argument("--worker", choices=("sheets-off", "sheets-on", "base", "hostile"), help=argparse.SUPPRESS)
    ap.add_argument("--tree", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker == "hostile":
        hostile(args.out)
        return 0
    if args.worker:
        worker(args.tree, args.worker != "sheets-off", args.sample, args.out)
        return 0
    sys.path.insert(0, str(ROOT))
    from hifirag_core.corpus.sites import docs_html_dir

    if not docs_html_dir().is_dir():
        print(f"skipped: no corpus at {docs_html_dir()} (set HIFIRAG_SHARED_DATA)")
        return 0
    methods = {"sheets-off": ROOT, "sheets-on": ROOT}
    if args.base:
        methods = {"base": args.base.resolve(), **methods}
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeat):
            for method, tree in methods.items():
                out = Path(tmp) / f"{method}.json"
                _run(["--worker", method, "--tree", str(tree), "--sample", str(args.sample), "--out", str(out)], tree)
                r = json.loads(out.read_text())
                if method not in results or r["cpu_s"] < results[method]["cpu_s"]:
                    results[method] = r
        out = Path(tmp) / "hostile.json"
        _run(["--worker", "hostile", "--out", str(out)], ROOT)
        hostile_results = json.loads(out.read_text())
    on = results["sheets-on"]
    pages = len(on["prints"])
    print(f"\n{'method':12s} {'pages':>6s} {'CPU s':>7s} {'pages/s':>8s} {'vs sheets-on':>13s} {'sections differ':>16s}")
    for method, r in results.items():
        pps = len(r["prints"]) / r["cpu_s"]
        differ = sorted(k for k, v in r["prints"].items() if on["prints"].get(k) != v)
        r["differ"] = differ
        print(f"{method:12s} {len(r['prints']):6d} {r['cpu_s']:7.2f} {pps:8.0f} "
              f"{pps / (pages / on['cpu_s']):12.2f}x {len(differ):16d}")
    share = on["pass_s"] / on["cpu_s"]
    print(f"\nthe pass itself (the <style check and the sheets) in sheets-on: {on['pass_s']:.2f} s of "
          f"{on['cpu_s']:.2f} s CPU ({share:.1%}), {on['pass_s'] / pages * 1000:.3f} ms a page")
    for method, r in results.items():
        for name in r["differ"][:10]:
            before, after = r["headings"][name], on["headings"][name]
            print(f"\n{method} -> sheets-on differs on {name}:")
            print(f"  {method}: {len(before)} sections; sheets-on: {len(after)} sections")
            for line in sorted(set(before) ^ set(after))[:12]:
                print(f"  {'-' if line in before else '+'} {line}")
    print(f"\n{'hostile page':45s} {'kB':>6s} {'off ms':>8s} {'on ms':>8s}")
    for name, r in hostile_results.items():
        print(f"{name:45s} {r['chars'] / 1000:6.0f} {r['off'] * 1000:8.1f} {r['on'] * 1000:8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
