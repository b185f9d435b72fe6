"""Two replicas on one PostgreSQL, one history and one set of token totals.

Two processes, each with a data folder of its own (as two pods), write
through their own ``Mem0Middleware`` into one pgvector store; then the
command line, run as a user runs it from a third folder (a laptop) with a
config file naming that database, shows both processes' history and the
token totals of both added up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from _pgfixture import fresh_collection, postgres_dsn
from command_line import CLI_ENV

CHILD = Path(__file__).resolve().parents[1] / "_history_child.py"
SRC = Path(__file__).resolve().parents[2] / "src"
DIMS = 64


@pytest.fixture(scope="module")
def pg_dsn() -> Any:
    with postgres_dsn() as dsn:
        yield dsn


def _env(folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CLI_ENV}
    env.update({k: v for k, v in CLI_ENV.items() if v})
    env["AGENTSCOPE_MEM0_DIR"] = str(folder)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), *filter(None, [os.environ.get("PYTHONPATH")])])
    env.pop("AGENTSCOPE_MEM0_CONFIG", None)
    return env


def _cli(*args: str, folder: Path) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "agentscope_mem0.cli", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(folder),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def test_two_replicas_share_one_history_and_one_set_of_totals(pg_dsn: str, tmp_path: Path) -> None:
    collection = fresh_collection("rep")
    replicas = []
    for name, user, text in (
        ("a", "alice", "I live in Hangzhou."),
        ("b", "bob", "I like black coffee."),
    ):
        job = {"dsn": pg_dsn, "collection": collection, "dims": DIMS, "user": user}
        job["texts"] = [text]
        replicas.append(
            subprocess.Popen(
                [sys.executable, str(CHILD), json.dumps(job)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=_env(tmp_path / f"pod-{name}"),
            )
        )
    reports = []
    for replica in replicas:  # both run at once, as two pods
        out, err = replica.communicate(timeout=240)
        assert replica.returncode == 0, err
        reports.append(json.loads(out.strip().splitlines()[-1]))
    (alice_fact, alice_id), (bob_fact, bob_id) = (next(iter(r["ids"].items())) for r in reports)
    assert "Hangzhou" in alice_fact and "coffee" in bob_fact

    laptop = tmp_path / "laptop"
    config = tmp_path / "pg.toml"
    config.write_text(
        f'backend = "pgvector"\ndsn = "{pg_dsn}"\ncollection = "{collection}"\n'
        f'embedding_model = "hash:{DIMS}"\nchat_model = "offline"\n',
        encoding="utf-8",
    )
    for memory_id, fact in ((alice_id, alice_fact), (bob_id, bob_fact)):
        entries = _cli("history", memory_id, "--config", str(config), folder=laptop)
        assert [(e["event"], e["new_memory"]) for e in entries] == [("ADD", fact)]

    tokens = _cli("status", "--config", str(config), folder=laptop)["tokens"]
    assert "agentscope_mem0_usage" in tokens["kept_in"]
    mine = [r["tokens"] for r in reports]
    assert all(t["tokens_writes"] >= 1 for t in mine)
    for key in ("tokens_writes", "tokens_in_extraction", "tokens_out_extraction"):
        assert tokens[key] == sum(t[key] for t in mine), key
    # and no pod kept a history file of its own
    assert not list(tmp_path.rglob("history.db"))
