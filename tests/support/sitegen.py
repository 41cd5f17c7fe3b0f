"""A small documentation site for tests: real-looking chrome around real-looking content.

"Tidewater" is a made-up file-sync tool, so no model has seen its facts and every answer has to
come from these pages. Each page has a header, a navigation sidebar and a footer, the way the
shared documentation sites do, so boilerplate handling is exercised too.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

BASE_URL = "https://docs.tidewater.example/"

PAGES: dict[str, tuple[str, list[tuple[int, str, str]]]] = {
    "install.html": ("Installing Tidewater", [
        (2, "Requirements", "Tidewater runs on Linux and macOS. It needs Python 3.9 or newer and the "
            "libyaml library. On Debian, install libyaml with apt before installing Tidewater."),
        (2, "Installing with pip", "Install the package with pip install tidewater. The command installs "
            "the tidewater executable into your path. Use a virtual environment to keep it separate."),
        (2, "Verifying the installation", "Run tidewater doctor after installing. The doctor command checks "
            "the libyaml library, the configuration file and the network, and prints a report."),
    ]),
    "config.html": ("Configuring Tidewater", [
        (2, "The configuration file", "Tidewater reads its settings from the file .tidewater.toml in your "
            "home directory. Each setting has a default, so the file may be empty."),
        (2, "Environment variables", "The TIDEWATER_HOME environment variable sets the directory where "
            "Tidewater keeps its state and logs. It defaults to ~/.local/share/tidewater."),
        (3, "Secrets", "Tidewater never stores access keys in the configuration file. It reads them from the "
            "TIDEWATER_KEY environment variable at start-up."),
        (2, "Profiles", "A profile is a named group of settings. Select one with the --profile option, for "
            "example tidewater sync --profile work."),
    ]),
    "sync.html": ("Syncing folders", [
        (2, "How sync works", "Tidewater compares files by their SHA-256 checksum, not by their modification "
            "time. Only files whose checksum changed are transferred."),
        (2, "Conflict resolution", "When the same file changed on both sides, the newest version wins. With "
            "the --keep-both option Tidewater keeps both versions and renames the older one."),
        (2, "Limiting bandwidth", "Use the --max-rate option to limit the bandwidth that a sync uses, for "
            "example tidewater sync --max-rate 2M limits it to two megabytes per second."),
        (2, "Hidden files", "Hidden files are skipped unless you pass --include-hidden, because editors and "
            "operating systems keep temporary state in them."),
    ]),
    "troubleshooting.html": ("Troubleshooting", [
        (2, "Error E101: permission denied", "Error E101 means Tidewater could not write to the target folder. "
            "Check the folder's permissions, then run tidewater doctor to confirm the fix."),
        (2, "Error E204: checksum mismatch", "Error E204 means a file changed while it was being copied. "
            "Tidewater retries the file three times before it reports the error."),
    ]),
    "changelog.html": ("Changelog", [
        (2, "Version 2.1", "Version 2.1 added the --keep-both option and made sync twice as fast on large "
            "folders."),
        (2, "Version 2.0", "Version 2.0 switched from modification times to SHA-256 checksums and removed "
            "the legacy XML configuration format."),
    ]),
    "gardening.html": ("Unrelated: caring for tomatoes", [
        (2, "Watering", "Water tomato plants deeply twice a week rather than a little every day."),
        (2, "Pruning", "Remove the side shoots that grow between the stem and the branches."),
    ]),
}

# Each question also says where its answer lives (gold_url, gold_anchor), as the FAQ set does.
QUESTIONS = [
    {"iid": "T1", "query": "How do I limit the bandwidth Tidewater uses during a sync?",
     "reference": "Use the --max-rate option, for example tidewater sync --max-rate 2M limits a sync to two "
                  "megabytes per second.",
     "gold_url": BASE_URL + "sync.html", "gold_anchor": "limiting-bandwidth"},
    {"iid": "T2", "query": "What happens in Tidewater when the same file changed on both sides?",
     "reference": "The newest version wins, unless you pass --keep-both, which keeps both versions and renames "
                  "the older one.",
     "gold_url": BASE_URL + "sync.html", "gold_anchor": "conflict-resolution"},
    {"iid": "T3", "query": "Which environment variable sets the directory where Tidewater keeps its state?",
     "reference": "TIDEWATER_HOME sets it; it defaults to ~/.local/share/tidewater.",
     "gold_url": BASE_URL + "config.html", "gold_anchor": "environment-variables"},
]


# Few-shot examples for the refine pass, in the style of the gold answers (not among the questions).
EXAMPLES = [
    {"id": "E1", "question": "How do I check that Tidewater is installed correctly?",
     "answer": "Run tidewater doctor. It checks the libyaml library, the configuration file and the network, "
               "then prints a report."},
    {"id": "E2", "question": "Does Tidewater copy files whose modification time changed?",
     "answer": "Only if their content changed: Tidewater compares SHA-256 checksums, not modification times."},
    {"id": "E3", "question": "Where does Tidewater read its settings from?",
     "answer": "From .tidewater.toml in your home directory; every setting has a default."},
]


def _page(relpath: str, title: str, sections: list[tuple[int, str, str]]) -> str:
    nav = "".join(f'<li><a href="{p}">{html.escape(t)}</a></li>' for p, (t, _) in PAGES.items())
    body = [f"<h1>{html.escape(title)}</h1>"]
    for level, heading, text in sections:
        anchor = heading.lower().replace(" ", "-").replace(":", "")
        body.append(f'<section id="{anchor}"><h{level}>{html.escape(heading)}</h{level}>'
                    f"<p>{html.escape(text)}</p></section>")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)} — Tidewater 2.1 documentation</title>
<style>body {{ font-family: sans-serif; }}</style><script>var DOCS_VERSION = "2.1";</script></head>
<body>
<header><a href="index.html">Tidewater 2.1 documentation</a> <nav><a href="install.html">Install</a>
<a href="sync.html">Sync</a> <a href="config.html">Configure</a></nav></header>
<div class="sidebar" role="navigation"><h3>Contents</h3><ul>{nav}</ul></div>
<main role="main"><div class="document">{''.join(body)}</div></main>
<footer>© 2026 The Tidewater authors. Created using a documentation generator.</footer>
</body></html>"""


def write_site(folder: Path) -> Path:
    """Write the site's pages under ``folder`` and return it."""
    folder.mkdir(parents=True, exist_ok=True)
    for relpath, (title, sections) in PAGES.items():
        (folder / relpath).write_text(_page(relpath, title, sections), encoding="utf-8")
    return folder


def write_questions(path: Path, questions: list[dict] | None = None) -> Path:
    path.write_text("".join(json.dumps(q) + "\n" for q in (questions or QUESTIONS)), encoding="utf-8")
    return path


def write_examples(path: Path) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in EXAMPLES), encoding="utf-8")
    return path
