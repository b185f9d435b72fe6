"""What a memory's words tell the judgement without a model; the lanes it runs in."""

from __future__ import annotations

import pytest

from agentscope_mem0._text.fact_words import (
    Agreement,
    answers_with_what_it_ends,
    compare_answers,
    ends_something_else,
    ends_what_older_names,
    for_a_while,
    holder,
    holds_several,
    is_additive,
    names_its_answer,
    same_holder,
    same_question,
    swaps_one_value,
    tells_of_past,
    year_told,
)


@pytest.mark.parametrize(
    ("memory", "whose"),
    [
        ("User lives in Hangzhou", "user"),
        ("The user's car is red", "user"),
        ("User's sister moved to Paris", "user's sister"),
        ("User’s husband works as a pilot", "user's husband"),
        ("Maria adopted a cat", "maria"),
        ("User's new manager is Sarah", "user's manager"),
        ("User's best friend works at a bank", "user's friend"),
        ("User's younger brother is a nurse", "user's brother"),
        ("User's new car is a Tesla", "user"),
        ("用户住在杭州", "user"),
        ("用户的妹妹搬到了广州", "user's 妹妹"),
        ("用户的新老板是李经理", "user's 老板"),
        ("用户的老板是张经理", "user's 老板"),
        ("Пользователь живёт в Москве", None),
    ],
)
def test_whose_fact(memory: str, whose: str | None) -> None:
    assert holder(memory) == whose


@pytest.mark.parametrize(
    ("named", "other", "same"),
    [
        ("User's boyfriend is called Mark", "User broke up with Mark", True),
        ("User's sister's name is Anna", "User's sister moved to Paris", True),
        ("用户的男朋友叫阿杰", "用户和阿杰分手了", True),
        ("用户的新男朋友叫阿伟", "用户的男朋友是医生", True),
        # Or by the one name the other memory ends something with.
        ("User's girlfriend is Lena", "User broke up with Lena", True),
        ("用户的丈夫是小郑", "用户跟小郑离婚了", True),
        ("用户的未婚妻叫阿华", "用户和阿华的婚约取消了", True),
        ("用户的妈妈是医生", "用户不再是医生了", False),
        ("User's brother is Tom", "User had lunch with Tom", False),
        # Someone's person, not only named, is that person's fact alone.
        ("User's sister Anna moved to Paris", "User lives in Rome", False),
        ("User's sister is called Anna", "Maria adopted a cat", False),
        ("用户的妹妹搬到了广州", "用户住在杭州", False),
    ],
)
def test_naming_a_person_is_also_the_namers_fact(named: str, other: str, same: bool) -> None:
    assert same_holder(named, other) is same
    assert same_holder(other, named) is same


def test_other_scripts_are_not_told_apart_by_words() -> None:
    assert same_holder("用户住在杭州", "用户搬到了北京")
    assert not same_holder("User lives in Rome", "User's brother lives in Rome")


def test_past_and_additive_wording() -> None:
    assert tells_of_past("User used to swim competitively")
    assert tells_of_past("User lived in London as a child")
    assert not tells_of_past("User used to live in London but now lives in Rome")
    assert not tells_of_past("User moved to Beijing last month")
    assert is_additive("User also plays the drums") and is_additive("User bought another bike")
    assert not is_additive("User switched to a Pixel 8")
    # 又/还 before a verb of getting adds one more; before a move, it changes.
    assert is_additive("用户又领养了一只兔子") and is_additive("用户还买了一台相机")
    assert not is_additive("用户又搬家了") and not is_additive("用户还是住在北京")
    # Learning adds a skill and ends none; a life stage long over is the past.
    assert is_additive("User is learning Japanese") and is_additive("用户开始学日语")
    assert not is_additive("User stopped learning the violin")
    assert tells_of_past("User worked as a waiter during university")
    assert tells_of_past("用户大学时在餐厅打过工")
    assert not tells_of_past("User works at the university library")


@pytest.mark.parametrize(
    ("first", "second", "agreement"),
    [
        ("Beijing", "beijing.", Agreement.SAME),
        ("a red Toyota Corolla from 2015", "Toyota Corolla", Agreement.SAME),
        ("Toyota Corolla", "a red Toyota Corolla", Agreement.MORE),
        ("Hangzhou", "Beijing", Agreement.DIFFERENT),
        ("Yes", "No", Agreement.DIFFERENT),
        ("vegetarian", "no longer vegetarian", Agreement.DIFFERENT),
        ("the", "it", Agreement.SAME),  # nothing to compare: no change read into it
    ],
)
def test_answers_compared(first: str, second: str, agreement: Agreement) -> None:
    assert compare_answers(first, second) is agreement


def test_the_year_an_event_is_told_in() -> None:
    assert year_told("User interned at IBM in 2015") == 2015
    assert year_told("User lived in Rome from 1998 to 2003") == 2003
    assert year_told("User has worked at IBM since 2015") is None
    assert year_told("User went to Japan in March 2019") == 2019
    # Amounts are no years.
    assert year_told("User's rent went up to 2000 euros a month") is None
    assert year_told("User pays 1950 dollars in rent") is None
    assert year_told("User walks 2000 steps a day") is None
    assert year_told("User moved to Lisbon last month") is None


@pytest.mark.parametrize(
    ("first", "second", "same"),
    [
        ("Where does the user live now?", "Where does the user live?", True),
        ("What kind of car does the user drive?", "What type of car does the user drive?", True),
        ("What is the user's current job?", "What is the user's job?", True),
        ("What is the user's current status?", "What is the user's status?", False),
        ("用户现在住在哪里？", "用户住在哪里？", True),
        # Another attribute, another asking word, or nothing but asking words.
        ("What language does the user speak?", "What language is the user learning?", False),
        ("Where does the user work?", "When does the user work?", False),
        ("What did the user do?", "What did the user do?", False),
        ("What happened to the user?", "What happened to the user?", False),
        ("用户做什么？", "用户做什么？", False),
        # A language without a lexicon: the words cannot tell.
        ("Wo wohnt der Nutzer?", "Wo wohnt der Nutzer?", False),
    ],
)
def test_questions_compared(first: str, second: str, same: bool) -> None:
    assert same_question(first, second) is same


def test_a_prefix_that_denies_is_another_answer() -> None:
    assert compare_answers("vegetarian", "non-vegetarian") is Agreement.DIFFERENT


@pytest.mark.parametrize(
    ("new", "old", "proposed"),
    [
        ("User quit smoking three months ago", "User smokes a pack a day", True),
        ("User cancelled the trip to Japan", "User is planning a trip to Japan in June", True),
        ("User graduated and no longer studies", "User is studying biology at university", True),
        ("User and John got divorced this spring", "User is married to John", True),
        ("用户上个月戒烟了", "用户每天抽烟", True),
        ("用户不再喝咖啡了", "用户每天喝两杯咖啡", True),
        ("用户不学日语了", "用户在学日语", True),
        ("用户的金鱼上个月死了", "用户养了一条金鱼", True),
        ("用户和小李分手了", "用户和小李在谈恋爱", True),
        ("User quit smoking in March", "User smokes about ten a day", True),
        ("User and Daniel split up", "User is in a relationship with Daniel", True),
        # Someone the end is shared with ends too; a thing given away is named after 把.
        ("用户跟阿明取消了订婚", "用户的未婚夫是阿明", True),
        ("User called off the engagement with Dave", "User is engaged to Dave", True),
        ("用户把旧钢琴卖给了邻居", "用户有一架旧钢琴", True),
        ("用户把小狗送人了", "用户养了一只小狗", True),
        ("用户的猫上个月走丢了", "用户养了一只猫", True),
        ("用户跟阿芳分开了", "用户的女朋友叫阿芳", True),
        ("用户和阿华的婚约取消了", "用户的未婚妻叫阿华", True),  # what they had ends
        # An ending word with no object: what follows is another clause ("回老家").
        ("用户退休去海南了", "用户每年冬天去海南", False),
        ("用户从银行辞职了", "用户在银行上班", True),
        ("用户戒酒三个月了", "用户每晚喝白酒", True),  # the thing stops at a time
        ("用户前不久搬到了上海", "用户住在不久前买的房子里", False),  # 不久 denies nothing
        ("用户把过期的药扔掉了", "用户每天吃药", False),
        ("用户送给妈妈一条围巾", "用户的妈妈住在上海", False),
        # The ended thing is not all the older memory names ("weekends", "night shifts").
        ("User no longer works weekends", "User works at Google", False),
        ("User no longer works night shifts", "User works at a hospital", False),
        ("User is no longer afraid of dogs", "User has a dog named Rex", False),
        ("用户不再上夜班了", "用户在医院工作", False),
        ("用户不再对猫毛过敏了", "用户对花生过敏", False),
        ("用户不再对猫毛过敏了", "用户养了一只猫", False),
        ("用户不再喝奶茶了", "用户喜欢喝茶", False),
        # A past participle describing a thing names a kind of it, not the doing.
        ("User quit smoking last year", "User loves smoked salmon", False),
        ("User no longer rents the furnished flat", "User rents a furnished flat", True),
        ("用户不再吃素了", "用户是素食者", False),  # 吃 is not named: the readings decide
        # A given name's first character names no one ("小丽", "小红").
        ("用户和小丽分手了", "用户的妹妹叫小红", False),
        # Nothing named, no ending word, or a language without a lexicon.
        ("User graduated", "User is allergic to peanuts", False),
        ("User cut their hair short", "User has long hair", False),
        ("Der Nutzer hat mit dem Rauchen aufgehört", "Der Nutzer raucht", False),
    ],
)
def test_ending_words_propose_a_question_only_for_what_the_older_names(
    new: str, old: str, proposed: bool
) -> None:
    assert ends_what_older_names(new, old) is proposed


@pytest.mark.parametrize(
    ("new", "old", "something_else"),
    [
        ("User stopped studying in the library", "User is studying medicine", True),
        ("User quit watching tennis on TV", "User follows Formula 1", True),
        ("用户不再对猫毛过敏了", "用户对花生过敏", True),
        # What the older names is ended, nothing is ended, or no lexicon reads it.
        ("User quit smoking three months ago", "User smokes a pack a day", False),
        ("用户从腾讯辞职了", "用户在腾讯做产品经理", False),
        ("User moved to Berlin", "User lives in Paris", False),
        ("Der Nutzer hat mit dem Rauchen aufgehört", "Der Nutzer raucht", False),
    ],
)
def test_an_end_of_something_else(new: str, old: str, something_else: bool) -> None:
    assert ends_something_else(new, old) is something_else


@pytest.mark.parametrize(
    ("new", "answer", "ended"),
    [
        ("User quit watching tennis on TV", "Tennis", True),
        ("User quit watching tennis on TV", "watching tennis", True),
        ("用户不再喝咖啡了", "咖啡", True),
        # A new value, a denial, or nothing ended.
        ("User stopped studying in the library and now studies at home", "Home", False),
        ("User quit nursing and became a software developer", "software developer", False),
        ("User quit watching tennis on TV", "not watching tennis", False),
        ("User moved to Berlin", "Berlin", False),
        ("用户辞职回老家了", "老家", False),  # where they went: 辞职 takes no object
        ("用户把摩托车卖给了表弟", "摩托车", True),
    ],
)
def test_an_answer_naming_only_what_ended(new: str, answer: str, ended: bool) -> None:
    assert answers_with_what_it_ends(new, answer) is ended


@pytest.mark.parametrize(
    ("memory", "answer", "its_own"),
    [
        ("User started a new job at Microsoft", "Microsoft", True),
        ("User married Sam in July", "married", True),
        ("User quit smoking", "no longer smokes", True),  # a denial
        ("User has three kids now", "3", True),  # nothing the words can check
        ("用户上个月结婚了", "已婚", True),
        ("User stopped learning German", "English", False),
        ("用户在阿里巴巴工作", "Yes", False),
    ],
)
def test_an_answer_in_the_memorys_own_words(memory: str, answer: str, its_own: bool) -> None:
    assert names_its_answer(memory, answer) is its_own


@pytest.mark.parametrize(
    ("memory", "bounded"),
    [
        ("User left Paris for a week-long trip to Rome", True),
        ("User left Vienna for the weekend", True),
        ("User is in Lisbon for a conference", True),
        ("User left Toronto for a two-week holiday in Mexico", True),
        ("用户离开成都去重庆玩了一个周末", True),
        ("用户离开杭州去北京出差一周", True),
        ("User cancelled the trip to Japan", False),
        ("User quit smoking three months ago", False),
        ("User gave up training for the marathon", False),
        ("用户取消了去日本的旅行", False),
        ("用户三个月前戒烟了", False),
        ("用户取消了五月的旅行", False),
        ("用户不再周末加班了", False),
        # A time since the end, not how long it lasts.
        ("用户戒酒三个月了", False),
    ],
)
def test_a_while_away(memory: str, bounded: bool) -> None:
    assert for_a_while(memory) is bounded


@pytest.mark.parametrize(
    ("new", "old", "swapped"),
    [
        ("用户现在每天坐公交车上班", "用户每天骑自行车上班", True),
        ("用户现在在苏州上班", "用户在杭州上班", True),
        ("用户现在每晚十二点睡觉", "用户每晚十点睡觉", True),
        ("User now lives in Berlin", "User lives in Munich", True),
        # A relation that holds for several values at once swaps nothing.
        ("用户喜欢吃寿司", "用户喜欢吃火锅", False),
        ("用户会拉小提琴", "用户会弹钢琴", False),
        ("用户去过泰国", "用户去过日本", False),
        ("用户养了一只狗", "用户养了一只猫", False),
        ("User speaks German", "User speaks French", False),
        # Another holder, nothing shared but the user, an end, or no lexicon.
        ("用户的妈妈住在南京", "用户住在上海", False),
        ("用户对花生过敏", "用户现在开车上班", False),
        ("用户不再骑自行车上班了", "用户每天骑自行车上班", False),
        ("用户不再在超市买菜了", "用户在超市当收银员", False),
        ("用户现在早上改喝茶了", "用户早上六点起床", False),  # a time is all they share
        ("Der Nutzer wohnt jetzt in Berlin", "Der Nutzer wohnt in München", False),
    ],
)
def test_one_value_in_the_place_of_another(new: str, old: str, swapped: bool) -> None:
    assert swaps_one_value(new, old) is swapped


@pytest.mark.parametrize(
    ("new", "old", "several"),
    [
        ("用户去过泰国", "用户去过日本", True),
        ("用户养了一只狗", "用户养了一只猫", True),
        ("User speaks German", "User speaks French", True),
        # Now, instead or an end: another value in the older's place is possible.
        ("用户现在养了一只狗", "用户养了一只猫", False),
        ("User now speaks German at work instead", "User speaks French at work", False),
        ("用户不再养猫了", "用户养了一只猫", False),
        # No relation of that kind, or not the same one.
        ("用户住在北京", "用户住在上海", False),
        ("用户养了一只狗", "用户喜欢猫", False),
    ],
)
def test_a_relation_held_for_several_values(new: str, old: str, several: bool) -> None:
    assert holds_several(new, old) is several
