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

from command_line import run, run_json
from fakes import FakePlatform


def _searched_filters(platform: FakePlatform) -> list[Any]:
    return [s.body["filters"] for s in platform.named("/v3/memories/search/")]


def test_search_with_agent_returns_the_agents_memories(
    config: Path,
    platform: FakePlatform,
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
