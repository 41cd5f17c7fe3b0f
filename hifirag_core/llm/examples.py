"""The refine pass's few-shot examples: chosen per dataset, read from the shared data by id."""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from pathlib import Path

from hifirag_core.resources import prompts_folder, shared_data_dir
from hifirag_core.types import FewShotExample

EXAMPLES_FILE = "refine_examples.toml"  # beside the prompts the package ships


class ExamplesError(ValueError):
    """An example set that is unknown or cannot be read."""


@dataclass(frozen=True)
class ExampleSet:
    name: str  # "" when the run has no examples
    examples: tuple[FewShotExample, ...]

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(e.example_id for e in self.examples)


def resolve_example_set(spec: str, dataset_format: str, *, path: Path | Traversable | None = None,
                        data_dir: Path | None = None) -> ExampleSet:
    """``spec`` is ``auto`` (the dataset's own set, if it has one), ``none``, or a set name."""
    if spec.endswith((".jsonl", ".json")):
        return _examples_file(Path(spec))
    path = path or prompts_folder().joinpath(EXAMPLES_FILE)
    sets = tomllib.loads(path.read_text(encoding="utf-8"))
    if spec == "none" or (spec == "auto" and dataset_format not in sets):
        return ExampleSet("", ())
    name = dataset_format if spec == "auto" else spec
    if name not in sets:
        raise ExamplesError(f"no example set {name!r} in {path.name}; known: {', '.join(sorted(sets))}")
    entry = sets[name]
    source = (data_dir or shared_data_dir()) / entry["file"]
    if not source.exists():
        raise ExamplesError(
            f"example set {name!r} reads {source}, which does not exist; "
            "set HIFIRAG_SHARED_DATA or run with --set generation.examples=none"
        )
    wanted = list(entry["ids"])
    found: dict[str, FewShotExample] = {}
    with source.open(encoding="utf-8") as fh:
        for line in fh:
            obj = json.loads(line)
            ex_id = str(obj.get(entry["id_field"]))
            if ex_id in wanted:
                found[ex_id] = FewShotExample(obj[entry["question_field"]], obj[entry["answer_field"]], ex_id)
    missing = [i for i in wanted if i not in found]
    if missing:
        raise ExamplesError(f"example set {name!r}: ids not found in {source.name}: {missing}")
    return ExampleSet(name, tuple(found[i] for i in wanted))


def _examples_file(path: Path) -> ExampleSet:
    """Examples from a JSONL file: ``question``/``query``, ``answer``/``reference``, optional ``id``."""
    if not path.exists():
        raise ExamplesError(f"examples file {path} does not exist")
    examples = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            question, answer = obj.get("question") or obj["query"], obj.get("answer") or obj["reference"]
        except (json.JSONDecodeError, KeyError, AttributeError):
            raise ExamplesError(f"{path}:{n}: expected a JSON object with question and answer") from None
        examples.append(FewShotExample(question, answer, str(obj.get("id", obj.get("iid", f"{path.stem}:{n}")))))
    if not examples:
        raise ExamplesError(f"examples file {path} holds no examples")
    return ExampleSet(path.stem, tuple(examples))
