"""One lexicon per language, one stemmer, read by every rule of words; and the
English behaviour that changed when the two sets of lists became one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agentscope_mem0._text.fact_words import (
    Agreement,
    compare_answers,
    denies,
    holder,
    is_additive,
    tells_of_past,
)
from agentscope_mem0._text.lexicon import ENGLISH, LEXICONS, UNREAD, lexicon_for
from agentscope_mem0._text.same_fact import fact_shape, kept_apart, same_fact

SRC = Path(__file__).resolve().parents[2] / "src" / "agentscope_mem0"


def test_the_lexicon_is_picked_by_the_script_of_the_text() -> None:
    assert LEXICONS == {"en": ENGLISH}
    assert lexicon_for("User lives in Hangzhou") is ENGLISH
    assert lexicon_for("User 住在杭州") is ENGLISH  # the Latin letters are the most
    assert lexicon_for("用户住在杭州") is None
    assert lexicon_for("Пользователь живёт в Москве") is None
    assert lexicon_for("2024-03-10") is None


@pytest.mark.parametrize(
    "forms",
    [
        ("live", "lives", "lived", "living"),
        ("stop", "stops", "stopped", "stopping"),
        ("study", "studies", "studied"),
        ("go", "goes", "went"),
        ("sister", "sisters", "sister's"),
    ],
)
def test_one_stemmer_gives_a_word_s_forms_one_key(forms: tuple[str, ...]) -> None:
    assert len({ENGLISH.stem(form) for form in forms}) == 1


def test_no_rule_keeps_a_word_list_of_its_own() -> None:
    """Months, weekdays and people are listed in the lexicon only (prose may name a few)."""
    lists = {ENGLISH.months: 3, ENGLISH.weekdays: 3, tuple(ENGLISH.people): 10}
    holders = set()
    for path in SRC.rglob("*.py"):
        words = set(re.findall(r"[a-z]+", path.read_text(encoding="utf-8").casefold()))
        if any(len(words.intersection(listed)) >= least for listed, least in lists.items()):
            holders.add(path.relative_to(SRC).as_posix())
    assert holders == {"_text/lexicon.py"}


def test_a_script_without_a_lexicon_reads_no_words() -> None:
    assert holder("用户住在杭州") is None
    assert not tells_of_past("用户以前住在杭州") and not is_additive("用户也养了一只猫")
    assert holder("Пользователь живёт в Москве") is None
    assert compare_answers("杭州", "北京") is Agreement.DIFFERENT
    assert compare_answers("杭州", "杭州。") is Agreement.SAME
    assert UNREAD.stem("lived") == "lived" and not UNREAD.fillers
    # The same-fact rule still reads Chinese by pairs of characters, a negation kept apart.
    assert not same_fact(fact_shape("用户住在北京"), fact_shape("用户不住在北京"))
    assert same_fact(fact_shape("用户住在北京"), fact_shape("用户住在北京。"))


# English behaviour changed on purpose by merging the lists (before: two people
# lists, two filler lists, three stemmers).


def test_one_people_list_names_the_holder() -> None:
    # The judgement's list lacked these: "User's team ..." was the user's fact.
    assert holder("User's team uses Jira") == "user's team"
    assert holder("User's doctor is Dr. Lee") == "user's doctor"
    assert holder("User's dog is named Rex") == "user"  # a pet is the user's
    # The same-fact rule's list lacked "teammate": it read as a detail, now as a person.
    teammate = fact_shape("User's teammate lives in Oslo")
    assert kept_apart(teammate, fact_shape("User lives in Oslo")) == "another person"


def test_every_form_of_a_synonym_reads_as_its_family() -> None:
    # "living" and "loving" were words of their own; the stemmer now folds them.
    assert same_fact(fact_shape("User is living in Paris"), fact_shape("User lives in Paris"))
    assert same_fact(fact_shape("User is loving the new job"), fact_shape("User loves the new job"))
    # A past form still tells another time.
    planned = fact_shape("User planned a trip to Rome")
    assert kept_apart(planned, fact_shape("User plans a trip to Rome")) == "time"
    assert kept_apart(fact_shape("User loved hiking"), fact_shape("User loves hiking")) == "time"


def test_short_answers_read_with_the_one_stemmer_and_filler_list() -> None:
    assert compare_answers("work", "working") is Agreement.SAME  # was DIFFERENT
    assert compare_answers("over 30", "30") is Agreement.SAME
    assert compare_answers("Spain", "from Spain") is Agreement.MORE  # "from" is a word
    assert compare_answers("coffee", "coffee without sugar") is Agreement.MORE
    assert denies("cannot drive") and not denies("coffee without sugar")
    assert compare_answers("drives", "cannot drive") is Agreement.DIFFERENT
