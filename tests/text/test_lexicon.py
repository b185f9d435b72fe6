"""One lexicon per language, one stemmer, read by every rule of words; and the
English behaviour that changed when the two sets of lists became one."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from agentscope_mem0._text import lexicon
from agentscope_mem0._text.fact_words import (
    Agreement,
    compare_answers,
    denies,
    holder,
    is_additive,
    tells_of_past,
)
from agentscope_mem0._text.lexicon import (
    CHINESE,
    ENGLISH,
    LEXICONS,
    UNREAD,
    lexicon_for,
    segmenter_ready,
)
from agentscope_mem0._text.same_fact import fact_shape, kept_apart, same_fact

SRC = Path(__file__).resolve().parents[2] / "src" / "agentscope_mem0"


def test_the_lexicon_is_picked_by_the_script_and_the_language_of_the_text() -> None:
    assert LEXICONS == {"en": ENGLISH, "zh": CHINESE}
    assert lexicon_for("User lives in Hangzhou") is ENGLISH
    assert lexicon_for("User 住在杭州") is ENGLISH  # the Latin letters are the most
    assert lexicon_for("用户住在杭州") is CHINESE
    assert lexicon_for("Пользователь живёт в Москве") is None
    assert lexicon_for("2024-03-10") is None
    # Another language in the same script is not read with the English words.
    assert lexicon_for("Der Nutzer arbeitet in München") is None
    assert lexicon_for("L'utilisateur habite à Lyon avec sa femme et ne fume pas") is None
    assert lexicon_for("User likes films with Robert De Niro") is ENGLISH
    # Chinese characters in a Japanese text: not Chinese.
    assert lexicon_for("ユーザーは東京に住んでいる") is None


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


def test_a_language_without_a_lexicon_reads_no_words() -> None:
    assert holder("Пользователь живёт в Москве") is None
    assert not tells_of_past("Der Nutzer wohnte früher in Berlin")
    assert UNREAD.stem("lived") == "lived" and not UNREAD.fillers
    # Words it cannot read veto nothing a model reads as one fact (another tense)...
    arbeitet, arbeitete = "Der Nutzer arbeitet in München", "Der Nutzer arbeitete in München"
    assert kept_apart(fact_shape(arbeitet), fact_shape(arbeitete)) is None
    # ...and merge nothing on their own: the words differ.
    assert not same_fact(fact_shape(arbeitet), fact_shape(arbeitete))
    # Digits are read in any language.
    assert kept_apart(fact_shape("Anna wohnt in Haus 12"), fact_shape("Anna wohnt in Haus 21"))
    # Japanese: pairs of characters, a negating character kept apart.
    assert not same_fact(fact_shape("東京に住んでいる"), fact_shape("東京に住んでいない"))


def test_chinese_is_read_in_jieba_s_words() -> None:
    assert holder("用户住在杭州") == "user"
    assert holder("用户的妹妹搬到了广州") == "user's 妹妹"
    assert holder("小王欠用户五百元") == "小王"
    assert tells_of_past("用户小时候住在兰州") and is_additive("用户也养了一只猫")
    assert not tells_of_past("用户上个月搬到了北京")
    assert compare_answers("杭州", "北京") is Agreement.DIFFERENT
    assert compare_answers("杭州", "杭州。") is Agreement.SAME
    assert denies("没有") and denies("不吃")
    names = frozenset({"alice"})

    def apart(a: str, b: str) -> str | None:
        return kept_apart(fact_shape(a, names), fact_shape(b, names))

    assert apart("用户住在北京", "用户不住在北京") == "negation"
    assert apart("用户欠小李三百元", "小李欠用户三百元") == "another person"
    assert apart("用户有两只猫", "用户有三只猫") == "numbers"
    assert apart("用户的考试在四月六日", "用户的考试在六月四日") == "numbers"
    assert apart("用户每月存两千元", "用户每月存两千美元") == "currency"
    assert apart("用户的鱼缸设在零下5度", "用户的鱼缸设在5度") == "numbers"
    assert apart("用户的哥哥住在深圳", "用户住在深圳") == "another person"
    assert apart("用户雇了一个厨师", "用户是一名厨师") == "role"
    assert apart("用户以前在上海工作", "用户在上海工作") == "time"
    # The same fact in other words: nothing keeps them apart, the words merge them.
    assert same_fact(fact_shape("用户住在北京", names), fact_shape("用户目前住在北京。", names))
    assert same_fact(fact_shape("用户不吃香菜", names), fact_shape("用户不能吃香菜", names))
    assert same_fact(fact_shape("用户养了一只狗", names), fact_shape("用户养了一只狗。", names))


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


def test_jieba_is_imported_only_for_a_chinese_text() -> None:
    code = (
        "import sys\n"
        "from agentscope_mem0._text.same_fact import fact_shape\n"
        "fact_shape('User lives in Rome'); fact_shape('Der Nutzer wohnt in Rom')\n"
        "assert 'jieba' not in sys.modules\n"
        "fact_shape('用户住在罗马')\n"
        "assert 'jieba' in sys.modules\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "Building prefix dict" not in done.stderr  # jieba's DEBUG lines stay quiet


async def test_the_segmenter_loads_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    loaded_on: list[threading.Thread] = []
    monkeypatch.setattr(lexicon, "_SEGMENTER", None)
    monkeypatch.setattr(lexicon, "_segmenter", lambda: loaded_on.append(threading.current_thread()))
    await segmenter_ready(["User lives in Rome"])
    assert loaded_on == []
    await segmenter_ready(["User lives in Rome", "用户住在罗马"])
    assert loaded_on and loaded_on[0] is not threading.current_thread()


def test_a_memorys_lexicon_is_chosen_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Memories and questions come back turn after turn, on the event loop.
    looked_at: list[str] = []

    class Counting:
        def findall(self, text: str) -> list[str]:
            looked_at.append(text)
            return []

    monkeypatch.setitem(lexicon.LEXICONS, "counting", SimpleNamespace(letters=Counting()))
    memory = "User keeps three hives of bees behind the orchard."
    assert lexicon_for(memory) is ENGLISH
    assert lexicon_for(memory) is ENGLISH
    assert looked_at == [memory]
    exchange = "user: " + "I keep bees. " * 100  # a whole exchange is not kept
    lexicon_for(exchange)
    lexicon_for(exchange)
    assert looked_at == [memory, exchange, exchange]
