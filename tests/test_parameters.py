"""One configuration form: AgentScope's built-in keywords plus ``Mem0Middleware.Parameters``.

The model's schema is what the agent service renders as a form. Every option
of this package has one name, a field of the model, taken the same way by the
constructor, ``.local()`` and the service factory; release 0.2/0.3's
spellings fail with a ``TypeError`` naming the new one.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any, get_args

import pytest

from agentscope_mem0 import (
    ConfigurationError,
    Mem0Middleware,
    Mem0MiddlewareKeywords,
    SqliteWorkingStore,
    ToolName,
    WorkingMemory,
)
from agentscope_mem0._tools.choose import TOOL_NAMES
from agentscope_mem0.service import mem0_middleware_factory
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
from fakes import RecordingClient

Parameters = Mem0Middleware.Parameters

BUILTIN = (
    "user_id",
    "client",
    "chat_model",
    "embedding_model",
    "mem0_config",
    "mode",
    "agent_id",
    "top_k",
    "threshold",
    "scope_search_by_agent",
    "await_write",
    "memory_section_header",
    "memory_section_intro",
    "tool_instructions",
)


# -- the model --------------------------------------------------------------------


def test_the_schema_names_and_explains_every_field() -> None:
    schema = Parameters.model_json_schema()
    assert schema["additionalProperties"] is False
    fields = schema["properties"]
    assert set(fields) >= {"recall", "search_timeout", "outbox", "judge", "tools", "working_memory"}
    for name, field in fields.items():
        assert field["title"] and len(field["description"]) > 20, name
    assert fields["recall"]["enum"] == ["query", "profile", "full"]
    assert fields["tools"]["items"]["enum"] == list(get_args(ToolName))
    assert {"type": "null"} in fields["working_memory"]["anyOf"]
    json.dumps(schema)  # a form renderer gets plain JSON


def test_every_option_has_one_name_in_one_place() -> None:
    init = inspect.signature(Mem0Middleware.__init__).parameters
    # AgentScope's built-in keywords are the constructor's, never fields of the model.
    assert tuple(init)[1 : len(BUILTIN) + 1] == BUILTIN
    assert not set(BUILTIN) & set(Parameters.model_fields)
    assert not set(Parameters.model_fields) & set(init)
    # The constructor: no **kwargs, at most 20 named parameters.
    assert all(p.kind is p.KEYWORD_ONLY for name, p in init.items() if name != "self")
    assert len(init) - 1 <= 20
    # .local() and the factory take the constructor's keywords by these names and types.
    shared = Mem0MiddlewareKeywords.__annotations__
    assert set(shared) <= set(init)
    for name, annotation in shared.items():
        assert init[name].annotation == annotation.__forward_arg__, name
    # Every tool name the model accepts is one the middleware can build.
    assert set(get_args(ToolName)) == set(TOOL_NAMES)


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"search_timeout": 0}, "search_timeout"),
        ({"breaker_threshold": 0}, "breaker_threshold"),
        ({"breaker_threshold": True}, "breaker_threshold"),
        ({"recall": "everything"}, "recall"),
        ({"max_memory_tokens": 0}, "max_memory_tokens"),
        ({"query_context_turns": -1}, "query_context_turns"),
        ({"profile_ttl": -1}, "profile_ttl"),
        ({"extraction": "short"}, "extraction"),
        ({"outbox": "  "}, "outbox"),
        ({"tools": ("search_memory", "delete_everything")}, "tools"),
        ({"tools": "forget_memory"}, "tools"),
        ({"tools": ()}, "static_control"),
        ({"working_memory": "team"}, "working_memory"),
    ],
)
def test_bad_values_raise_a_configuration_error_naming_the_field(
    fields: dict[str, Any], named: str
) -> None:
    with pytest.raises(ConfigurationError, match=named) as info:
        Parameters(**fields)
    assert "Mem0Middleware.Parameters" in str(info.value)


def test_unknown_fields_are_type_errors() -> None:
    with pytest.raises(TypeError, match="no field 'colour'"):
        Parameters(colour="red")  # type: ignore[call-arg]


def test_a_form_round_trips_through_json() -> None:
    chosen = Parameters(recall="full", search_timeout=0.5, tools=("search_memory",))
    assert Parameters.model_validate_json(chosen.model_dump_json()) == chosen
    working = Parameters(working_memory="user")
    assert working.working_memory == WorkingMemory(scope="user")
    assert working.model_dump()["working_memory"] == "user"
    assert Parameters.model_validate_json(working.model_dump_json()) == working
    assert Parameters(tools=("add_memory", "add_memory")).tools == ("add_memory",)


# -- the constructor, .local() and the factory --------------------------------------


async def test_the_constructor_uses_the_model(memory: Any) -> None:
    chosen = Parameters(recall="full", search_timeout=0.5, max_memory_tokens=300, judge=False)
    async with Mem0Middleware(
        user_id="alice",
        client=memory,
        mode="static_control",
        top_k=3,
        scope_search_by_agent=False,
        parameters=chosen,
    ) as mw:
        assert mw.parameters is chosen and mw.mode == "static_control"
        assert mw.client_state.judge.model is None  # judge=False: no time judgement
        assert await mw.list_tools() == []  # static_control offers no tools
    async with Mem0Middleware(user_id="alice", client=memory) as mw:
        assert mw.parameters == Parameters()
        assert mw.client_state.judge.model is not None  # the default judges with the client's

    # The same from a form's JSON.
    from_form = Parameters.model_validate_json('{"tools": ["search_memory"], "recall": "profile"}')
    async with Mem0Middleware(
        user_id="alice", client=RecordingClient(None), mode="agent_control", parameters=from_form
    ) as mw:
        assert [t.name for t in await mw.list_tools()] == ["search_memory"]


async def test_working_memory_is_a_field_and_its_store_an_object(tmp_path: Path) -> None:
    async with Mem0Middleware(
        user_id="alice",
        client=RecordingClient(None),
        parameters=Parameters(working_memory="user"),
    ) as mw:
        assert "update_working_memory" in {t.name for t in await mw.list_tools()}
    store = SqliteWorkingStore(tmp_path / "elsewhere")
    mw = Mem0Middleware(
        user_id="alice",
        client=RecordingClient(None),
        parameters=Parameters(working_memory=WorkingMemory(scope="user", max_tokens=200)),
        working_store=store,
    )
    assert mw._working is not None and mw._working.store is store
    store.close()
    with pytest.raises(ConfigurationError, match="working_memory"):
        Mem0Middleware(user_id="alice", client=RecordingClient(None), working_store=store)


def test_parameters_must_be_the_model() -> None:
    with pytest.raises(TypeError, match=r"Mem0Middleware\.Parameters"):
        Mem0Middleware(user_id="alice", client=RecordingClient(None), parameters={"top_k": 3})  # type: ignore[arg-type]


def test_a_judge_model_with_the_judge_off_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="judge_model"):
        Mem0Middleware(
            user_id="alice",
            client=RecordingClient(None),
            judge_model=ScriptedChatModel(),
            parameters=Parameters(judge=False),
        )


async def test_local_keeps_the_outbox_in_its_folder_unless_told(tmp_path: Path) -> None:
    def local(**keywords: Any) -> Mem0Middleware:
        return Mem0Middleware.local(
            user_id="alice",
            chat_model=ScriptedChatModel(),
            embedding_model=HashEmbedding(),
            folder=tmp_path / "data",
            **keywords,
        )

    async with local() as mw:
        assert mw.parameters.outbox == mw.folder
        assert mw.client_state.writer.outbox.path.parent == mw.folder
    async with local(parameters=Parameters(outbox=tmp_path / "elsewhere")) as mw:
        assert mw.client_state.writer.outbox.path.parent == tmp_path / "elsewhere"
    with pytest.raises(TypeError, match="colour"):
        local(colour="red")


async def test_the_service_factory_takes_the_same_keywords() -> None:
    factory = mem0_middleware_factory(
        client=RecordingClient(None),
        mode="static_control",
        top_k=2,
        parameters=Parameters(profile_ttl=5.0, breaker_threshold=2),
    )
    [middleware] = await factory("alice", "assistant", "session-1")
    assert isinstance(middleware, Mem0Middleware)
    assert middleware.mode == "static_control" and middleware._top_k == 2
    assert middleware.parameters.profile_ttl == 5.0
    # The state every middleware of the factory shares uses them as well.
    assert middleware.client_state.profile_recall.ttl == 5.0
    assert middleware.client_state.breaker.stats()["breaker_state"] == "closed"
    await factory.aclose()
    with pytest.raises(TypeError, match="colour"):
        mem0_middleware_factory(client=RecordingClient(None), colour="red")  # type: ignore[call-arg]
    with pytest.raises(ConfigurationError, match="top_k"):
        mem0_middleware_factory(client=RecordingClient(None), top_k=0)


# -- release 0.2/0.3's spellings -----------------------------------------------------

# Each old keyword of Mem0Middleware, .local() and the factory -> the new spelling.
MOVED = {
    "query_context_turns": (1, "Parameters(query_context_turns=1)"),
    "profile_ttl": (5.0, "Parameters(profile_ttl=5.0)"),
    "include_superseded": (True, "Parameters(include_superseded=True)"),
    "max_memory_tokens": (300, "Parameters(max_memory_tokens=300)"),
    "memory_section_rules": ("Read.", "Parameters(memory_section_rules='Read.')"),
    "accumulate_notes": (True, "Parameters(accumulate_notes=True)"),
    "outbox_dir": ("/tmp/o", "Parameters(outbox='/tmp/o')"),
    "extraction": ("compact", "Parameters(extraction='compact')"),
    "search_timeout": (1.0, "Parameters(search_timeout=1.0)"),
    "tool_timeout": (9.0, "Parameters(tool_timeout=9.0)"),
    "breaker_threshold": (2, "Parameters(breaker_threshold=2)"),
    "breaker_cooldown": (60, "Parameters(breaker_cooldown=60)"),
    "recall": ("full", "Parameters(recall='full')"),
    "tools": (("search_memory",), "Parameters(tools=('search_memory',))"),
    "judge": (False, "Parameters(judge=False)"),
    "working_memory": ("user", "Parameters(working_memory='user')"),
}


class _Group:
    """Stands in for release 0.3's group objects (their classes are gone)."""


GROUPS = {
    "recall": "include_superseded",
    "note": "accumulate_notes (was accumulate)",
    "writes": "outbox (was outbox_dir)",
    "deadlines": "breaker_cooldown",
}


def _three_ways() -> list[Any]:
    """Mem0Middleware, .local() and the factory, each taking ``**keywords``."""
    return [
        lambda **k: Mem0Middleware(user_id="u", client=RecordingClient(None), **k),
        lambda **k: Mem0Middleware.local(user_id="u", chat_model=ScriptedChatModel(), **k),
        lambda **k: mem0_middleware_factory(client=RecordingClient(None), **k),
    ]


@pytest.mark.parametrize("name", sorted(MOVED))
def test_each_old_keyword_names_its_new_spelling(name: str) -> None:
    value, spelling = MOVED[name]
    for build in _three_ways():
        with pytest.raises(TypeError) as info:
            build(**{name: value})
        assert f"parameters=Mem0Middleware.{spelling}" in str(info.value), name
    # ... and the spelling it names works.
    field = spelling.removeprefix("Parameters(").partition("=")[0]
    assert getattr(Parameters(**{field: value}), field) is not None


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_each_old_group_names_the_fields_that_hold_it(group: str) -> None:
    for build in _three_ways():
        with pytest.raises(TypeError, match=r"Mem0Middleware\.Parameters") as info:
            build(**{group: _Group()})
        assert GROUPS[group] in str(info.value)


def test_the_other_old_keywords_name_their_new_spelling() -> None:
    for build in _three_ways():
        with pytest.raises(TypeError, match=r"judge_model="):
            build(judge=ScriptedChatModel())
        with pytest.raises(TypeError, match="client_state"):
            build(write_queue=object())


@pytest.mark.parametrize(
    "name", ["mode", "top_k", "threshold", "scope_search_by_agent", "await_write"]
)
def test_a_built_in_keyword_inside_the_model_names_its_place(name: str) -> None:
    with pytest.raises(TypeError, match=rf"Mem0Middleware\({name}="):
        Parameters(**{name: None})
    with pytest.raises(TypeError, match=rf"Mem0Middleware\({name}="):
        Parameters.model_validate_json(json.dumps({name: None}))


def test_a_working_memory_store_is_an_object_of_the_constructor() -> None:
    with pytest.raises(TypeError, match=r"Mem0Middleware\(working_store="):
        WorkingMemory(store=object())  # type: ignore[call-arg]
