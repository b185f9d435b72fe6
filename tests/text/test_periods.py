"""Reading the period a question names, against the turn's own time."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agentscope_mem0._text import periods
from agentscope_mem0._text.periods import EventPeriod, event_period_in, period_in, time_in

MONDAY = datetime(2026, 6, 15, 10, 0, tzinfo=UTC)
WEDNESDAY = datetime(2025, 11, 5, 12, 0, tzinfo=UTC)
WINTER = datetime(2026, 1, 20, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "now", "start", "end"),
    [
        ("What did I cook yesterday?", WEDNESDAY, "2025-11-04", "2025-11-05"),
        ("what did I do the day before yesterday", WEDNESDAY, "2025-11-03", "2025-11-04"),
        ("What did I book last week?", MONDAY, "2026-06-08", "2026-06-15"),
        ("What did I order last week?", WEDNESDAY, "2025-10-27", "2025-11-03"),
        # "this week" on a Monday still means the days just past
        ("What did I tell you this week?", MONDAY, "2026-06-09", "2026-06-16"),
        ("What did I plan two weeks ago?", MONDAY, "2026-06-01", "2026-06-08"),
        ("What did I buy last month?", MONDAY, "2026-05-01", "2026-06-01"),
        ("What did I start three months ago?", MONDAY, "2026-03-01", "2026-04-01"),
        ("What did I buy in January?", MONDAY, "2026-01-01", "2026-02-01"),
        ("Which doctor did I see in March?", MONDAY, "2026-03-01", "2026-04-01"),
        ("Who did I meet in July?", MONDAY, "2025-07-01", "2025-08-01"),  # the latest July
        ("Where did I travel in May 2023?", MONDAY, "2023-05-01", "2023-06-01"),
        ("What happened in Sept, 2021?", MONDAY, "2021-09-01", "2021-10-01"),
        ("Where did I live in 2023?", MONDAY, "2023-01-01", "2024-01-01"),
        ("Which race did I run last year?", MONDAY, "2025-01-01", "2026-01-01"),
        ("What pet did I get two years ago?", MONDAY, "2024-01-01", "2025-01-01"),
        ("What did I do last summer?", WINTER, "2025-06-01", "2025-09-01"),
        ("What class did I start recently?", MONDAY, "2026-05-16", "2026-06-16"),
        ("Where did I live before 2023?", MONDAY, "0001-01-01", "2023-01-01"),
        ("What changed since last year?", MONDAY, "2025-01-01", "9999-12-31"),
        ("我昨天给谁打了电话？", WEDNESDAY, "2025-11-04", "2025-11-05"),
        ("我前天去了哪家餐厅？", WEDNESDAY, "2025-11-03", "2025-11-04"),
        ("我上周去看了什么展览？", MONDAY, "2026-06-08", "2026-06-15"),
        ("我这周报名了什么课？", MONDAY, "2026-06-09", "2026-06-16"),
        ("我上个月买了什么？", MONDAY, "2026-05-01", "2026-06-01"),
        ("我三个月前开始学什么？", MONDAY, "2026-03-01", "2026-04-01"),
        ("我三月份看了什么医生？", MONDAY, "2026-03-01", "2026-04-01"),
        ("我十二月去了哪里？", MONDAY, "2025-12-01", "2026-01-01"),
        ("我2023年5月在读什么书？", MONDAY, "2023-05-01", "2023-06-01"),
        ("我2023年住在哪里？", MONDAY, "2023-01-01", "2024-01-01"),
        ("我去年去哪里旅行了？", MONDAY, "2025-01-01", "2026-01-01"),
        ("我前年在哪家公司上班？", MONDAY, "2024-01-01", "2025-01-01"),
        ("我两年前在学什么乐器？", MONDAY, "2024-01-01", "2025-01-01"),
        ("我去年之前住在哪里？", MONDAY, "0001-01-01", "2025-01-01"),
    ],
)
def test_a_named_period_is_read_against_the_turns_time(
    text: str, now: datetime, start: str, end: str
) -> None:
    period = period_in(text, now)
    assert period is not None
    assert (period.start.date().isoformat(), period.end.date().isoformat()) == (start, end)
    assert period.words in text


@pytest.mark.parametrize(
    "text",
    [
        "Where do I live?",
        "我现在住在哪？",
        "What may I eat tonight?",  # "may" the verb, not the month
        "Let's march on with the plan",
        "I have 12 cats",
        "I have 2023 photos",
        "Where did I work before I moved?",  # an event, not a calendar period
        "我喜欢喝什么茶？",
        "",
    ],
)
def test_a_question_without_a_calendar_time_has_no_period(text: str) -> None:
    assert period_in(text, MONDAY) is None


@pytest.mark.parametrize(
    ("text", "relation", "event"),
    [
        ("Where did I work before I moved?", "before", "I moved"),
        ("What phone did I have before I moved to Berlin?", "before", "I moved to Berlin"),
        ("What car did I drive when I got married?", "when", "I got married"),
        ("Where did I work after I graduated?", "after", "I graduated"),
        ("What did I read since we met?", "after", "we met"),
        ("我搬家之前在哪家公司上班？", "before", "搬家"),
        ("我结婚以后住在哪？", "after", "结婚"),
    ],
)
def test_a_time_told_by_a_past_event(text: str, relation: str, event: str) -> None:
    found = time_in(text, MONDAY)
    assert isinstance(found, EventPeriod)
    assert (found.relation, found.event) == (relation, event)
    assert found.words in text


@pytest.mark.parametrize(
    "text",
    [
        "What should I pack before I leave?",  # not past: not a time of the past
        "What should I do when I feel sad?",
        "我以前住在哪？",  # "before" of no event
        "Where did I live before 2023?",  # a calendar period, not an event
    ],
)
def test_no_event_time_without_a_past_event(text: str) -> None:
    assert event_period_in(text) is None


def test_an_event_places_its_period_and_is_told_by_its_words() -> None:
    moved = EventPeriod("before", "I moved to Berlin", "before I moved to Berlin")
    when = datetime(2023, 6, 1, tzinfo=UTC)
    assert (moved.around(when).start, moved.around(when).end) == (when - timedelta(days=1), when)
    assert EventPeriod("after", "I graduated", "").around(when).end == when + timedelta(days=365)
    assert moved.told_by("User moved to Berlin")
    assert not moved.told_by("User lives in Austin")
    assert EventPeriod("before", "搬家", "").told_by("用户搬到了南京")


def test_a_period_up_to_now_is_about_the_present() -> None:
    assert period_in("Plot this week's temperatures where I live", MONDAY).reaches_now
    assert period_in("我最近在读什么书？", MONDAY).reaches_now
    assert period_in("What changed since 2023?", MONDAY).reaches_now
    assert not period_in("Where did I live last week?", MONDAY).reaches_now
    assert not period_in("Where did I live in 2023?", MONDAY).reaches_now


def _texts_of(value: object) -> list[str]:
    """Every string inside a JSON value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _texts_of(item)]
    if isinstance(value, list):
        return [t for item in value for t in _texts_of(item)]
    return []


def test_the_quick_check_gives_the_full_readings_answer_on_every_benchmark_text() -> None:
    # The benchmarks' questions, memories and exchanges, English and Chinese,
    # and a few that only a case-insensitive reading folds to a time word.
    data = Path(__file__).resolve().parents[2] / "benchmarks" / "data"
    texts = {"What did I do ſince laſt year?", "What did I do last weeK?", "Itoday", "ın May"}
    texts |= {"Pet12 was born in 1999", "x2023", "2023x", "In ２０２３?", "12 days ago", "mid-2020"}
    for path in data.glob("*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            texts.update(_texts_of(json.loads(line)) if line.strip() else [])
    assert len(texts) > 1000
    for text in texts:
        for now in (MONDAY, WINTER):
            assert time_in(text, now) == (period_in(text, now) or event_period_in(text)), text


def test_a_question_with_no_year_and_no_time_word_is_not_read_for_a_period(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The full reading costs 0.1-0.6 ms on the event loop per turn; most
    # questions name no calendar time at all.
    class Unread:
        def finditer(self, text: str) -> list[re.Match[str]]:
            raise AssertionError(f"read in full: {text!r}")

    monkeypatch.setattr(periods, "_ENGLISH", Unread())
    monkeypatch.setattr(periods, "_CHINESE", Unread())
    long = "I would like a short summary of what you know about my family and my pets " * 3
    for text in (
        "What are the names of my pets?",
        long + "before I write to my sister?",
        "I have a pet named Pet12. Please remember that.",
        "我喜欢喝什么茶？",
        "",
        "I’m fine",
    ):
        assert time_in(text, MONDAY) is None
    assert isinstance(time_in("Where did I work before I moved?", MONDAY), EventPeriod)
    with pytest.raises(AssertionError, match="read in full"):
        time_in("What did I do last week?", MONDAY)
