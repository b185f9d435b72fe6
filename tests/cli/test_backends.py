"""The command's configuration: config files, server backends, hosted mem0.

pgvector runs on a real PostgreSQL when one is available (see
``tests/_pgfixture.py``); hosted mem0 is a fake with the platform client's
methods, since the platform needs a network and a key.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from click.testing import CliRunner

from agentscope_mem0.cli import cli
from command_line import add_raw, run, run_json


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_a_toml_config_names_the_folder_relative_to_itself(tmp_path: Path) -> None:
    config = _write(tmp_path / "mem.toml", 'backend = "embedded"\nfolder = "store"\n')
    memory_id = add_raw("u", "x", "--config", str(config))
    listed = run_json("list", "--folder", str(tmp_path / "store"), "--user", "u")
    assert [m["id"] for m in listed] == [memory_id]

    report = run_json("status", "--config", str(config))
    assert report["settings"]["folder"] == str(tmp_path / "store")
    assert report["settings"]["config_file"] == str(config)
    assert report["sources"]["folder"] == f"config file {config}"
    assert report["backend"]["memories"] == 1


def test_config_from_the_environment_and_what_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("from-file", "from-env", "from-flag"):
        (tmp_path / name).mkdir()
    config = _write(tmp_path / "mem.json", json.dumps({"folder": str(tmp_path / "from-file")}))
    monkeypatch.setenv("AGENTSCOPE_MEM0_CONFIG", str(config))
    monkeypatch.setenv("AGENTSCOPE_MEM0_DIR", str(tmp_path / "from-env"))
    report = run_json("status")
    assert report["settings"]["folder"] == str(tmp_path / "from-file")
    assert report["sources"]["config_file"] == "$AGENTSCOPE_MEM0_CONFIG"
    flagged = run_json("status", "--folder", str(tmp_path / "from-flag"))
    assert flagged["settings"]["folder"] == str(tmp_path / "from-flag")
    assert flagged["sources"]["folder"] == "--folder"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('backend = "redis"\n', "unknown backend 'redis'"),
        ('backend = "embedded"\ndsn = "x"\n', "'dsn'"),
        ('colour = "red"\n', "'colour'"),
        ('backend = "pgvector"\n', "needs 'dsn'"),
        ('backend = "pgvector"\ndsn_env = "NO_SUCH_VARIABLE_X"\n', "$NO_SUCH_VARIABLE_X"),
        ('backend = "qdrant"\n', "needs 'url'"),
        ('backend = "qdrant"\nhost = "h"\nport = "6333"\n', "'port'"),
        ("backend = [", "not valid"),
        ('backend = "hosted"\napi_key_env = "NO_SUCH_KEY_X"\n', "$NO_SUCH_KEY_X"),
        ('embedding_model = "no_such_module_x:thing"\n', "cannot load embedding model"),
        ('embedding_model = "bogus"\n', "'module:attribute'"),
    ],
)
def test_config_mistakes_are_usage_errors(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "data").mkdir()  # the data folder exists: the mistake is the config's
    config = _write(tmp_path / "bad.toml", text)
    result = run("list", "--config", str(config), "--user", "u")
    assert result.exit_code == 2, result.output
    assert message in result.stderr


def test_a_missing_config_file_is_a_usage_error(tmp_path: Path) -> None:
    result = run("status", "--config", str(tmp_path / "nope.toml"))
    assert result.exit_code == 2
    assert "cannot read the config file" in result.stderr


def test_a_config_that_is_not_a_small_text_file_is_refused(tmp_path: Path) -> None:
    """A device or a huge file is refused after 1 MiB, not read until memory runs out."""
    import resource
    import subprocess
    import sys

    def limit_memory() -> None:  # if it regressed, it fails instead of eating the machine
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    done = subprocess.run(
        [sys.executable, "-m", "agentscope_mem0.cli", "status", "--config", "/dev/zero"],
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=limit_memory,
    )
    assert done.returncode == 2, done.stderr
    assert "larger than 1 MiB" in done.stderr

    huge = tmp_path / "huge.toml"
    huge.write_text("# a comment\n" * 200_000, encoding="utf-8")
    result = run("status", "--config", str(huge))
    assert result.exit_code == 2 and "larger than 1 MiB" in result.stderr
    binary = _write(tmp_path / "binary.toml", "")
    binary.write_bytes(b"backend = '\xff'\n")
    result = run("status", "--config", str(binary))
    assert result.exit_code == 2 and "not UTF-8" in result.stderr


def test_embedding_model_from_a_module_attribute(tmp_path: Path) -> None:
    config = _write(tmp_path / "m.toml", 'embedding_model = "command_line:make_embedder"\n')
    add_raw("u", "x", "--config", str(config))
    report = run_json("status", "--config", str(config))
    assert report["vectors"]["store"] == report["vectors"]["embedder"] == 96


@pytest.mark.parametrize(
    "text",
    [
        'backend = "qdrant"\nurl = "http://127.0.0.1:1"\n',
        'backend = "pgvector"\ndsn = "postgresql://u:secret@127.0.0.1:1/db"\n',
    ],
)
def test_an_unreachable_server_exits_3(tmp_path: Path, text: str) -> None:
    pytest.importorskip("psycopg")
    config = _write(tmp_path / "server.toml", text)
    result = run("list", "--config", str(config), "--user", "u")
    assert result.exit_code == 3, result.output
    assert "unreachable" in result.stderr
    assert "secret" not in result.output

    status = run("status", "--config", str(config))
    assert status.exit_code == 3
    assert "reachable: NO" in status.stdout
    assert "secret" not in status.stdout


# -- hosted mem0 ---------------------------------------------------------------


class FakePlatform:
    """Stands in for ``mem0.AsyncMemoryClient``; memories outlive instances."""

    memories: ClassVar[dict[str, dict[str, Any]]] = {}
    keys: ClassVar[list[str]] = []

    def __init__(self, api_key: str | None = None, host: str | None = None) -> None:
        self.keys.append(str(api_key))

    @staticmethod
    def _matches(item: dict[str, Any], filters: dict[str, Any]) -> bool:
        return all(item.get(k) == v for k, v in filters.items())

    async def add(self, messages: list[dict[str, str]], **kwargs: Any) -> dict[str, Any]:
        results = []
        for message in messages:
            memory_id = str(uuid.uuid4())
            item = {
                "id": memory_id,
                "memory": message["content"],
                "user_id": kwargs.get("user_id"),
                "agent_id": kwargs.get("agent_id"),
                "created_at": "2025-01-01T00:00:00+00:00",
                "updated_at": "2025-01-01T00:00:00+00:00",
                "metadata": {"source": "fake"},
            }
            self.memories[memory_id] = item
            results.append({"id": memory_id, "memory": message["content"], "event": "ADD"})
        return {"results": results}

    async def get(self, memory_id: str) -> dict[str, Any]:
        from mem0.exceptions import MemoryNotFoundError

        if memory_id not in self.memories:
            raise MemoryNotFoundError("Memory not found", "MEM_404")
        return dict(self.memories[memory_id])

    async def get_all(self, filters: dict[str, Any], page: int = 1, page_size: int = 100) -> Any:
        items = [m for m in self.memories.values() if self._matches(m, filters)]
        chunk = items[(page - 1) * page_size : page * page_size]
        more = page * page_size < len(items)
        return {"count": len(items), "next": "more" if more else None, "results": chunk}

    async def search(self, query: str, filters: dict[str, Any], top_k: int = 5) -> Any:
        items = [m for m in self.memories.values() if self._matches(m, filters)]
        scored = [{**m, "score": 0.9 if query in m["memory"] else 0.2} for m in items]
        return {"results": sorted(scored, key=lambda m: -m["score"])[:top_k]}

    async def history(self, memory_id: str) -> list[dict[str, Any]]:
        item = self.memories.get(memory_id)
        return [{"event": "ADD", "new_memory": item["memory"]}] if item else []

    async def delete(self, memory_id: str) -> dict[str, str]:
        self.memories.pop(memory_id)
        return {"message": "deleted"}

    async def delete_all(self, **filters: Any) -> dict[str, str]:
        for memory_id in [k for k, m in self.memories.items() if self._matches(m, filters)]:
            del self.memories[memory_id]
        return {"message": "deleted"}


@pytest.fixture
def hosted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    import mem0

    FakePlatform.memories = {}
    FakePlatform.keys = []
    monkeypatch.setattr(mem0, "AsyncMemoryClient", FakePlatform)
    monkeypatch.setenv("MEM0_API_KEY", "m0-test-key")
    yield _write(tmp_path / "hosted.toml", 'backend = "hosted"\n')


def test_hosted_mem0_through_the_platform_api(hosted: Path, tmp_path: Path) -> None:
    config = ("--config", str(hosted))
    memory_id = add_raw("hana", "likes ramen", *config)
    add_raw("hana", "lives in Osaka", "--agent", "guide", *config)
    for page_filler in range(120):  # more than one page of get_all
        add_raw("ivan", f"fact {page_filler}", *config)
    assert FakePlatform.keys[-1] == "m0-test-key"

    listed = run_json("list", "--user", "hana", *config)
    assert {m["text"] for m in listed} == {"likes ramen", "lives in Osaka"}
    assert run_json("search", "--user", "hana", "ramen", *config)[0]["id"] == memory_id
    assert run_json("history", memory_id, *config)[0]["event"] == "ADD"

    exported = run("export", "--user", "ivan", *config)
    assert exported.exit_code == 0
    assert len(exported.stdout.splitlines()) == 120
    assert run("export", "--all-users", *config).exit_code == 2

    path = _write(tmp_path / "in.jsonl", exported.stdout)
    refused = run("import", str(path), *config)
    assert refused.exit_code == 2
    assert "not supported" in refused.stderr

    assert run_json("forget", memory_id, "--yes", *config)["removed"] == 1
    assert run("forget", memory_id, "--yes", *config).exit_code == 1
    report = run_json("forget", "--user", "ivan", "--all", "--yes", *config)
    assert (report["removed"], report["remaining"]) == (120, 0)

    status = run_json("status", *config)
    assert status["backend"]["reachable"] is True
    assert status["settings"]["api_key"] == "$MEM0_API_KEY (set)"
    assert "m0-test-key" not in json.dumps(status)


def test_hosted_without_a_key_is_a_usage_error(
    hosted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEM0_API_KEY")
    result = run("list", "--config", str(hosted), "--user", "u")
    assert result.exit_code == 2
    assert "$MEM0_API_KEY" in result.stderr


# -- pgvector -------------------------------------------------------------------


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    from _pgfixture import postgres_dsn

    with postgres_dsn() as dsn:
        yield dsn


def test_move_memories_from_the_embedded_folder_to_pgvector(pg_dsn: str, tmp_path: Path) -> None:
    from _pgfixture import fresh_collection
    from command_line import seed

    source = seed(tmp_path / "source", count=200)
    lines = run("export", "--all-users", "--folder", str(source)).stdout.splitlines()
    assert len(lines) == 200
    path = _write(tmp_path / "all.jsonl", "\n".join(lines) + "\n")

    config = _write(
        tmp_path / "pg.toml",
        f'backend = "pgvector"\ndsn = "{pg_dsn}"\ncollection = "{fresh_collection("cli")}"\n'
        f'history_db = "pg-history.db"\nfolder = "data"\n',
    )
    args = ("--config", str(config))
    assert run_json("import", str(path), *args) == {
        "read": 200,
        "stored": 200,
        "already_present": 0,
    }
    assert run_json("import", str(path), *args)["already_present"] == 200
    assert run("export", "--all-users", *args).stdout.splitlines() == lines

    status = run_json("status", *args)
    assert status["backend"]["reachable"] is True
    assert status["backend"]["memories"] == 200
    assert status["vectors"]["match"] is True

    first = json.loads(lines[0])
    hits = run_json("search", "--user", first["user_id"], first["text"], *args)
    assert hits[0]["id"] == first["id"]
    report = run_json("forget", "--user", "user2", "--all", "--yes", *args)
    assert (report["removed"], report["remaining"]) == (50, 0)
    assert len(run("export", "--all-users", *args).stdout.splitlines()) == 150

    other_size = CliRunner(env={"AGENTSCOPE_MEM0_EMBEDDER": "hash:64"}).invoke(
        cli, ["list", "--user", "user1", *args], catch_exceptions=False
    )
    assert other_size.exit_code == 2
    assert "64-dimensional" in other_size.stderr
