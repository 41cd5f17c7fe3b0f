"""One ``/run`` stream with the draft growing, as a client reads it: each ``data:`` line with its arrival time.

``hifirag serve`` in its own process over the Tidewater test site (the offline corpus), with its writer an
OpenAI-compatible fake on 127.0.0.1 that streams two words every 0.15 s (``limits.stream_writer`` on, the
default); a temporary Prefect server; nothing leaves the machine. ``--full`` prints the lines whole; by
default each shows only the last of its ``intermediate_steps``, as in docs/serving.md.

    .venv/bin/python tools/show_run_stream.py /tmp/run-stream
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import httpx

from hifirag_core.corpus.build import build_from_folder
from hifirag_core.corpus.store import corpus_at
from hifirag_core.serving.contract import STEP_SEPARATOR
from tests.support.fakes.openai_server import OpenAIFake
from tests.support.service_process import hifirag_service
from tests.support.sitegen import BASE_URL, write_examples, write_site

QUESTION = "How do I limit the bandwidth Tidewater uses during a sync?"
KEY = "fake-openai-key"


def trimmed(line: str) -> str:
    """The line with its steps cut to the last one (``...`` standing for the ones before)."""
    message = json.loads(line.removeprefix("data: "))
    steps = message["intermediate_steps"] or ""
    if STEP_SEPARATOR in steps:
        message["intermediate_steps"] = "..." + STEP_SEPARATOR + steps.split(STEP_SEPARATOR)[-1]
    return "data: " + json.dumps(message, ensure_ascii=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workdir", type=Path, help="an empty folder for the site, the data root and the log")
    parser.add_argument("--question", default=QUESTION)
    parser.add_argument("--gap", type=float, default=0.15, help="seconds between the fake writer's chunks")
    parser.add_argument("--full", action="store_true", help="print every line whole")
    args = parser.parse_args()
    root = args.workdir / "data"
    corpus = corpus_at(root, "docs")
    build_from_folder(corpus.root, corpus.blobs, write_site(args.workdir / "site"), BASE_URL)
    examples = write_examples(args.workdir / "examples.jsonl")
    with OpenAIFake(api_key=KEY, stream_gap_s=args.gap, stream_words=2) as writer:
        settings = [f"generation.examples={examples}", "backends.writer_llm=openai",
                    f"models.openai_base_url={writer.base_url}/v1", "models.writer=fake-writer"]
        with hifirag_service(root, *(a for s in settings for a in ("--set", s)), env={"OPENAI_API_KEY": KEY}) as url:
            began = time.monotonic()
            with httpx.Client(timeout=300) as client, \
                    client.stream("POST", f"{url}/run", json={"question": args.question}) as response:
                for line in response.iter_lines():
                    if line:
                        print(f"{time.monotonic() - began:6.2f}s {line if args.full else trimmed(line)}", flush=True)
        print(f"streamed writer calls: {dict(writer.streamed)}")


if __name__ == "__main__":
    main()
