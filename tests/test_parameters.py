"""``Mem0Middleware.Parameters``: AgentScope's pydantic parameters convention.

The schema is what the agent service renders as a form; each field is a
constructor keyword of the same name and default, and the constructor (and
the service factory) take the model beside the flat keywords.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

import pytest
from pydantic import ValidationError

from agentscope_mem0 import ConfigurationError, Mem0Middleware
from agentscope_mem0.service import mem0_middleware_factory
from fakes import RecordingClient

Parameters = Mem0Middleware.Parameters


def test_the_schema_names_and_explains_every_field() -> None:
    schema = Parameters.model_json_schema()
    assert schema["additionalProperties"] is False
    fields = schema["properties"]
    assert set(fields) >= {
        "mode",
        "top_k",
        "threshold",
        "scope_search_by_agent",
        "recall",
        "judge",
        "working_memory",
    }
    for name, field in fields.items():
        assert field["title"] and len(field["description"]) > 20, name
    assert fields["mode"]["enum"] == ["static_control", "agent_control", "both"]
    assert fields["recall"]["enum"] == ["query", "profile", "full"]
    assert (fields["top_k"]["minimum"], fields["top_k"]["maximum"]) == (1, 100)
    assert {"type": "null"} in fields["working_memory"]["anyOf"]
    json.dumps(schema)  # a form renderer gets plain JSON


def test_each_field_is_a_constructor_keyword_with_the_same_default() -> None:
    init = inspect.signature(Mem0Middleware.__init__).parameters
    assert "parameters" in init
    for name, field in Parameters.model_fields.items():
        if name in init:
            assert field.default == init[name].default, name
        else:  # one of the flat option keywords, whose defaults live in the groups
            from agentscope_mem0._options import FLAT_KEYWORDS, collect_options

            assert name in FLAT_KEYWORDS, name
            defaults = collect_options()
            group = {
                "query_context_turns": defaults.recall.query_context_turns,
                "profile_ttl": defaults.recall.profile_ttl,
                "max_memory_tokens": defaults.note.max_memory_tokens,
                "search_timeout": defaults.deadlines.search_timeout,
                "extraction": defaults.writes.extraction,
            }
            assert field.default == group[name], name


def test_bad_values_are_refused_by_the_model() -> None:
    with pytest.raises(ValidationError):
        Parameters(mode="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        Parameters(top_k=0)
    with pytest.raises(ValidationError):
        Parameters(colour="red")  # type: ignore[call-arg]


async def test_the_constructor_takes_the_model_as_the_flat_keywords(memory: Any) -> None:
    chosen = Parameters(
        mode="static_control",
        top_k=3,
        recall="full",
        search_timeout=0.5,
        max_memory_tokens=300,
        scope_search_by_agent=False,
        judge=False,
    )
    async with Mem0Middleware(user_id="alice", client=memory, parameters=chosen) as mw:
        options = mw._options
        assert mw.mode == "static_control"
        assert (options.top_k, options.recall.mode, options.scope_search_by_agent) == (
            3,
            "full",
            False,
        )
        assert options.deadlines.search_timeout == 0.5
        assert options.note.max_memory_tokens == 300
        assert mw.client_state.judge is None  # judge=False: no time judgement
        assert await mw.list_tools() == []  # static_control offers no tools
    async with Mem0Middleware(user_id="alice", client=memory, parameters=Parameters()) as mw:
        assert mw.client_state.judge is not None  # the default judges, with the client's model

    # The same from a form's JSON.
    from_form = Parameters.model_validate_json('{"mode": "agent_control", "top_k": 7}')
    async with Mem0Middleware(
        user_id="alice", client=RecordingClient(None), parameters=from_form
    ) as mw:
        assert mw.mode == "agent_control" and mw._options.top_k == 7
        assert {t.name for t in await mw.list_tools()} == {"search_memory", "add_memory"}


async def test_working_memory_from_the_model() -> None:
    async with Mem0Middleware(
        user_id="alice",
        client=RecordingClient(None),
        parameters=Parameters(working_memory="user"),
    ) as mw:
        assert "update_working_memory" in {t.name for t in await mw.list_tools()}


def test_a_field_given_twice_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="top_k was given both"):
        Mem0Middleware(
            user_id="alice", client=RecordingClient(None), top_k=3, parameters=Parameters(top_k=4)
        )
    with pytest.raises(ConfigurationError, match="search_timeout was given both"):
        Mem0Middleware(
            user_id="alice",
            client=RecordingClient(None),
            search_timeout=1.0,
            parameters=Parameters(search_timeout=2.0),
        )
    with pytest.raises(TypeError, match=r"Mem0Middleware\.Parameters"):
        Mem0Middleware(user_id="alice", client=RecordingClient(None), parameters={"top_k": 3})
    # A keyword at its default and a field the model leaves unset do not clash.
    mw = Mem0Middleware(
        user_id="alice", client=RecordingClient(None), mode="both", parameters=Parameters(top_k=2)
    )
    assert mw._options.top_k == 2 and mw.mode == "both"


async def test_the_service_factory_takes_the_model_too() -> None:
    factory = mem0_middleware_factory(
        client=RecordingClient(None),
        parameters=Parameters(mode="static_control", profile_ttl=5.0, top_k=2),
    )
    [middleware] = await factory("alice", "assistant", "session-1")
    assert isinstance(middleware, Mem0Middleware)
    assert middleware.mode == "static_control" and middleware._options.top_k == 2
    # The state every middleware of the factory shares uses them as well.
    assert middleware.client_state.profiles.ttl == 5.0
    await factory.aclose()
    with pytest.raises(ConfigurationError, match="mode was given both"):
        mem0_middleware_factory(
            client=RecordingClient(None),
            mode="agent_control",
            parameters=Parameters(mode="static_control"),
        )
