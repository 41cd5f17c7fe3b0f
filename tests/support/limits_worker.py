"""One worker process of a run: calls the fake OpenAI-compatible provider through the real adapter,
its rate limits and budget counted on the Prefect server (``tasks.shared_limits.PrefectLedger``) or, with
``--local``, in this process only. Prints what it did as JSON.

    python -m tests.support.limits_worker --base-url URL --run-id R --calls N [--rpm X] [--budget-tokens T] [--local]
"""

from __future__ import annotations

import argparse
import json

from hifirag_core.backends.factory import build_chat_model, build_guards
from hifirag_core.config import build_config
from hifirag_core.types import ChatTurn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--calls", type=int, required=True)
    parser.add_argument("--rpm", type=float)
    parser.add_argument("--budget-tokens", type=int)
    parser.add_argument("--local", action="store_true")
    args = parser.parse_args()
    cfg = build_config(overrides={
        "backends": {"filter_llm": "openai"},
        "models": {"openai_base_url": args.base_url, "filter": "fake-model"},
        "limits": {"provider_rpm": {"openai": args.rpm} if args.rpm else {}, "budget_tokens": args.budget_tokens,
                   "retries": 0, "provider_concurrency": {"openai": 1}},
    })
    ledger = None
    if not args.local:
        from tasks.shared_limits import PrefectLedger

        ledger = PrefectLedger(args.run_id, cfg.limits)
    chat = build_chat_model("filter", cfg, guards=build_guards(cfg, ledger=ledger))
    statuses: dict[str, int] = {}
    tokens = 0
    for n in range(args.calls):
        reply = chat.chat([ChatTurn("user", f"Say hello, call {n}.")], stage="query_plan", prompt_name="probe",
                          prompt_hash="probe")
        statuses[reply.call.status] = statuses.get(reply.call.status, 0) + 1
        tokens += (reply.call.tokens_in or 0) + (reply.call.tokens_out or 0)
    print(json.dumps({"statuses": statuses, "tokens": tokens}))


if __name__ == "__main__":
    main()
