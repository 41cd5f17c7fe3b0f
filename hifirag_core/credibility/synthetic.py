"""Controlled synthetic documents for the credibility experiment: faithful and misleading copies.

A low-credibility copy starts from a real MedQuAD answer: its first sentences, lightly reworded
(meaning kept), framed as a forum reply, a blog post or a shared AI chat, under a URL of that kind
of platform. An adversarial copy is the same faithful copy with its claims changed: polarity words
reversed (increase/decrease, dominant/recessive, can/cannot, ...), numbers scaled, drug names
swapped; if none of those applies, its first sentence is negated. Each change is listed, so a test
or an analyst can see what was made false. Everything is a pure function of the text and a
``random.Random``, so a seed reproduces the corpus exactly.

These documents exist only inside the experiment's own corpus namespace; their URLs have the real
shapes of those platforms (so the source rules classify them) but the pages were never published.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass

from hifirag_core.text import normalize_ws, split_sentences

LOW_CREDIBILITY_TYPES: tuple[str, ...] = ("user_generated", "blog", "ai_generated")

# Polarity words whose swap reverses a medical claim. Both directions are listed where both read
# naturally; one regex pass applies them, so a swapped word is never swapped back.
CLAIM_FLIPS: dict[str, str] = {
    "increase": "decrease", "decrease": "increase",
    "increases": "decreases", "decreases": "increases",
    "increased": "decreased", "decreased": "increased",
    "increasing": "decreasing", "decreasing": "increasing",
    "higher": "lower", "lower": "higher",
    "more likely": "less likely", "less likely": "more likely",
    "common": "rare", "rare": "common",
    "often": "seldom", "seldom": "often",
    "always": "never", "never": "always",
    "can": "cannot", "cannot": "can", "can't": "can",
    "may": "cannot",
    "should": "should not", "should not": "should",
    "is not": "is", "are not": "are", "does not": "does", "do not": "do",
    "effective": "ineffective", "ineffective": "effective",
    "safe": "unsafe", "unsafe": "safe",
    "benign": "malignant", "malignant": "benign",
    "dominant": "recessive", "recessive": "dominant",
    "curable": "incurable", "incurable": "curable",
    "cause": "prevent", "prevent": "cause",
    "causes": "prevents", "prevents": "causes",
    "caused": "prevented", "prevented": "caused",
}

# Drugs and drug classes that MedQuAD answers mention; a mention is swapped for another entry.
DRUGS: tuple[str, ...] = (
    "aspirin", "ibuprofen", "acetaminophen", "insulin", "metformin", "warfarin", "heparin",
    "penicillin", "amoxicillin", "prednisone", "methotrexate", "tamoxifen", "levodopa",
    "levothyroxine", "morphine", "corticosteroids", "antibiotics", "antivirals", "antihistamines",
    "immunoglobulin", "chemotherapy", "interferon", "rituximab", "cyclophosphamide", "vitamin D",
)

# Meaning-preserving rewording for the faithful copies (and so for the adversarial ones too).
PARAPHRASES: dict[str, str] = {
    "physician": "doctor", "physicians": "doctors", "individuals": "people",
    "approximately": "about", "numerous": "many", "utilize": "use", "assist": "help",
    "obtain": "get", "additionally": "also", "therefore": "so", "however": "but",
    "require": "need", "requires": "needs",
}

_YEAR = re.compile(r"^(1[89]\d\d|20\d\d)$")
_NUMBER = re.compile(r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w,]\d|\w)")
_NUMBER_FACTORS = (0.1, 0.2, 3.0, 5.0, 10.0)


@dataclass(frozen=True)
class Perturbed:
    """A text and the list of changes made to it (empty when nothing changed)."""

    text: str
    changes: tuple[str, ...]


def _phrase_pattern(phrases: list[str]) -> re.Pattern[str]:
    alternatives = sorted(phrases, key=len, reverse=True)  # "should not" before "should"
    return re.compile(r"\b(?:" + "|".join(re.escape(p) for p in alternatives) + r")\b", re.IGNORECASE)


_FLIP_RE = _phrase_pattern(list(CLAIM_FLIPS))
_DRUG_RE = _phrase_pattern(list(DRUGS))
_PARAPHRASE_RE = _phrase_pattern(list(PARAPHRASES))


def _match_case(original: str, replacement: str) -> str:
    if original.isupper() and len(original) > 1:
        return replacement.upper()
    if original[:1].isupper():
        return replacement[:1].upper() + replacement[1:]
    return replacement


def _substitute(text: str, pattern: re.Pattern[str], choose: Callable[[str], str], label: str) -> Perturbed:
    changes: list[str] = []

    def repl(match: re.Match[str]) -> str:
        found = match.group(0)
        new = choose(found.lower())
        changes.append(f"{label}:{found.lower()}->{new.lower()}")
        return _match_case(found, new)

    return Perturbed(pattern.sub(repl, text), tuple(changes))


def reverse_claims(text: str) -> Perturbed:
    """Swap every polarity word for its opposite (one pass, case kept)."""
    return _substitute(text, _FLIP_RE, lambda w: CLAIM_FLIPS[w], "flip")


def paraphrase(text: str) -> str:
    """Reword formal terms plainly without changing what the text claims."""
    return _substitute(text, _PARAPHRASE_RE, lambda w: PARAPHRASES[w], "reword").text


def _format_like(original: str, decimals: str | None, value: float) -> str:
    if decimals:
        return f"{value:.{len(decimals) - 1}f}"
    return f"{int(round(value)):,}" if "," in original else str(int(round(value)))


def change_numbers(text: str, rng: random.Random) -> Perturbed:
    """Scale each number (years and parts of names like BRCA1 excluded) by a random factor."""
    changes: list[str] = []

    def repl(match: re.Match[str]) -> str:
        whole, decimals = match.group(1), match.group(2)
        if _YEAR.match(whole) and not decimals:
            return match.group(0)
        value = float(whole.replace(",", "") + (decimals or ""))
        factor = rng.choice(_NUMBER_FACTORS)
        new = _format_like(whole, decimals, value * factor)
        if new == match.group(0) or float(new.replace(",", "")) == 0:
            new = _format_like(whole, decimals, value * 10 if value else 7.0)
        changes.append(f"number:{match.group(0)}->{new}")
        return new

    return Perturbed(_NUMBER.sub(repl, text), tuple(changes))


def swap_drugs(text: str, rng: random.Random) -> Perturbed:
    """Replace each drug named in the text by another one, consistently within the text."""
    mapping: dict[str, str] = {}

    def choose(found: str) -> str:
        if found not in mapping:
            mapping[found] = rng.choice([d for d in DRUGS if d.lower() != found])
        return mapping[found]

    return _substitute(text, _DRUG_RE, choose, "drug")


def negate_first_sentence(text: str) -> Perturbed:
    """Prefix the first sentence with "It is not true that": the fallback when nothing else applies."""
    sentences = split_sentences(text)
    if not sentences:
        return Perturbed("It is not true that this condition exists.", ("negate:empty",))
    first = sentences[0].rstrip(".!?")
    negated = f"It is not true that {first[:1].lower()}{first[1:]}."
    return Perturbed(" ".join([negated, *sentences[1:]]), ("negate:first_sentence",))


def make_misleading(text: str, rng: random.Random) -> Perturbed:
    """Reverse claims, change numbers and swap drugs; negate the first sentence if none applied."""
    changes: list[str] = []
    for step in (reverse_claims, lambda t: change_numbers(t, rng), lambda t: swap_drugs(t, rng)):
        result = step(text)
        text = result.text
        changes.extend(result.changes)
    if not changes:
        result = negate_first_sentence(text)
        text, changes = result.text, list(result.changes)
    return Perturbed(text, tuple(changes))


def excerpt(answer: str, n_sentences: int, min_chars: int = 200) -> str:
    """The first ``n_sentences`` sentences of an answer, more if they are shorter than ``min_chars``."""
    # only the head can be used, and some answers run to 50k characters
    sentences = split_sentences(normalize_ws(answer[: 600 * n_sentences + min_chars]))
    taken: list[str] = []
    for sentence in sentences:
        if len(taken) >= n_sentences and sum(len(s) for s in taken) >= min_chars:
            break
        taken.append(sentence)
    return " ".join(taken)


# --- framing and URLs by platform kind ----------------------------------------------------------

_HANDLES = ("healthnotes", "wellnesswalk", "caregiverdiary", "plainmedicine", "thepatientside",
            "dailyhealthjournal", "symptomwatch", "askamom", "livingwithit", "curiousreader")
_SUBREDDITS = ("AskDocs", "Health", "ChronicIllness", "medical", "RareDiseases")
_BLOG_TITLES = ("{focus}: what you should know", "Understanding {focus}", "My notes on {focus}",
                "{focus}, explained simply")
_BLOG_INTROS = ("I spent some time reading up on {focus}; here is what I found.",
                "A lot of readers asked me about {focus}, so here is a short summary.",
                "This is my plain-language take on {focus}.")
_AI_INTROS = ("Here is an overview in answer to your question.", "Sure! Here is a concise summary.",
              "Great question. Here is what is generally said about this.")


def slugify(text: str, max_words: int = 8) -> str:
    """Lower-case words of a title joined by hyphens, as platforms build their URL slugs."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    return "-".join(words[:max_words]) or "post"


def _base36(rng: random.Random, length: int) -> str:
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(length))


def _hex(rng: random.Random, length: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(length))


def synthetic_url(source_type: str, title: str, rng: random.Random) -> str:
    """A URL with the real shape of a forum, blog platform or shared AI chat for this title."""
    slug = slugify(title)
    handle = f"{rng.choice(_HANDLES)}{rng.randint(1, 99)}"
    if source_type == "user_generated":
        kind = rng.randrange(3)
        if kind == 0:
            return f"https://www.reddit.com/r/{rng.choice(_SUBREDDITS)}/comments/{_base36(rng, 6)}/{slug.replace('-', '_')}/"
        if kind == 1:
            return "https://www.quora.com/" + "-".join(w.capitalize() for w in slug.split("-"))
        return f"https://medicalsciences.stackexchange.com/questions/{rng.randint(10000, 39999)}/{slug}"
    if source_type == "blog":
        kind = rng.randrange(4)
        year, month = rng.randint(2016, 2025), rng.randint(1, 12)
        if kind == 0:
            return f"https://{handle}.blogspot.com/{year}/{month:02d}/{slug}.html"
        if kind == 1:
            return f"https://{handle}.wordpress.com/{year}/{month:02d}/{rng.randint(1, 28):02d}/{slug}/"
        if kind == 2:
            return f"https://medium.com/@{handle}/{slug}-{_hex(rng, 12)}"
        return f"https://{handle}.substack.com/p/{slug}"
    if source_type == "ai_generated":
        kind = rng.randrange(3)
        if kind == 0:
            return f"https://chatgpt.com/share/{_hex(rng, 8)}-{_hex(rng, 4)}-{_hex(rng, 4)}-{_hex(rng, 4)}-{_hex(rng, 12)}"
        if kind == 1:
            return f"https://www.perplexity.ai/search/{slug}-{_hex(rng, 8)}"
        return f"https://gemini.google.com/share/{_hex(rng, 12)}"
    raise ValueError(f"no synthetic URL shape for source type {source_type!r}; use one of {LOW_CREDIBILITY_TYPES}")


def frame(source_type: str, focus: str, question: str, body: str, rng: random.Random) -> tuple[str, str]:
    """Title and text of a copy as the platform would show it (the same frame for true and false copies)."""
    if source_type == "user_generated":
        return question, f"Reply from a member who looked into this:\n\n{body}"
    if source_type == "blog":
        title = rng.choice(_BLOG_TITLES).format(focus=focus)
        return title, f"{rng.choice(_BLOG_INTROS).format(focus=focus)}\n\n{body}"
    if source_type == "ai_generated":
        return question, f"{rng.choice(_AI_INTROS)}\n\n{body}"
    raise ValueError(f"no frame for source type {source_type!r}; use one of {LOW_CREDIBILITY_TYPES}")
