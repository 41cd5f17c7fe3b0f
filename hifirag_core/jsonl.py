"""Reading JSONL input files (questions, corpus manifests): every bad line named, a non-UTF-8 file stopped at once."""

from __future__ import annotations

import json
from pathlib import Path


class NotUtf8Error(ValueError):
    """A file that is not UTF-8 text (a binary file, another encoding): ``problem`` names the first bad line."""

    def __init__(self, problem: str):
        super().__init__(problem)
        self.problem = problem


def read_jsonl(path: Path, what: str = "JSONL file") -> tuple[list[tuple[int, dict]], list[str]]:
    """The JSON objects of ``path`` with their line numbers, and one problem per line that is not one.

    Blank lines are skipped and a leading byte-order mark is ignored. A line that is not UTF-8 raises
    :class:`NotUtf8Error` naming it: what follows in such a file is noise, not a list of problems.
    """
    objects: list[tuple[int, dict]] = []
    problems: list[str] = []
    with Path(path).open("rb") as fh:
        for line_no, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise NotUtf8Error(f"line {line_no}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at column "
                                   f"{exc.start + 1}); a {what} must be UTF-8 JSONL (one JSON object per line); "
                                   "the rest of the file was not read") from None
            if line_no == 1:
                line = line.removeprefix("\ufeff")
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                problems.append(f"line {line_no}: not valid JSON ({exc.msg} at column {exc.colno})")
                continue
            if not isinstance(obj, dict):
                problems.append(f"line {line_no}: expected a JSON object, got {type(obj).__name__}")
                continue
            objects.append((line_no, obj))
    return objects, problems
