"""Pin the sectioning quality floors to today's scores (tests/support/gold/sectioning_floors.json).

A floor is never lowered silently: on the same gold set (same fingerprint) a lower score needs
``--allow-lower "reason"``, and the reason is kept in the file's history. A changed gold set needs
a new pin, which the gate test demands.
Run: .venv/bin/python tools/pin_sectioning_floors.py
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.support.gold.gate import FLOORS, data_missing, measure  # noqa: E402

NOISE_MARGIN = 0.005  # scores are counts over ~400 items: one item is 0.0025


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--allow-lower", metavar="REASON", help="accept lower floors on the same gold set")
    args = ap.parse_args()
    if reason := data_missing():
        print(f"cannot pin: {reason}", file=sys.stderr)
        return 2
    scores, failures, fingerprint = measure()
    old = json.loads(FLOORS.read_text()) if FLOORS.exists() else {}
    history = old.get("history", [])
    if old.get("fingerprint") == fingerprint:
        lower = {k: (v, scores.get(k, 0.0)) for k, v in old.get("floors", {}).items() if scores.get(k, 0.0) < v}
        if lower and not args.allow_lower:
            for k, (was, now) in lower.items():
                print(f"refusing to lower {k}: {was} -> {now}", file=sys.stderr)
            print("fix the regression, or pass --allow-lower 'why' to record it", file=sys.stderr)
            return 1
        if lower:
            history.append({"date": date.today().isoformat(), "lowered": lower, "reason": args.allow_lower})
    else:
        history.append({"date": date.today().isoformat(), "event": "new gold set fingerprint",
                        "previous": old.get("fingerprint")})
    FLOORS.write_text(json.dumps({
        "fingerprint": fingerprint,
        "noise_margin": NOISE_MARGIN,
        "floors": scores,
        "history": history,
    }, indent=1, sort_keys=True) + "\n")
    for k, v in sorted(scores.items()):
        print(f"{k:22s} {v:.4f}")
    print(f"{len(failures)} individual failures")
    for f in failures[:20]:
        print("  ", f[:200])
    print(f"pinned to {FLOORS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
