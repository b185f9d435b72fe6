"""The command on hosted mem0, against the faithful platform fake of test_hosted.

mem0's real ``AsyncMemoryClient`` runs unchanged; its HTTP goes to
:class:`test_hosted.FakePlatform`, which files a user's messages in the user's
space (``agent_id`` null) and answers a filter naming both ids with nothing,
as the platform documents.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from test_cli import _offline_models, run, run_json  # noqa: F401  (autouse fixture)
from test_hosted import KEY, FakePlatform, platform  # noqa: F401  (fixture)


@pytest.fixture
def config(tmp_path: Path, platform: FakePlatform, monkeypatch: pytest.MonkeyPatch) -> Path:  # noqa: F811
    """A config file naming hosted mem0, whose client talks to the fake."""
    import mem0

    real = mem0.AsyncMemoryClient

    class RoutedClient(real):  # type: ignore[misc, valid-type]
        def __init__(self, api_key: str | None = None, host: str | None = None) -> None:
            transport = httpx.MockTransport(platform.handle)
            super().__init__(
                api_key=api_key, host=host, client=httpx.AsyncClient(transport=transport)
            )

    monkeypatch.setattr(mem0, "AsyncMemoryClient", RoutedClient)
    monkeypatch.setenv("MEM0_API_KEY", KEY)
    path = tmp_path / "hosted.toml"
    path.write_text('backend = "hosted"\nurl = "https://api.mem0.test"\n', encoding="utf-8")
    return path


def _searched_filters(platform: FakePlatform) -> list[Any]:  # noqa: F811
    return [s.body["filters"] for s in platform.named("/v3/memories/search/")]


def test_search_with_agent_returns_the_agents_memories(
    config: Path,
    platform: FakePlatform,  # noqa: F811
) -> None:
    where = ("--config", str(config))
    stored = run_json(
        "add", "--user", "alice", "--agent", "barista", "--raw", "I like oolong tea.", *where
    )
    assert stored["stored"][0]["status"] == "PENDING"  # the platform queues adds
    run_json("add", "--user", "bob", "--agent", "barista", "--raw", "I like black coffee.", *where)
    # The add named both ids; the platform filed the user's message under alice alone.
    (record,) = [r for r in platform.records if r.user_id == "alice"]
    assert record.agent_id is None

    hits = run_json("search", "--user", "alice", "--agent", "barista", "oolong tea", *where)
    assert [h["text"] for h in hits] == ["I like oolong tea."]
    # The filter sent selects alice's space on the platform's rules (both ids: nothing).
    assert _searched_filters(platform)[-1] == {"user_id": "alice"}

    table = run("search", "--user", "alice", "--agent", "barista", "oolong tea", *where)
    assert table.exit_code == 0 and "I like oolong tea." in table.stdout
    assert "does not narrow" in table.stderr  # says what --agent means here

    listed = run_json("list", "--user", "alice", "--agent", "barista", *where)
    assert [m["text"] for m in listed] == ["I like oolong tea."]
    assert "coffee" not in json.dumps(listed)

    report = run_json("forget", "--user", "alice", "--agent", "barista", "--all", "--yes", *where)
    assert (report["removed"], report["remaining"]) == (1, 0)
    assert [r.memory for r in platform.records] == ["I like black coffee."]
