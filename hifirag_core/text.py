"""Small text utilities shared by the stages: words, sentences, whitespace."""

from __future__ import annotations

import re

_WORD = re.compile(r"\w+(?:[-'’.]\w+)*", re.UNICODE)
_SPACE = re.compile(r"\s+")
# A sentence ends at . ! ? (optionally followed by quotes or brackets) before whitespace and an
# upper-case letter, a digit, a quote or a bracket. Abbreviations and version numbers ("e.g. x",
# "3.11 is") do not match because the next character is lower-case or there is no space.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+(?=[A-Z0-9\"'“‘(\[])")
_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "cf.", "Mr.", "Mrs.", "Dr.", "St.", "No.", "Fig.")

# Function words dropped when building keyword queries and when matching terms.
STOPWORDS = frozenset(
    ["a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could", "did", "do", "does", "doing", "done", "down", "during", "each", "few", "for", "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "let", "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "yourself", "yourselves", "also", "may", "might", "must", "shall", "one", "get", "got", "use", "used", "using", "way", "ways"]
)


def normalize_ws(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def words(text: str) -> list[str]:
    return _WORD.findall(text)


def word_count(text: str) -> int:
    return len(_WORD.findall(text))


def content_terms(text: str) -> list[str]:
    """Lower-cased words without stopwords, in order, duplicates kept."""
    return [w for w in (t.lower() for t in _WORD.findall(text)) if w not in STOPWORDS]


def split_sentences(text: str) -> list[str]:
    """Split prose into sentences; each line of a list or code block stays its own unit."""
    out: list[str] = []
    for block in re.split(r"\n\s*\n|\n(?=\s*(?:[-*+]|\d+[.)])\s)", text):
        block = normalize_ws(block)
        if not block:
            continue
        parts = _SENTENCE_END.split(block)
        merged: list[str] = []
        for part in parts:
            if merged and merged[-1].endswith(_ABBREVIATIONS):
                merged[-1] = f"{merged[-1]} {part}"
            else:
                merged.append(part)
        out.extend(p.strip() for p in merged if p.strip())
    return out


