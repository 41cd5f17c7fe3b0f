"""Controlled synthetic documents for the credibility experiment: renditions and corruptions.

A rendition starts from a real MedQuAD answer: a few of its sentences, lightly reworded (meaning
kept), framed as one of seven kinds of page (an agency page, a journal abstract, a news story, a
clinic's fact sheet, a blog post, a forum reply, a shared AI chat) under a URL of that kind of site.

A corrupted rendition has one edit that changes what the text asserts, not only its wording:

* ``dose``: every quantity (a dose, a count, a prevalence) scaled by a factor of 0.1 to 10;
* ``negation``: the first claim with an auxiliary verb negated ("is" -> "is not", "cannot" -> "can");
* ``date``: years shifted, ages and durations scaled, life stages swapped ("in childhood" ->
  "in adulthood").

A text that states a quantity or a date gets one of those edits (drawn between them); any other
text gets the negation, which always applies. Each change is listed, so a test or an analyst can see what was made false. Everything is a pure
function of the text and a ``random.Random``, so a seed reproduces the corpus exactly.

These documents exist only inside the experiment's own corpus namespace; their URLs have the real
shapes of those sites (so the source rules classify them) but the pages were never published.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass

from hifirag_core.text import normalize_ws, split_sentences

# The paper's corpus has seven source types; "unknown" is what a classifier says, not a kind of page.
CORPUS_TYPES: tuple[str, ...] = ("government", "peer_reviewed", "established_news", "organization_report",
                                 "blog", "user_generated", "ai_generated")
# Where the old corpus put every adversarial copy: the "total" end of the correlation parameter.
LOW_CREDIBILITY_TYPES: tuple[str, ...] = ("blog", "user_generated", "ai_generated")
CORRUPTION_KINDS: tuple[str, ...] = ("dose", "negation", "date")

# Meaning-preserving rewording, so renditions are not verbatim copies of the agency text.
PARAPHRASES: dict[str, str] = {
    "physician": "doctor", "physicians": "doctors", "individuals": "people",
    "approximately": "about", "numerous": "many", "utilize": "use", "assist": "help",
    "obtain": "get", "additionally": "also", "therefore": "so", "however": "but",
    "require": "need", "requires": "needs",
}

# Life stages and a contrasting stage for each (young <-> old), for the date edit.
LIFE_STAGES: dict[str, str] = {
    "infancy": "late adulthood", "early childhood": "middle age", "childhood": "adulthood",
    "adolescence": "late adulthood", "early adulthood": "old age", "adulthood": "childhood",
    "middle age": "early childhood", "late adulthood": "infancy", "old age": "childhood",
}

_YEAR = re.compile(r"^(1[89]\d\d|20\d\d)$")
_NUMBER = re.compile(r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w,]\d|\w)")
_FACTORS = (0.1, 0.2, 3.0, 5.0, 10.0)
# A number is a time ("age 40", "30 to 50 years", "within 2 weeks") when one of these frames it.
_TIME_UNIT = r"(?:years?|months?|weeks?|days?|hours?|decades?)\b"
_TIME_AFTER = re.compile(r"^\s*(?:(?:to|-|and|or)\s*\d+(?:\.\d+)?\s*)?[\s-]*" + _TIME_UNIT, re.IGNORECASE)
_AGE_BEFORE = re.compile(r"\bage[sd]?\s+(?:of\s+)?(?:\d+\s*(?:to|-|and|or)\s*)?$", re.IGNORECASE)
# A number after one of these words names something ("type 1", "chromosome 15"), it is no quantity.
_LABEL_BEFORE = re.compile(r"\b(?:types?|chromosomes?|stages?|grades?|class|phases?|factors?|trisomy|part|step|"
                           r"levels?|groups?|number|no\.|items?|figures?|tables?|versions?)\s*$", re.IGNORECASE)
_AUXILIARY = re.compile(r"\b(cannot|is|are|was|were|can|could|may|might|will|would|should|must|does|do|did)"
                        r"(\s+not\b)?", re.IGNORECASE)


@dataclass(frozen=True)
class Perturbed:
    """A text, the changes made to it (empty when nothing changed) and the kind of edit."""

    text: str
    changes: tuple[str, ...]
    kind: str | None = None


def _phrase_pattern(phrases: list[str]) -> re.Pattern[str]:
    alternatives = sorted(phrases, key=len, reverse=True)  # "early childhood" before "childhood"
    return re.compile(r"\b(?:" + "|".join(re.escape(p) for p in alternatives) + r")\b", re.IGNORECASE)


_PARAPHRASE_RE = _phrase_pattern(list(PARAPHRASES))
_LIFE_STAGE_RE = _phrase_pattern(list(LIFE_STAGES))


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


def paraphrase(text: str) -> str:
    """Reword formal terms plainly without changing what the text claims."""
    return _substitute(text, _PARAPHRASE_RE, lambda w: PARAPHRASES[w], "reword").text


def _format_like(original: str, decimals: str | None, value: float) -> str:
    if decimals:
        return f"{value:.{len(decimals) - 1}f}"
    return f"{int(round(value)):,}" if "," in original else str(int(round(value)))


def _number_role(text: str, match: re.Match[str]) -> str:
    """``year``, ``time`` (an age or a duration), ``label`` (part of a name) or ``quantity``."""
    if _YEAR.match(match.group(1)) and not match.group(2):
        return "year"
    before, after = text[max(0, match.start() - 24):match.start()], text[match.end():match.end() + 24]
    if _LABEL_BEFORE.search(before):
        return "label"
    if _AGE_BEFORE.search(before) or _TIME_AFTER.match(after):
        return "time"
    return "quantity"


def _scale_numbers(text: str, rng: random.Random, roles: frozenset[str], label: str) -> Perturbed:
    """Scale every number of the given roles by a random factor (never to itself or to zero)."""
    changes: list[str] = []

    def repl(match: re.Match[str]) -> str:
        if _number_role(text, match) not in roles:
            return match.group(0)
        whole, decimals = match.group(1), match.group(2)
        value = float(whole.replace(",", "") + (decimals or ""))
        new = _format_like(whole, decimals, value * rng.choice(_FACTORS))
        if new == match.group(0) or float(new.replace(",", "")) == 0:
            new = _format_like(whole, decimals, value * 10 if value else 7.0)
        changes.append(f"{label}:{match.group(0)}->{new}")
        return new

    return Perturbed(_NUMBER.sub(repl, text), tuple(changes), label)


def change_dose(text: str, rng: random.Random) -> Perturbed:
    """Scale every quantity (not years, ages, durations or numbers that name things)."""
    return _scale_numbers(text, rng, frozenset({"quantity"}), "dose")


def _shift_years(text: str, rng: random.Random) -> Perturbed:
    changes: list[str] = []

    def repl(match: re.Match[str]) -> str:
        if _number_role(text, match) != "year":
            return match.group(0)
        year = int(match.group(1))
        shift = rng.randint(5, 30)
        new = year - shift if year + shift > 2025 or rng.random() < 0.5 else year + shift
        changes.append(f"date:{year}->{new}")
        return str(new)

    return Perturbed(_NUMBER.sub(repl, text), tuple(changes), "date")


def change_date(text: str, rng: random.Random) -> Perturbed:
    """Shift years, scale ages and durations, and swap life stages: when something happens."""
    years = _shift_years(text, rng)
    times = _scale_numbers(years.text, rng, frozenset({"time"}), "date")
    stages = _substitute(times.text, _LIFE_STAGE_RE, lambda w: LIFE_STAGES[w], "date")
    return Perturbed(stages.text, years.changes + times.changes + stages.changes, "date")


def negate_claim(text: str) -> Perturbed:
    """Negate the first sentence that has an auxiliary verb; else deny the first sentence outright."""
    sentences = split_sentences(text)
    for i, sentence in enumerate(sentences):
        match = _AUXILIARY.search(sentence)
        if match is None:
            continue
        verb, negated = match.group(1), match.group(2)
        if verb.lower() == "cannot":
            new = _match_case(verb, "can")
        elif negated:
            new = verb
        else:
            new = f"{verb} not"
        sentences[i] = sentence[:match.start()] + new + sentence[match.end():]
        return Perturbed(" ".join(sentences), (f"negation:{match.group(0).lower()}->{new.lower()}",), "negation")
    if not sentences:
        return Perturbed("It is not true that this condition exists.", ("negation:empty",), "negation")
    first = sentences[0].rstrip(".!?")
    sentences[0] = f"It is not true that {first[:1].lower()}{first[1:]}."
    return Perturbed(" ".join(sentences), ("negation:first_sentence",), "negation")


def corrupt(text: str, rng: random.Random) -> Perturbed:
    """A changed dose or a wrong date where the text states one (drawn between them), else a negated claim.

    Quantities and dates come first because they are the edits a reader cannot spot from the
    wording; most two-to-four-sentence excerpts state neither, so negation is the common case.
    """
    specific = [edit for edit in (change_dose(text, rng), change_date(text, rng)) if edit.changes]
    return rng.choice(specific) if specific else negate_claim(text)


def excerpt(answer: str, n_sentences: int, start: int = 0, min_chars: int = 120) -> str:
    """``n_sentences`` sentences of an answer from sentence ``start``, more if they are too short."""
    # only the head can be used, and some answers run to 50k characters
    sentences = split_sentences(normalize_ws(answer[: 600 * (n_sentences + start) + min_chars]))
    if start >= len(sentences) - 1:
        start = 0
    taken: list[str] = []
    for sentence in sentences[start:]:
        if len(taken) >= n_sentences and sum(len(s) for s in taken) >= min_chars:
            break
        taken.append(sentence)
    return " ".join(taken)


# --- framing and URLs by kind of site -------------------------------------------------------------

_HANDLES = ("healthnotes", "wellnesswalk", "caregiverdiary", "plainmedicine", "thepatientside",
            "dailyhealthjournal", "symptomwatch", "askamom", "livingwithit", "curiousreader")
_SUBREDDITS = ("AskDocs", "Health", "ChronicIllness", "medical", "RareDiseases")
_AGENCIES = ("medlineplus.gov", "www.ninds.nih.gov", "www.niddk.nih.gov", "www.nhlbi.nih.gov", "www.cancer.gov",
             "www.nichd.nih.gov", "www.nia.nih.gov")
_TITLES: dict[str, tuple[str, ...]] = {
    "government": ("{focus}", "{focus} | Health topics", "About {focus}"),
    "peer_reviewed": ("{focus}: a review of current evidence", "Clinical features and management of {focus}",
                      "{focus}: diagnosis and treatment, a narrative review"),
    "established_news": ("What to know about {focus}", "{focus}: what the experts say",
                         "{focus}, explained by doctors"),
    "organization_report": ("{focus}: fact sheet", "{focus}: overview", "{focus}: causes, symptoms and treatment"),
    "blog": ("{focus}: what you should know", "Understanding {focus}", "My notes on {focus}",
             "{focus}, explained simply"),
}
_INTROS: dict[str, tuple[str, ...]] = {
    "peer_reviewed": ("Abstract. Background and current evidence.", "Abstract."),
    "established_news": ("Doctors and researchers answer common questions.", "Here is what the research says."),
    "organization_report": ("Reviewed by our medical staff.", "Information for patients and families."),
    "blog": ("I spent some time reading up on {focus}; here is what I found.",
             "A lot of readers asked me about {focus}, so here is a short summary.",
             "This is my plain-language take on {focus}."),
    "user_generated": ("Reply from a member who looked into this:", "Top answer:"),
    "ai_generated": ("Here is an overview in answer to your question.", "Sure! Here is a concise summary.",
                     "Great question. Here is what is generally said about this."),
}


def slugify(text: str, max_words: int = 8) -> str:
    """Lower-case words of a title joined by hyphens, as sites build their URL slugs."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    return "-".join(words[:max_words]) or "post"


def _digits(rng: random.Random, length: int) -> str:
    return "".join(rng.choice("0123456789") for _ in range(length))


def _base36(rng: random.Random, length: int) -> str:
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(length))


def _hex(rng: random.Random, length: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(length))


def _date_path(rng: random.Random) -> str:
    return f"{rng.randint(2016, 2025)}/{rng.randint(1, 12):02d}/{rng.randint(1, 28):02d}"


def _url_shapes(source_type: str, slug: str, rng: random.Random) -> list[Callable[[], str]]:
    """The URL shapes of one kind of site, each a thunk so only the chosen one draws from ``rng``."""
    handle = f"{rng.choice(_HANDLES)}{rng.randint(1, 99)}"
    return {
        "government": [
            lambda: f"https://{rng.choice(_AGENCIES)}/health/{slug}",
            lambda: f"https://www.cdc.gov/{slug}/about/index.html",
            lambda: f"https://rarediseases.info.nih.gov/diseases/{_digits(rng, 4)}/{slug}",
        ],
        "peer_reviewed": [
            lambda: f"https://pmc.ncbi.nlm.nih.gov/articles/PMC{_digits(rng, 7)}/",
            lambda: f"https://journals.plos.org/plosone/article?id=10.1371/journal.pone.0{_digits(rng, 6)}",
            lambda: f"https://www.frontiersin.org/articles/10.3389/fmed.{rng.randint(2016, 2025)}.{_digits(rng, 7)}/full",
            lambda: f"https://bmcmedicine.biomedcentral.com/articles/10.1186/s12916-0{_digits(rng, 2)}-{_digits(rng, 5)}-{rng.randint(1, 9)}",
        ],
        "established_news": [
            lambda: f"https://www.statnews.com/{_date_path(rng)}/{slug}/",
            lambda: f"https://www.nytimes.com/{_date_path(rng)}/well/{slug}.html",
            lambda: f"https://www.healthline.com/health/{slug}",
            lambda: f"https://www.medicalnewstoday.com/articles/{_digits(rng, 6)}",
        ],
        "organization_report": [
            lambda: f"https://my.clevelandclinic.org/health/diseases/{_digits(rng, 5)}-{slug}",
            lambda: f"https://www.mayoclinic.org/diseases-conditions/{slug}/symptoms-causes/syc-{_digits(rng, 8)}",
            lambda: f"https://rarediseases.org/rare-diseases/{slug}/",
            lambda: f"https://www.hopkinsmedicine.org/health/conditions-and-diseases/{slug}",
        ],
        "blog": [
            lambda: f"https://{handle}.blogspot.com/{_date_path(rng)[:7]}/{slug}.html",
            lambda: f"https://{handle}.wordpress.com/{_date_path(rng)}/{slug}/",
            lambda: f"https://medium.com/@{handle}/{slug}-{_hex(rng, 12)}",
            lambda: f"https://{handle}.substack.com/p/{slug}",
        ],
        "user_generated": [
            lambda: f"https://www.reddit.com/r/{rng.choice(_SUBREDDITS)}/comments/{_base36(rng, 6)}/{slug.replace('-', '_')}/",
            lambda: "https://www.quora.com/" + "-".join(w.capitalize() for w in slug.split("-")),
            lambda: f"https://medicalsciences.stackexchange.com/questions/{rng.randint(10000, 39999)}/{slug}",
        ],
        "ai_generated": [
            lambda: f"https://chatgpt.com/share/{_hex(rng, 8)}-{_hex(rng, 4)}-{_hex(rng, 4)}-{_hex(rng, 4)}-{_hex(rng, 12)}",
            lambda: f"https://www.perplexity.ai/search/{slug}-{_hex(rng, 8)}",
            lambda: f"https://gemini.google.com/share/{_hex(rng, 12)}",
        ],
    }.get(source_type, [])


def synthetic_url(source_type: str, title: str, rng: random.Random) -> str:
    """A URL with the real shape of a site of this source type, for this title."""
    shapes = _url_shapes(source_type, slugify(title), rng)
    if not shapes:
        raise ValueError(f"no synthetic URL shape for source type {source_type!r}; use one of {CORPUS_TYPES}")
    return rng.choice(shapes)()


def frame(source_type: str, focus: str, question: str, body: str, rng: random.Random) -> tuple[str, str]:
    """Title and text of a rendition as the site would show it (the same frame for true and false bodies).

    Every frame carries the question (as the title of a forum thread or a chat, as a heading
    elsewhere), so no kind of site is closer to the query by construction.
    """
    if source_type not in CORPUS_TYPES:
        raise ValueError(f"no frame for source type {source_type!r}; use one of {CORPUS_TYPES}")
    intro = rng.choice(_INTROS[source_type]).format(focus=focus) if source_type in _INTROS else ""
    if source_type in ("user_generated", "ai_generated"):
        return question, f"{intro}\n\n{body}"
    title = rng.choice(_TITLES[source_type]).format(focus=focus)
    head = f"{intro}\n\n" if intro else ""
    return title, f"{head}## {question}\n\n{body}"
