"""``hifirag providers`` and ``hifirag doctor`` against the fake of every search provider, each command printed before
its output: the two profiles in one word (``free-web`` with DuckDuckGo or SearXNG and a local model server,
``mmu-ragent`` with FineWeb and Gemini), every search row at once with its key, and the keyed rows without keys.

Every provider's fake comes from ``tests.support.fakes.search_providers.PROVIDER_FAKES`` and listens on 127.0.0.1 (ddgs
reaches DuckDuckGo's through its proxy setting); the OpenAI-compatible fake stands in for the local model server,
the Gemini fake for Gemini, a site fake for the page the direct-HTTP check fetches. The fakes' keys are passed in
the environment of the command that needs them and nowhere else. Nothing leaves the machine.

    .venv/bin/python tools/show_providers.py /tmp/providers
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT_ROOT))

from hifirag_core import backend_registry as registry  # noqa: E402
from hifirag_core.secrets import SECRETS  # noqa: E402
from tests.support.fakes.gemini import GeminiFake  # noqa: E402
from tests.support.fakes.openai_server import OpenAIFake  # noqa: E402
from tests.support.fakes.search_providers import PROVIDER_FAKES  # noqa: E402
from tests.support.fakes.server import Response  # noqa: E402
from tests.support.fakes.site import SiteFake  # noqa: E402
from tests.support.fakes.web import default_web  # noqa: E402

KEY_VARIABLES = {v for spec in SECRETS.values() for v in spec.env}


def show(args: list[str], env: dict[str, str], folder: Path) -> None:
    """Run ``hifirag ARGS`` as a user would, print the command and what it printed."""
    shown = [a if " " not in a else shlex.quote(a) for a in args]
    keys = sorted(k for k in env if k in KEY_VARIABLES)
    print(f"\n$ {' '.join(f'{k}=<the fake key>' for k in keys)}{' ' if keys else ''}hifirag {' '.join(shown)}",
          flush=True)
    base = {k: v for k, v in os.environ.items() if k not in KEY_VARIABLES}
    run_env = {**base, **env, "PYTHONPATH": str(PROJECT_ROOT), "COLUMNS": "230", "HIFIRAG_DATA_ROOT": str(folder),
               "PREFECT_HOME": str(folder / "prefect-home")}
    done = subprocess.run([sys.executable, "-m", "flows.cli", *args], env=run_env, cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=600)
    print((done.stdout + done.stderr).rstrip())
    print(f"(exit {done.returncode})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="a scratch folder (data root, the folder provider's files)")
    folder = parser.parse_args().folder.resolve()
    notes = folder / "notes"
    notes.mkdir(parents=True, exist_ok=True)
    (notes / "venv.md").write_text("# Virtual environments\n\nRun python -m venv .venv to make one.\n")
    web = default_web().search
    fakes = {name: spec.make(web).start() for name, spec in PROVIDER_FAKES.items()}
    model = OpenAIFake(api_key=None).start()
    gemini = fakes["gemini-grounding"]  # the Gemini fake answers the models' prompts and the grounded search
    assert isinstance(gemini, GeminiFake)
    site = SiteFake({"/": Response(200, "<html><body><p>The page the fetch check reads.</p></body></html>",
                                   content_type="text/html")}).start()
    try:
        settings = {name: spec.settings(fakes[name]) for name, spec in PROVIDER_FAKES.items()}
        keys = {name: spec.env(fakes[name]) for name, spec in PROVIDER_FAKES.items()}
        http = ["--set", "fetch.allow_loopback=true", "--http-url", site.base_url + "/"]
        sets = lambda pairs: [x for p in pairs for x in ("--set", p)]  # noqa: E731

        show(["providers"], {}, folder)
        local = f"free-web:local@{model.base_url}/v1"
        show(["doctor", "--profile", local, *sets(settings["duckduckgo"]), *http], {}, folder)
        show(["doctor", "--profile", local, "--set", "backends.search=searxng", *sets(settings["searxng"]), *http],
             {}, folder)
        show(["doctor", "--profile", "mmu-ragent", *sets(settings["fineweb"]), *sets(settings["gemini-grounding"]),
              *http], keys["gemini-grounding"], folder)
        every = [r.name for r in registry.BACKENDS if r.role == "search" and r.builder is not None]
        all_settings = list(dict.fromkeys(p for name in every for p in settings[name]))
        all_keys = {k: v for name in every for k, v in keys[name].items()}
        show(["doctor", "--set", f"search.providers={','.join([*every, 'folder'])}", "--set", f"search.folder={notes}",
              "--set", "backends.fetch=http", *sets(all_settings), *http], all_keys, folder)
        keyed = [r.name for r in registry.BACKENDS if r.role == "search" and r.keys]
        show(["doctor", "--set", f"search.providers={','.join(keyed)}", "--set", "backends.fetch=http",
              *sets(all_settings), *http], {}, folder)
        print("\nrequests each fake answered: " + ", ".join(f"{n} {f.count()}" for n, f in fakes.items())
              + f", local model server {model.count()}")
    finally:
        for fake in [*fakes.values(), model, site]:
            fake.stop()


if __name__ == "__main__":
    main()
