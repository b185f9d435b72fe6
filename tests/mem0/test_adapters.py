"""AgentScopeLLM / AgentScopeEmbedding and build_mem0_config."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agentscope.message import TextBlock, ThinkingBlock, ToolCallBlock
from agentscope.model import ChatResponse
from mem0.configs.base import MemoryConfig
from mem0.utils.factory import EmbedderFactory, LlmFactory
from pydantic import ValidationError

from agentscope_mem0 import (
    AgentScopeEmbedding,
    AgentScopeLLM,
    ConfigurationError,
    DimensionMismatchError,
    Mem0Middleware,
    ModelTypeError,
    build_local_memory,
    build_mem0_config,
    build_memory,
)
from agentscope_mem0._mem0.adapters import flatten_response, to_agentscope_messages
from agentscope_mem0._mem0.clients import close_memory
from agentscope_mem0._text.exchange import users_words
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel


def test_messages_convert_by_role_and_drop_others() -> None:
    msgs = to_agentscope_messages(
        [
            {"role": "system", "content": "rules"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "tool", "content": "ignored"},
        ]
    )
    assert [(m.role, m.get_text_content()) for m in msgs] == [
        ("system", "rules"),
        ("user", "hi"),
        ("assistant", "hello"),
    ]


def test_generate_response_returns_text_and_sees_the_prompt() -> None:
    seen: list[Any] = []

    def reply(messages: Any, tools: Any) -> str:
        seen.append(messages)
        return '{"memory": []}'

    llm = AgentScopeLLM({"model": ScriptedChatModel(reply, extractor=None)})
    out = llm.generate_response(
        [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    )
    assert out == '{"memory": []}'
    assert [m.role for m in seen[0]] == ["system", "user"]


def test_streaming_model_is_drained_to_the_final_chunk() -> None:
    model = ScriptedChatModel("the whole answer", extractor=None, stream=True)
    llm = AgentScopeLLM({"model": model})
    assert llm.generate_response([{"role": "user", "content": "q"}]) == "the whole answer"


def test_tools_give_content_and_parsed_tool_calls() -> None:
    response = ChatResponse(
        content=[
            ThinkingBlock(thinking="secret plan"),
            TextBlock(text="calling"),
            ToolCallBlock(id="1", name="f", input='{"a": 1}'),
            ToolCallBlock(id="2", name="g", input="not json"),
        ],
        is_last=True,
    )
    out = flatten_response(response, with_tools=True)
    assert out == {
        "content": "calling",
        "tool_calls": [
            {"name": "f", "arguments": {"a": 1}},
            {"name": "g", "arguments": "not json"},
        ],
    }
    assert flatten_response(response, with_tools=False) == "calling"


def test_thinking_never_reaches_the_json_mem0_parses() -> None:
    response = ChatResponse(
        content=[ThinkingBlock(thinking="{not json"), TextBlock(text='{"memory": []}')],
        is_last=True,
    )
    llm = AgentScopeLLM({"model": ScriptedChatModel(lambda m, t: response, extractor=None)})
    assert llm.generate_response([{"role": "user", "content": "x"}]) == '{"memory": []}'


def test_no_usable_messages_is_an_error() -> None:
    llm = AgentScopeLLM({"model": ScriptedChatModel()})
    with pytest.raises(ValueError):
        llm.generate_response([{"role": "tool", "content": "x"}])


def _refused_as_both(build: Callable[[], Any], match: str) -> None:
    # A TypeError as AgentScope's built-in raises, and this package's usage error.
    with pytest.raises(TypeError, match=match) as caught:
        build()
    assert isinstance(caught.value, ModelTypeError)
    assert isinstance(caught.value, ConfigurationError)


def test_wrong_model_types_are_both_type_and_configuration_errors(tmp_path: Any) -> None:
    chat, embedding = ScriptedChatModel(), HashEmbedding()
    _refused_as_both(lambda: AgentScopeLLM({"model": "gpt-4o"}), "ChatModelBase")
    _refused_as_both(lambda: AgentScopeEmbedding({"model": chat}), "EmbeddingModelBase")
    _refused_as_both(
        lambda: build_mem0_config(chat_model=embedding, embedding_model=embedding),
        "ChatModelBase",
    )
    _refused_as_both(
        lambda: Mem0Middleware(user_id="u", chat_model=chat, embedding_model=chat),
        "EmbeddingModelBase",
    )
    _refused_as_both(lambda: build_local_memory(embedding, folder=tmp_path), "ChatModelBase")
    # no model at all: a ValueError, as in the built-in
    with pytest.raises(ValueError, match="ChatModelBase"):
        AgentScopeLLM({})


def test_wrong_arguments_say_what_to_pass_in_the_users_words(tmp_path: Any) -> None:
    """A model name, a model class, or a mem0 class is named as such, with what to
    pass instead; no internal name (build_local_memory, ABCMeta, "got type")."""
    import mem0
    from agentscope.embedding import DashScopeEmbeddingModel
    from agentscope.model import DashScopeChatModel

    from agentscope_mem0.service import mem0_middleware_factory

    chat = ScriptedChatModel()

    def message(build: Callable[[], Any]) -> str:
        with pytest.raises(TypeError) as caught:
            build()
        assert isinstance(caught.value, ModelTypeError)
        text = str(caught.value)
        for internal in ("build_local_memory", "ABCMeta", "got type", "got str"):
            assert internal not in text, text
        return text

    named = message(lambda: Mem0Middleware.local(user_id="u", chat_model="qwen-plus"))
    assert "'qwen-plus'" in named and "a model name" in named
    assert "DashScopeChatModel(" in named
    named = message(lambda: mem0_middleware_factory(chat_model="qwen-plus"))
    assert "'qwen-plus'" in named and "a model name" in named
    named = message(
        lambda: Mem0Middleware.local(
            user_id="u", chat_model=chat, embedding_model="text-embedding-v4", folder=tmp_path
        )
    )
    assert "'text-embedding-v4'" in named and "DashScopeEmbeddingModel(" in named

    cls = message(lambda: Mem0Middleware.local(user_id="u", chat_model=DashScopeChatModel))
    assert "the class DashScopeChatModel" in cls and "DashScopeChatModel(...)" in cls
    cls = message(
        lambda: Mem0Middleware(
            user_id="u", chat_model=chat, embedding_model=DashScopeEmbeddingModel
        )
    )
    assert "the class DashScopeEmbeddingModel" in cls

    sync = message(lambda: Mem0Middleware(user_id="u", client=mem0.Memory))
    assert "the class mem0.Memory" in sync and "synchronous" in sync
    assert "mem0.AsyncMemory(" in sync
    sync = message(lambda: mem0_middleware_factory(client=mem0.Memory))
    assert "the class mem0.Memory" in sync
    # The async class itself, not a client built from it, was accepted before.
    unbuilt = message(lambda: Mem0Middleware(user_id="u", client=mem0.AsyncMemory))
    assert "the class mem0.AsyncMemory" in unbuilt and "mem0.AsyncMemory(" in unbuilt
    other = message(lambda: Mem0Middleware(user_id="u", client="mem0"))
    assert "'mem0'" in other and "mem0.AsyncMemory" in other


def test_embedding_single_and_batch() -> None:
    model = HashEmbedding(dimensions=32)
    emb = AgentScopeEmbedding({"model": model})
    one = emb.embed("dark mode", "search")
    assert len(one) == 32
    assert emb.embed_batch(["dark mode", "Hangzhou"]) == [one, model.vector("Hangzhou")]
    assert emb.embed_batch([]) == []


def test_build_registers_provider_and_creates_adapters(tmp_path: Any) -> None:
    model, embedding = ScriptedChatModel(), HashEmbedding(dimensions=64)
    config = build_mem0_config(chat_model=model, embedding_model=embedding)
    assert config.llm.provider == config.embedder.provider == "agentscope"
    llm = LlmFactory.create(config.llm.provider, config.llm.config)
    assert isinstance(llm, AgentScopeLLM) and llm.model is model
    emb = EmbedderFactory.create(config.embedder.provider, config.embedder.config, None)
    assert isinstance(emb, AgentScopeEmbedding) and emb.model is embedding
    # the embedded default is sized to the embedder and lives in the data folder
    assert config.vector_store.config.embedding_model_dims == 64
    assert config.vector_store.config.path.startswith(str(tmp_path))
    assert config.history_db_path.startswith(str(tmp_path))


def test_given_config_keeps_everything_but_the_two_slots(store_config: dict[str, Any]) -> None:
    base = MemoryConfig(**store_config, custom_instructions="Only food preferences.")
    config = build_mem0_config(
        chat_model=ScriptedChatModel(), embedding_model=HashEmbedding(), mem0_config=base
    )
    assert config.vector_store.config.path == store_config["vector_store"]["config"]["path"]
    assert config.history_db_path == store_config["history_db_path"]
    assert config.custom_instructions == "Only food preferences."
    assert config.llm.provider == "agentscope"
    assert base.llm.provider == "openai"  # the caller's object is not changed


def test_only_one_slot_is_replaced_when_one_model_is_given(store_config: dict[str, Any]) -> None:
    config = build_mem0_config(chat_model=ScriptedChatModel(), mem0_config=store_config)
    assert config.llm.provider == "agentscope"
    assert config.embedder.provider == "openai"


def test_whitelist_stays_closed(store_config: dict[str, Any]) -> None:
    build_mem0_config(
        chat_model=ScriptedChatModel(), embedding_model=HashEmbedding(), mem0_config=store_config
    )
    with pytest.raises(ValidationError, match="Unsupported LLM provider"):
        MemoryConfig(llm={"provider": "agentscope", "config": {}})
    with pytest.raises(ValidationError, match="Unsupported embedding provider"):
        MemoryConfig(embedder={"provider": "agentscope", "config": {}})
    from agentscope_mem0._mem0.adapters import agentscope_config_classes

    llm_cls, _ = agentscope_config_classes()
    with pytest.raises(ValidationError):
        llm_cls(provider="not-a-provider", config={})


def test_explicit_mismatched_dimensions_are_a_clear_error(store_config: dict[str, Any]) -> None:
    store_config["vector_store"]["config"]["embedding_model_dims"] = 1536
    with pytest.raises(DimensionMismatchError, match="embedding_model_dims=256"):
        build_mem0_config(
            chat_model=ScriptedChatModel(),
            embedding_model=HashEmbedding(dimensions=256),
            mem0_config=store_config,
        )


def test_unset_dimensions_follow_the_embedder(store_config: dict[str, Any]) -> None:
    config = build_mem0_config(
        chat_model=ScriptedChatModel(), embedding_model=HashEmbedding(96), mem0_config=store_config
    )
    assert config.vector_store.config.embedding_model_dims == 96


def test_bad_config_type_is_a_clear_error() -> None:
    with pytest.raises(ConfigurationError, match="MemoryConfig or a dict"):
        build_mem0_config(chat_model=ScriptedChatModel(), mem0_config="qdrant")  # type: ignore[arg-type]


def test_caller_config_is_not_mutated_and_history_stays_in_the_folder(
    tmp_path: Any, _data_dir: Any
) -> None:
    base = MemoryConfig(
        vector_store={"provider": "qdrant", "config": {"path": str(tmp_path / "q")}}
    )
    models = {"chat_model": ScriptedChatModel(), "embedding_model": HashEmbedding(48)}
    config = build_mem0_config(**models, mem0_config=base)
    assert config.vector_store.config.embedding_model_dims == 48
    assert config.history_db_path == base.history_db_path  # mem0's own default, kept
    assert base.vector_store.config.embedding_model_dims == 1536
    # the client the middleware builds keeps mem0's history in the data folder
    memory = build_memory(**models, mem0_config=base)
    assert memory.config.history_db_path == str(_data_dir / "history.db")
    assert (_data_dir / "history.db").is_file()
    assert base.vector_store.config.client is None and base.history_db_path != str(
        _data_dir / "history.db"
    )


def test_a_config_alone_passes_through_unchanged() -> None:
    base = MemoryConfig(history_db_path="/nowhere/history.db")
    assert build_mem0_config(mem0_config=base) is base
    assert base.history_db_path == "/nowhere/history.db"
    assert base.vector_store.config.client is None


def test_building_a_config_opens_nothing(tmp_path: Path, _data_dir: Path) -> None:
    qdrant = tmp_path / "qdrant"
    base = MemoryConfig(vector_store={"provider": "qdrant", "config": {"path": str(qdrant)}})
    chat, embedding = ScriptedChatModel(), HashEmbedding(48)
    configs = [
        build_mem0_config(chat_model=chat, embedding_model=embedding),
        build_mem0_config(chat_model=chat, embedding_model=embedding, mem0_config=base),
        build_mem0_config(mem0_config=MemoryConfig()),  # mem0's default: /tmp/qdrant
    ]
    assert not qdrant.exists() and not _data_dir.exists()
    assert all(c.vector_store.config.client is None for c in configs[1:])
    from agentscope_mem0.local import _edge, _qdrant_path

    assert _qdrant_path._clients == {} and _edge._shards == {}


@pytest.mark.parametrize(
    ("text", "looked_up"),
    [
        (
            "user: I live in Hangzhou.\nassistant: Hangzhou is lovely in spring.\n",
            "user: I live in Hangzhou.",
        ),
        # Joined turns, and a user message of several lines.
        (
            "user: I moved.\nNow in Beijing.\nassistant: Congrats!\nuser: And I got a dog.\n"
            "assistant: What breed?\n",
            "user: I moved.\nNow in Beijing.\nuser: And I got a dog.",
        ),
        ("system: today is Monday\nuser: I start a job.\n", "user: I start a job."),
        # Nothing to leave out, or no exchange at all: the text as it is.
        ("user: I live in Hangzhou.\n", "user: I live in Hangzhou.\n"),
        ("assistant: Hello!\n", "assistant: Hello!\n"),
        ("User lives in Hangzhou.", "User lives in Hangzhou."),
        ("what did I say about user: settings?", "what did I say about user: settings?"),
    ],
)
def test_a_writes_lookup_reads_what_the_user_said(text: str, looked_up: str) -> None:
    assert users_words(text) == looked_up


class _RecordingEmbedding(HashEmbedding):
    def __init__(self) -> None:
        super().__init__()
        self.searched: list[str] = []

    async def _call_api(self, inputs: list[Any], **kwargs: Any) -> Any:
        if kwargs.get("memory_action") == "search":
            self.searched.extend(str(t) for t in inputs)
        return await super()._call_api(inputs, **kwargs)


async def test_a_long_answer_is_not_embedded_to_look_up_a_writes_memories(
    tmp_path: Path,
) -> None:
    # mem0's add looks up the memories its exchange may touch; only the user's
    # words go to the embedder, not the assistant's long answer.
    embedder = _RecordingEmbedding()
    embedder.accepts_memory_action = True  # type: ignore[attr-defined]
    memory = build_local_memory(ScriptedChatModel(), embedding_model=embedder, folder=tmp_path)
    answer = "Hangzhou has a famous lake, " * 40
    try:
        await memory.add(
            [
                {"role": "user", "content": "I live in Hangzhou."},
                {"role": "assistant", "content": answer},
            ],
            user_id="alice",
        )
    finally:
        close_memory(memory)
    assert embedder.searched, "mem0's add looked up no memory"
    assert all("famous lake" not in text for text in embedder.searched)
    assert any("I live in Hangzhou." in text for text in embedder.searched)
