"""A question's steering: its own fields over the run's ``steer`` section, read one field at a time.

Stages read steering only through :class:`Steer`, which reads ``cfg.steer.<field>`` when (and only
when) a stage asks for that field, so the config-read test sees exactly which stage reads which
control; :func:`steered_slice` puts the question's own values into the config slice of a stage's cache
key, so a control keys exactly the stages that declare it, whether it came from the run or the question.
"""

from __future__ import annotations

from datetime import date
from functools import cached_property
from typing import TYPE_CHECKING, Any

from hifirag_core.language import ENGLISH, Detected, detect_language, language_name
from hifirag_core.questions import Question
from hifirag_core.steering import (
    AUTO,
    DateWindow,
    SiteRules,
    SteeringError,
    check_site_conflicts,
    check_window,
    day,
)

if TYPE_CHECKING:
    from hifirag_core.config import PipelineConfig

_SECTION = "steer"


class Steer:
    """The steering of one question under one run's config."""

    def __init__(self, question: Question, cfg: PipelineConfig):
        self.question = question
        self.cfg = cfg
        self._own = question.steering

    def _value(self, name: str) -> Any:
        run_value = getattr(self.cfg.steer, name)  # read even when the question overrides it: see the module doc
        return self._own.get(name, run_value)

    @cached_property
    def sites(self) -> SiteRules:
        return SiteRules.of(self._value("sites"), self._value("exclude_sites"))

    @cached_property
    def window(self) -> DateWindow:
        after, before = self._value("after"), self._value("before")
        return DateWindow(date.fromisoformat(after) if isinstance(after, str) else after,
                          date.fromisoformat(before) if isinstance(before, str) else before,
                          self.cfg.steer.undated)

    @cached_property
    def detected(self) -> Detected:
        """The question's own language."""
        return detect_language(self.question.query)

    @cached_property
    def language(self) -> str:
        """The language the answer is written in: the question's own (``auto``) or the one asked for."""
        setting = self._value("language")
        return self.detected.code if setting == AUTO else setting

    @property
    def language_name(self) -> str:
        return language_name(self.language)

    @property
    def non_english(self) -> bool:
        """Whether the question or the answer asked for is in another language than English."""
        return self.language != ENGLISH or self.detected.code != ENGLISH

    @cached_property
    def length(self) -> str:
        return self._value("length")

    @cached_property
    def source_dates(self) -> bool:
        return bool(self.cfg.steer.source_dates)


def steered_slice(cfg: PipelineConfig, question: Question, reads: tuple[str, ...]) -> dict[str, Any]:
    """``cfg.slice(*reads)`` with the question's own steering fields in place of the run's."""
    out = cfg.slice(*reads)
    own = question.steering
    if not own:
        return out
    for path in reads:
        if path == _SECTION:
            out[path] = {**out[path], **own}
        elif path.startswith(_SECTION + ".") and path.split(".", 1)[1] in own:
            out[path] = own[path.split(".", 1)[1]]
    return out


def steering_conflicts(cfg: PipelineConfig, own: dict[str, Any], whose: str = "the question's") -> list[str]:
    """What makes a question's own steering fields impossible together with the run's (``cfg.steer``): an
    empty date window, or sites all excluded. Each problem names both fields and where each came from. The
    one check of ``hifirag run`` (a question file's lines; exit 2) and ``hifirag serve`` (a request; 422);
    a problem of the question's fields alone is ``question_steering``'s."""
    run = cfg.steer

    def value(name: str) -> Any:
        return own[name] if name in own else getattr(run, name)

    def source(name: str) -> str:
        return f"{name} {whose}" if name in own else f"{name} the run's steer.{name}"

    checks = ((("sites", "exclude_sites"), lambda: check_site_conflicts(value("sites"), value("exclude_sites"))),
              (("after", "before"), lambda: check_window(day(value("after"), "after"), day(value("before"), "before"))))
    problems = []
    for names, check in checks:
        if not any(n in own for n in names) or all(n in own for n in names):
            continue  # the run's alone was checked when it was built, the question's alone by question_steering
        try:
            check()
        except SteeringError as exc:
            problems.append(f"{exc} ({'; '.join(source(n) for n in names)})")
    return problems
