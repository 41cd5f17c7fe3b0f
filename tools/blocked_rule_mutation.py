"""The blocked-page rules' mutation check as a table: each rule left out in turn, every fixture re-judged.

A rule is guarded when leaving it out changes some fixture's verdict (to none, or to another
``reason:vendor``); ``tests/unit/web/test_blocked_pages.py`` asserts the same, rule by rule.
Run: /work/main/.venv/bin/python tools/blocked_rule_mutation.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.support.blocked_fixtures import GUARDS, mutation_check  # noqa: E402


def main() -> int:
    mutations = mutation_check()
    print("| # | rule (reason:vendor) | where | fixture only it catches | verdict without the rule | caught when removed |")
    print("|---|---|---|---|---|---|")
    for m in mutations:
        guard = GUARDS.get(m.key, "(none)")
        before_after = m.changed.get(f"stand_in/{guard}")
        without = "unchanged" if before_after is None else (before_after[1] or "not blocked")
        print(f"| {m.index} | {m.rule.reason}:{m.rule.vendor} | {m.rule.where} | {guard} | {without} "
              f"| {'yes' if m.changed else 'no'} |")
    missed = [m.key for m in mutations if not m.changed]
    print(f"\n{len(mutations) - len(missed)} of {len(mutations)} rules caught when removed"
          + (f"; not caught: {', '.join(missed)}" if missed else ""))
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
