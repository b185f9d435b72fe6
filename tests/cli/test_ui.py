"""The inspector without a browser: binding and token rules, CSRF refusals,
escaping, relations, the outbox; on a real embedded store in tmp_path.

Requests go through Starlette's TestClient to the real app (guard included);
the store is the CLI's own (real mem0, local Qdrant, HashEmbedding).
"""

from __future__ import annotations

import asyncio
import re
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from agentscope_mem0 import Outbox, Scope
from agentscope_mem0._write.outbox import OUTBOX_FILENAME, new_owner_id
from agentscope_mem0.cli import cli
from agentscope_mem0.cli._config import load_settings
from agentscope_mem0.cli._mem0_store import open_store
from agentscope_mem0.cli._records import MemoryRecord
from agentscope_mem0.cli.ui._web import create_app

BASE = "http://127.0.0.1:8765"
TOKEN = "s3cret-token-for-tests-0123"
PEER = ("127.0.0.1", 50000)
"""The client address of every request (Starlette's default, "testclient", is no address)."""


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTSCOPE_MEM0_EMBEDDER", "hash")
    monkeypatch.delenv("AGENTSCOPE_MEM0_CONFIG", raising=False)
    monkeypatch.delenv("AGENTSCOPE_MEM0_UI_TOKEN", raising=False)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Any]:
    settings = load_settings(folder=str(tmp_path / "data"), config_path=None)
    opened = open_store(settings, embeds=True)
    yield opened
    opened.close()


def add(store: Any, user: str, text: str, agent: str | None = None) -> str:
    (stored,) = asyncio.run(store.add(text, Scope(user, agent), infer=False))
    return str(stored["id"])


def client_for(store: Any, *, token: str | None = None) -> TestClient:
    app = create_app(store, token=token)
    return TestClient(app, base_url=BASE, follow_redirects=False, client=PEER)


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, "no CSRF field in the page"
    return found.group(1)


# -- binding and the access token ------------------------------------------------


def test_ui_refuses_a_public_address_without_a_token(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["ui", "--folder", str(tmp_path), "--host", "0.0.0.0"])
    assert result.exit_code == 2
    assert "without an access token" in result.output
    assert "--token" in result.output


def test_ui_refuses_a_short_token(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["ui", "--folder", str(tmp_path), "--host", "0.0.0.0", "--token", "abc"]
    )
    assert result.exit_code == 2
    assert "at least 16 characters" in result.output


def test_ui_names_the_process_holding_the_folder(tmp_path: Path) -> None:
    folder = tmp_path / "held"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import sys, time
                from agentscope_mem0.local import embedded_store_config
                embedded_store_config(dims=256, folder={str(folder)!r})
                print("ready", flush=True)
                time.sleep(60)
                """
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        result = CliRunner().invoke(cli, ["ui", "--folder", str(folder), "--port", "0"])
    finally:
        holder.kill()
        holder.wait()
    assert result.exit_code == 3, result.output
    assert f"is in use by pid {holder.pid}" in result.output
    assert "mount_inspector" in result.output  # how a service can serve it instead


def test_a_token_is_required_on_every_request(store: Any) -> None:
    add(store, "alice", "Alice drinks green tea.")
    client = client_for(store, token=TOKEN)
    assert client.get("/").status_code == 401
    assert client.get("/?user=alice").status_code == 401
    assert client.get("/?token=wrong-token-xxxxxxxxx").status_code == 401
    assert client.get("/", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200

    opened = client.get(f"/?user=alice&token={TOKEN}")
    assert opened.status_code == 303
    assert opened.headers["location"] == "/?user=alice"  # the token leaves the address bar
    assert "SameSite=Strict" in opened.headers["set-cookie"]
    page = client.get("/?user=alice")  # the cookie carries it now
    assert page.status_code == 200 and "Alice drinks green tea." in page.text
    client.cookies.clear()
    assert client.get("/?user=alice").status_code == 401


def test_a_valid_token_never_redirects_to_another_site(store: Any) -> None:
    client = client_for(store, token=TOKEN)
    for path in ("//evil.example/", "///evil.example/x", "/\\evil.example/", "//evil.example"):
        opened = client.get(f"{path}?token={TOKEN}")
        assert opened.status_code == 303
        location = opened.headers["location"]
        assert location.startswith("/") and not location.startswith(("//", "/\\")), location


def test_a_link_cannot_put_its_own_text_in_the_page(store: Any) -> None:
    add(store, "alice", "Alice drinks green tea.")
    client = client_for(store)
    fake = "Your session expired: sign in again at evil.example"
    for path in ("/", "/?user=alice", "/outbox"):
        page = client.get(path, params={"flash": fake}).text
        assert "evil.example" not in page and 'class="flash"' not in page
    # What an action did is still shown, once, on the page it leads to.
    memory_id = add(store, "alice", "Alice has a cat.")
    secret = csrf_of(client.get("/?user=alice").text)
    form = {"memory_id": memory_id, "user": "alice", "confirm": "yes", "csrf": secret}
    done = client.post("/forget", data=form)
    assert done.status_code == 303 and "cat" not in done.headers["location"]
    assert "Forgot: Alice has a cat." in client.get(done.headers["location"]).text
    assert "Forgot:" not in client.get(done.headers["location"]).text


def test_loopback_refuses_foreign_host_names(store: Any) -> None:
    client = client_for(store)
    assert client.get("/", headers={"Host": "attacker.example:8765"}).status_code == 421
    assert client.get("/", headers={"Host": "localhost:8765"}).status_code == 200
    # The peer decides, not the header: another machine naming localhost is refused.
    remote = TestClient(client.app, base_url=BASE, client=("203.0.113.5", 5000))
    assert remote.get("/", headers={"Host": "localhost:8765"}).status_code == 403


# -- CSRF ----------------------------------------------------------------------


def test_posts_without_the_csrf_token_are_refused(store: Any) -> None:
    memory_id = add(store, "alice", "Alice drinks green tea.")
    client = client_for(store)
    page = client.get("/?user=alice").text
    secret = csrf_of(page)
    form = {"memory_id": memory_id, "user": "alice", "confirm": "yes"}

    assert client.post("/forget", data=form).status_code == 403  # no token
    assert client.post("/forget", data={**form, "csrf": "guess"}).status_code == 403
    refused = client.post(
        "/forget", data={**form, "csrf": secret}, headers={"Origin": "https://evil.example"}
    )
    assert refused.status_code == 403 and "another site" in refused.text
    cross = client.post(
        "/forget", data={**form, "csrf": secret}, headers={"Sec-Fetch-Site": "cross-site"}
    )
    assert cross.status_code == 403
    no_cookie = TestClient(client.app, base_url=BASE, follow_redirects=False, client=PEER)
    assert no_cookie.post("/forget", data={**form, "csrf": secret}).status_code == 403
    assert client.post("/forget-user", data={"user": "alice", "confirm": "yes"}).status_code == 403
    assert client.post("/outbox-retry", data={}).status_code == 403
    assert asyncio.run(store.get(memory_id)) is not None  # nothing was forgotten

    asked = client.post("/forget", data={"memory_id": memory_id, "user": "alice", "csrf": secret})
    assert asked.status_code == 200 and "Yes, forget" in asked.text
    assert asyncio.run(store.get(memory_id)) is not None  # asking is not doing
    done = client.post("/forget", data={**form, "csrf": secret}, headers={"Origin": BASE})
    assert done.status_code == 303
    assert asyncio.run(store.get(memory_id)) is None


def test_reads_are_not_actions(store: Any) -> None:
    memory_id = add(store, "alice", "Alice drinks green tea.")
    client = client_for(store)
    assert client.get(f"/forget?memory_id={memory_id}&user=alice&confirm=yes").status_code == 405
    assert asyncio.run(store.get(memory_id)) is not None


# -- what the pages show ---------------------------------------------------------


def test_hostile_text_is_escaped_and_scripts_are_forbidden(store: Any) -> None:
    add(store, "mallory", '<script>alert("x")</script><img src=x onerror=alert(1)>')
    client = client_for(store)
    response = client.get("/?user=mallory")
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&lt;img" in response.text
    assert "<script" not in response.text and "<img" not in response.text
    assert "script-src" not in response.headers["content-security-policy"]  # default 'none'
    assert "default-src 'none'" in response.headers["content-security-policy"]
    found = client.get("/search", params={"user": "mallory", "q": "<script>"})
    assert "<script" not in found.text and "&lt;script&gt;" in found.text


def test_bad_ids_get_a_clear_400(store: Any) -> None:
    client = client_for(store)
    refused = client.get("/?user=*")
    assert refused.status_code == 400 and "wildcard" in refused.text
    assert client.get("/search", params={"user": "alice", "q": " "}).status_code == 400


def test_supersession_is_shown_both_ways(store: Any) -> None:
    old = MemoryRecord(
        id="0b6c3a52-1d2e-4f00-9a6b-000000000001",
        text="Alice lives in Berlin.",
        user_id="alice",
        created_at="2026-01-05T10:00:00+00:00",
        metadata={
            "superseded_by": "0b6c3a52-1d2e-4f00-9a6b-000000000002",
            "superseded_reason": 'model, both ways: "Where does the user live?"',
            "valid_until": "2026-06-01T09:00:00+00:00",
        },
    )
    new = MemoryRecord(
        id="0b6c3a52-1d2e-4f00-9a6b-000000000002",
        text="Alice lives in Hangzhou.",
        user_id="alice",
        created_at="2026-06-01T09:00:00+00:00",
    )
    detail = MemoryRecord(
        id="0b6c3a52-1d2e-4f00-9a6b-000000000003",
        text="Alice's flat in Hangzhou is near West Lake.",
        user_id="alice",
        created_at="2026-06-02T09:00:00+00:00",
        metadata={"extends": "0b6c3a52-1d2e-4f00-9a6b-000000000002"},
    )
    asyncio.run(store.insert([old, new, detail]))
    client = client_for(store)
    current = client.get("/?user=alice").text
    assert "Alice lives in Hangzhou." in current and "Alice lives in Berlin." not in current
    assert 'id="toggle-superseded" href="./?user=alice&amp;all=1">show superseded' in current
    page = client.get("/?user=alice&all=1").text
    link = '<a href="memory?id=0b6c3a52-1d2e-4f00-9a6b-00000000000{0}" title='
    assert f"extends {link.format(2)}" in page
    assert f"extended by {link.format(3)}" in page
    assert page.count('class="memory superseded"') == 1
    assert page.index("Alice lives in Hangzhou.") < page.index("Alice lives in Berlin.")
    assert 'class="memory superseded"' in page
    assert f"superseded by {link.format(2)}" in page
    assert f"supersedes {link.format(1)}" in page
    assert "valid until 2026-06-01 09:00Z" in page

    # The timeline of the old memory: what `agentscope-mem0 history` shows.
    timeline = client.get("/memory?id=0b6c3a52-1d2e-4f00-9a6b-000000000001").text
    assert "Alice lives in Berlin." in timeline
    assert "SUPERSEDED_BY" in timeline and "Alice lives in Hangzhou." in timeline
    # Why: the reading that decided it, on both memories' pages.
    why = "model, both ways: &quot;Where does the user live?&quot;"
    assert f'data-label="why">{why}</td>' in timeline
    newer = client.get("/memory?id=0b6c3a52-1d2e-4f00-9a6b-000000000002").text
    assert "SUPERSEDES" in newer and why in newer


def test_a_repeat_is_shown_with_the_memory_kept(store: Any) -> None:
    kept = MemoryRecord(
        id="0b6c3a52-1d2e-4f00-9a6b-000000000011",
        text="Alice lives in Hangzhou.",
        user_id="alice",
        created_at="2026-06-01T09:00:00+00:00",
        metadata={"duplicates": ["0b6c3a52-1d2e-4f00-9a6b-000000000012"]},
    )
    repeat = MemoryRecord(
        id="0b6c3a52-1d2e-4f00-9a6b-000000000012",
        text="The user lives in Hangzhou.",
        user_id="alice",
        created_at="2026-06-02T09:00:00+00:00",
        metadata={
            "duplicate_of": "0b6c3a52-1d2e-4f00-9a6b-000000000011",
            "valid_until": "2026-06-02T09:00:00+00:00",
            # The repeat's wording carried the event's date; the kept one did not.
            "event_date": "2026-05",
        },
    )
    asyncio.run(store.insert([kept, repeat]))
    client = client_for(store)
    current = client.get("/?user=alice").text
    assert "Alice lives in Hangzhou." in current and "The user lives in Hangzhou." not in current
    assert '<span class="tag">event date 2026-05</span>' in current  # on the kept memory
    page = client.get("/?user=alice&all=1").text
    link = '<a href="memory?id=0b6c3a52-1d2e-4f00-9a6b-0000000000{0}" title='
    assert f"repeat of {link.format(11)}" in page
    assert f"merged {link.format(12)}" in page
    # The repeat is tagged as one only: no "valid until", no event date of its own.
    row = page.split('id="m-0b6c3a52-1d2e-4f00-9a6b-000000000012"')[1].split("</tr>")[0]
    assert "valid until" not in row and "event date" not in row

    timeline = client.get("/memory?id=0b6c3a52-1d2e-4f00-9a6b-000000000012").text
    assert "DUPLICATE_OF" in timeline and "Alice lives in Hangzhou." in timeline
    timeline = client.get("/memory?id=0b6c3a52-1d2e-4f00-9a6b-000000000011").text
    assert "DUPLICATES" in timeline and "The user lives in Hangzhou." in timeline


def test_outbox_lists_failed_writes_and_retry_requeues_them(store: Any) -> None:
    path = store.settings.outbox / OUTBOX_FILENAME
    path.parent.mkdir(parents=True, exist_ok=True)
    outbox = Outbox(path)
    owner = new_owner_id()
    row = outbox.insert(
        key="k-failed",
        user_id="alice",
        agent_id="bot",
        messages=[{"role": "user", "content": "I moved to <b>Oslo</b>."}],
        owner=owner,
        lease=30.0,
    )
    outbox.fail([row], "PermanentBackendError: 400 bad request")
    outbox.release(owner=owner)
    outbox.close()

    client = client_for(store)
    page = client.get("/outbox").text
    assert "I moved to &lt;b&gt;Oslo&lt;/b&gt;." in page
    assert "400 bad request" in page and 'id="retry"' in page
    done = client.post("/outbox-retry", data={"csrf": csrf_of(page)})
    assert done.status_code == 303
    after = client.get(done.headers["location"]).text
    assert "Requeued 1 failed writes." in after
    check = Outbox(path)
    try:
        assert check.counts() == {"pending": 1, "failed": 0}
    finally:
        check.close()


def test_users_page_counts_and_plots(store: Any) -> None:
    add(store, "alice", "Alice drinks green tea.")
    add(store, "alice", "Alice has a cat named Miso.", agent="bot")
    add(store, "bob", "Bob lives in Oslo.")
    client = client_for(store)
    page = client.get("/").text
    # On Qdrant Edge the counts come from the engine's index: no scan, no chart here.
    cell = '</a></td><td class="num" data-label="memories">{0}</td>'
    assert re.search(r'href="\./\?user=alice">alice' + cell.format(2), page)
    assert re.search(r'href="\./\?user=bob">bob' + cell.format(1), page)
    assert "<div><b>3</b>memories</div>" in page and "<div><b>2</b>users</div>" in page
    assert "<div><b>0</b>hidden: superseded or repeats</div>" in page
    assert "<div><b>1</b>agents</div>" in page
    bars = re.findall(r'data-count="(\d+)"', client.get("/?user=alice").text)
    assert len(bars) == 30 and bars[-1] == "2" and set(bars[:-1]) == {"0"}


def test_home_counts_the_current_memories_and_says_how_many_are_hidden(store: Any) -> None:
    kept = add(store, "alice", "Alice lives in Beijing.")
    old = MemoryRecord(
        id="0b6c3a52-1d2e-4f00-9a6b-000000000021",
        text="Alice lives in Hangzhou.",
        user_id="alice",
        metadata={"superseded_by": kept, "valid_until": "2026-06-02T09:00:00+00:00"},
    )
    repeat = MemoryRecord(
        id="0b6c3a52-1d2e-4f00-9a6b-000000000022",
        text="The user lives in Beijing.",
        user_id="alice",
        metadata={"duplicate_of": kept},
    )
    asyncio.run(store.insert([old, repeat]))
    page = client_for(store).get("/").text
    assert "<div><b>1</b>memories</div>" in page
    assert "<div><b>2</b>hidden: superseded or repeats</div>" in page
    assert re.search(r'alice</a></td><td class="num" data-label="memories">1</td>', page)


def test_a_machine_agent_id_is_shortened_and_a_name_shown_whole(store: Any) -> None:
    app_id = "3f2b8c1e5d4a4c2b9e1f0a1b2c3d4e5f"  # how agentscope.app names an agent
    add(store, "alice", "Alice drinks green tea.", agent=app_id)
    add(store, "alice", "Alice has a cat.", agent="planner")
    page = client_for(store).get("/?user=alice").text
    assert f'<span class="id" title="{app_id}">3f2b8c1e</span>' in page
    assert f">{app_id}<" not in page
    assert '<td data-label="agent">planner</td>' in page


def _occupied(port: int) -> socket.socket | None:
    """A socket listening on ``port``; ``None`` when another program already does."""
    taken = socket.socket()
    try:
        taken.bind(("127.0.0.1", port))
    except OSError:
        taken.close()
        return None
    taken.listen()
    return taken


def test_the_command_prints_its_url_serves_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    import os
    import signal
    import urllib.request

    folder = tmp_path / "served"
    folder.mkdir()
    env = {**os.environ, "AGENTSCOPE_MEM0_EMBEDDER": "hash"}
    # Without --port it takes a free one: the local model's usual port may be busy.
    busy = _occupied(8765)
    process = subprocess.Popen(
        [sys.executable, "-m", "agentscope_mem0.cli", "ui", "--folder", str(folder)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        found = re.search(r"at (http://127\.0\.0\.1:\d+/)$", line.strip())
        assert found, line
        with urllib.request.urlopen(found.group(1), timeout=10) as response:
            body = response.read().decode()
        assert response.status == 200 and "No memories stored yet." in body
        process.send_signal(signal.SIGINT)
        assert process.wait(20) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if busy is not None:
            busy.close()
    # The folder is free again for the application.
    from agentscope_mem0.cli._lock import lock_holder

    assert lock_holder(folder) is None


def test_a_busy_port_is_said_in_one_line(tmp_path: Path) -> None:
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    try:
        result = CliRunner().invoke(
            cli, ["ui", "--folder", str(tmp_path), "--port", str(port)], catch_exceptions=False
        )
    finally:
        busy.close()
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"Error: port {port} on 127.0.0.1 is in use by another program: give another "
        "--port, or leave --port out to pick a free one\n"
    )


# -- another backend: pgvector on a real PostgreSQL -----------------------------


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    from _pgfixture import postgres_dsn

    with postgres_dsn() as dsn:
        yield dsn


def test_the_inspector_works_on_pgvector(pg_dsn: str, tmp_path: Path) -> None:
    from _pgfixture import fresh_collection

    pg_config = tmp_path / "pg.toml"
    pg_config.write_text(
        f'backend = "pgvector"\ndsn = "{pg_dsn}"\ncollection = "{fresh_collection("ui")}"\n'
        'history_db = "pg-history.db"\nfolder = "data"\n'
    )
    settings = load_settings(folder=None, config_path=str(pg_config))
    store = open_store(settings, embeds=True)
    try:
        kept = add(store, "alice", "Alice drinks green tea.")
        gone = add(store, "alice", "Alice has a cat named Miso.")
        add(store, "bob", "Bob lives in Oslo.")
        client = client_for(store)
        home = client.get("/").text
        assert "pgvector table" in home
        cell = r'</a></td><td class="num" data-label="memories">2</td><td data-label="agents">'
        assert re.search(r'href="\./\?user=alice">alice' + cell, home)
        assert "Memories per day" in home  # scanned: the chart is there
        page = client.get("/?user=alice").text
        assert "Alice drinks green tea." in page and "Bob lives in Oslo." not in page
        hits = client.get("/search", params={"user": "alice", "q": "green tea"}).text
        assert hits.index("Alice drinks green tea.") < hits.index("Alice has a cat")
        form = {"memory_id": gone, "user": "alice", "confirm": "yes", "csrf": csrf_of(page)}
        assert client.post("/forget", data=form).status_code == 303
        assert asyncio.run(store.get(gone)) is None
        assert asyncio.run(store.get(kept)) is not None
    finally:
        store.close()


def test_a_long_user_page_pages_newest_first(store: Any) -> None:
    records = [
        MemoryRecord(
            id=f"00000000-0000-4000-8000-{i:012d}",
            text=f"Fact number {i}.",
            user_id="carol",
            created_at=f"2026-03-01T10:{i // 60:02d}:{i % 60:02d}+00:00",
        )
        for i in range(305)
    ]
    asyncio.run(store.insert(records))
    client = client_for(store)
    page = client.get("/?user=carol").text
    assert page.count('<tr id="m-') == 100
    assert "Fact number 304." in page and "Fact number 204." not in page  # newest first
    assert "page 1 of 4" in page and 'href="./?user=carol&amp;page=2" rel="next"' in page
    last = client.get("/?user=carol&page=4").text
    assert last.count('<tr id="m-') == 5 and "Fact number 0." in last
    assert "page 4 of 4" in last and 'rel="prev"' in last and 'rel="next"' not in last
    assert client.get("/?user=carol&page=99").text.count('<tr id="m-') == 5  # clamped


# -- hosted mem0: the platform fake of test_hosted --------------------------------


def test_the_inspector_on_hosted_mem0(tmp_path: Path, config: Path) -> None:
    store = open_store(load_settings(folder=str(tmp_path / "data"), config_path=str(config)))
    for user, text in (("alice", "Alice likes oolong tea."), ("bob", "Bob likes black coffee.")):
        asyncio.run(store.add(text, Scope(user), infer=False))  # the platform queues adds
    client = client_for(store)
    home = client.get("/").text
    assert "lists memories per user" in home  # the platform cannot list users
    page = client.get("/?user=alice").text
    assert "Alice likes oolong tea." in page and "black coffee" not in page
    found = client.get("/search", params={"user": "alice", "q": "tea"}).text
    assert "Alice likes oolong tea." in found and "black coffee" not in found


# -- what a user page offers ---------------------------------------------------


def test_agent_filter_short_ids_and_dates_shown_once(store: Any) -> None:
    tea = add(store, "alice", "Alice drinks green tea.", agent="barista")
    cat = add(store, "alice", "Alice has a cat named Miso.", agent="vet")
    client = client_for(store)
    page = client.get("/?user=alice").text
    # Every agent of the user, as a filter.
    assert 'href="./?user=alice&amp;agent=barista">barista</a>' in page
    assert 'href="./?user=alice&amp;agent=vet">vet</a>' in page
    # Ids shortened, the whole id on hover; one date when created == updated.
    assert f'<span class="id" title="{tea}">{tea[:8]}</span>' in page
    assert "updated" not in page.split('id="memories"')[1]
    only_vet = client.get("/?user=alice&agent=vet").text
    assert "Miso" in only_vet and "green tea" not in only_vet
    assert "<b>vet</b>" in only_vet  # the chosen agent is marked
    assert cat in only_vet


def test_search_results_show_the_agent_and_offer_forget(store: Any) -> None:
    tea = add(store, "alice", "Alice drinks green tea.", agent="barista")
    add(store, "alice", "Alice has a cat named Miso.", agent="vet")
    client = client_for(store)
    page = client.get("/search?user=alice&q=green+tea&k=1").text
    (row,) = re.findall(r'<tr class="hit">.*?</tr>', page)
    assert "Alice drinks green tea." in row and 'data-label="agent">barista<' in row
    assert f'name="memory_id" value="{tea}"' in row and ">Forget</button>" in row
    # The button asks first, like the one on the user page.
    asked = client.post("/forget", data={"memory_id": tea, "user": "alice", "csrf": csrf_of(page)})
    assert asked.status_code == 200 and 'id="question"' in asked.text


def test_the_working_memory_of_a_user_and_a_conversation(store: Any) -> None:
    from agentscope_mem0 import SqliteWorkingStore

    working = SqliteWorkingStore(store.settings.folder)
    try:
        working.update("alice", "", lambda old: "Name: Alice. Plan: <b>trip</b>.", kind="text")
        working.update("alice", "chat-7", lambda old: "Booking a train.", kind="text")
    finally:
        working.close()
    add(store, "alice", "Alice drinks green tea.")
    client = client_for(store)
    assert 'href="working?user=alice"' in client.get("/?user=alice").text
    own = client.get("/working?user=alice").text
    assert "Name: Alice. Plan: &lt;b&gt;trip&lt;/b&gt;." in own  # text, escaped
    assert 'href="working?user=alice&amp;conversation=chat-7">chat-7</a>' in own
    chat = client.get("/working?user=alice&conversation=chat-7").text
    assert "Booking a train." in chat and "Name: Alice" not in chat
    none = client.get("/working?user=bob").text
    assert 'id="no-working"' in none


def test_the_profile_is_shown_on_the_users_page_and_goes_when_the_user_is_forgotten(
    store: Any,
) -> None:
    from agentscope_mem0 import SqliteWorkingStore
    from agentscope_mem0._profile.record import load_profile, save_profile

    working = SqliteWorkingStore(store.settings.folder)
    try:
        save_profile(working, "alice", "- Drinks green tea <b>daily</b>")
    finally:
        working.close()
    add(store, "alice", "Alice drinks green tea.")
    client = client_for(store)
    page = client.get("/?user=alice").text
    assert 'id="profile"' in page and "Drinks green tea &lt;b&gt;daily&lt;/b&gt;" in page
    assert 'id="profile"' not in client.get("/?user=bob").text
    csrf = csrf_of(page)
    done = client.post("/forget-user", data={"user": "alice", "csrf": csrf, "confirm": "yes"})
    assert done.status_code in (200, 303), done.text
    working = SqliteWorkingStore(store.settings.folder)
    try:
        assert load_profile(working, "alice") is None
    finally:
        working.close()


def test_the_app_works_mounted_under_a_path(store: Any) -> None:
    """Links and forms are relative: under another app's path they stay under it."""
    from starlette.applications import Starlette
    from starlette.routing import Mount

    memory_id = add(store, "alice", "Alice drinks green tea.")
    inner = create_app(store, token=None)
    outer = Starlette(routes=[Mount("/memory-inspector", app=inner)])
    client = TestClient(outer, base_url=BASE, follow_redirects=False, client=PEER)
    home = client.get("/memory-inspector/")
    assert home.status_code == 200 and 'href="./?user=alice"' in home.text
    assert client.get("/memory-inspector/style.css").status_code == 200
    page = client.get("/memory-inspector/?user=alice").text
    form = {"memory_id": memory_id, "user": "alice", "csrf": csrf_of(page), "confirm": "yes"}
    done = client.post("/memory-inspector/forget", data=form)
    assert done.status_code == 303 and done.headers["location"].startswith("./?user=alice")
    assert "green tea" not in client.get("/memory-inspector/?user=alice").text


# -- as of a date ------------------------------------------------------------------


def _moved(store: Any) -> None:
    """Alice lived in Berlin from January to June 2026, in Hangzhou since; she
    told in June of a trip to Crete in 2025."""
    old = MemoryRecord(
        id="0b6c3a52-1d2e-4f00-9a6b-000000000021",
        text="Alice lives in Berlin.",
        user_id="alice",
        created_at="2026-01-05T10:00:00+00:00",
        metadata={
            "superseded_by": "0b6c3a52-1d2e-4f00-9a6b-000000000022",
            "valid_until": "2026-06-01T09:00:00+00:00",
        },
    )
    new = MemoryRecord(
        id="0b6c3a52-1d2e-4f00-9a6b-000000000022",
        text="Alice lives in Hangzhou.",
        user_id="alice",
        created_at="2026-06-01T09:00:00+00:00",
        metadata={"supersedes": "0b6c3a52-1d2e-4f00-9a6b-000000000021"},
    )
    trip = MemoryRecord(
        id="0b6c3a52-1d2e-4f00-9a6b-000000000023",
        text="Alice spent a holiday in Crete.",
        user_id="alice",
        created_at="2026-06-02T09:00:00+00:00",
        metadata={"event_date": "2025-07"},
    )
    asyncio.run(store.insert([old, new, trip]))


def _listed(page: str, table: str) -> list[str]:
    body = page.split(f'<table id="{table}"')[1].split("</table>")[0]
    return re.findall(r'<td class="text">([^<]*)', body)


def test_a_users_page_as_of_a_date_lists_what_was_current_then(store: Any) -> None:
    _moved(store)
    client = client_for(store)

    today = client.get("/?user=alice")
    assert today.status_code == 200
    assert 'id="as-of-form"' in today.text and 'name="as_of"' in today.text
    assert 'id="memories-then"' not in today.text  # without as_of: today's listing
    assert "Alice lives in Berlin." not in _listed(today.text, "memories")

    then = client.get("/?user=alice&as_of=2026-03-01")
    assert then.status_code == 200
    assert _listed(then.text, "memories-then") == [  # newest first, as today's listing
        "Alice spent a holiday in Crete.",  # happened in 2025, told later: true then
        "Alice lives in Berlin.",
    ]
    berlin = then.text.split('id="then-0b6c3a52-1d2e-4f00-9a6b-000000000021"')[1]
    berlin = berlin.split("</tr>")[0]
    assert 'data-label="said">2026-01-05 10:00Z<' in berlin
    assert 'data-label="valid until">2026-06-01<' in berlin
    assert "superseded by" in berlin and "000000000022" in berlin
    crete = then.text.split('id="then-0b6c3a52-1d2e-4f00-9a6b-000000000023"')[1]
    assert 'data-label="happened">2025-07<' in crete.split("</tr>")[0]
    assert 'type="date" name="as_of" value="2026-03-01"' in then.text  # the box keeps it
    assert "Current as of the end of 2026-03-01" in then.text
    assert 'class="memory superseded"' not in then.text  # then, Berlin was current

    # A full ISO time: an hour before the move, Berlin still held.
    hour = client.get("/", params={"user": "alice", "as_of": "2026-06-01T08:00:00+00:00"})
    assert "Alice lives in Berlin." in _listed(hour.text, "memories-then")
    assert "Current as of 2026-06-01 08:00Z" in hour.text

    now = client.get("/", params={"user": "alice", "as_of": datetime.now(UTC).date().isoformat()})
    listed_now = _listed(now.text, "memories-then")
    assert "Alice lives in Hangzhou." in listed_now and "Alice lives in Berlin." not in listed_now
    assert 'data-label="valid until">still current<' in now.text

    before = client.get("/?user=alice&as_of=2024-01-01")
    assert 'id="none-then"' in before.text


def test_a_bad_as_of_date_is_refused_with_a_message(store: Any) -> None:
    _moved(store)
    client = client_for(store)
    for bad in ("yesterday", "2026-13-45", "2026-02-30T25:00"):
        refused = client.get("/", params={"user": "alice", "as_of": bad})
        assert refused.status_code == 400, bad
        assert "as_of must be a datetime, a date or ISO 8601 text" in refused.text
        assert "Traceback" not in refused.text


# -- editing the profile -----------------------------------------------------------


def _profile_of(store: Any, user: str) -> str | None:
    """The profile as `agentscope-mem0 profile USER` reads it."""
    from agentscope_mem0.cli._profile import change_profile

    record = change_profile(store.settings, user)
    return None if record is None else record.content


def test_the_profile_is_edited_and_cleared_from_the_users_page(store: Any) -> None:
    add(store, "alice", "Alice drinks green tea.")
    client = client_for(store)
    page = client.get("/?user=alice").text
    assert 'id="no-profile"' in page and 'id="profile-form"' in page
    assert 'id="profile-clear"' not in page  # nothing to clear yet
    secret = csrf_of(page)

    text = "- Prefers to be called Ali\n- Drinks green tea <daily>"
    form = {"user": "alice", "text": text, "csrf": secret}
    saved = client.post("/profile-save", data=form, headers={"Origin": BASE})
    assert saved.status_code == 303 and saved.headers["location"].startswith("./?user=alice")
    assert _profile_of(store, "alice") == text
    shown = client.get(saved.headers["location"].lstrip(".")).text
    assert "Saved the profile of alice" in shown
    escaped = "- Prefers to be called Ali\n- Drinks green tea &lt;daily&gt;"
    assert f'id="profile">{escaped}</pre>' in shown
    assert f">{escaped}</textarea>" in shown
    assert 'id="profile-clear"' in shown

    cleared = client.post("/profile-clear", data={"user": "alice", "csrf": secret})
    assert cleared.status_code == 303
    assert _profile_of(store, "alice") is None
    again = client.get(cleared.headers["location"].lstrip(".")).text
    assert "Cleared the profile of alice" in again and 'id="no-profile"' in again


def test_empty_or_oversized_profile_text_is_refused_with_a_message(store: Any) -> None:
    from agentscope_mem0.cli._profile import PROFILE_MAX_CHARS

    client = client_for(store)
    secret = csrf_of(client.get("/?user=alice").text)
    client.post("/profile-save", data={"user": "alice", "text": "- Kept", "csrf": secret})
    for text, said in ((" \n ", "is empty"), ("x" * (PROFILE_MAX_CHARS + 1), "at most")):
        refused = client.post("/profile-save", data={"user": "alice", "text": text, "csrf": secret})
        assert refused.status_code == 400 and said in refused.text
        # The command line refuses the same text, saying the same.
        folder = str(store.settings.folder)
        by_cli = CliRunner().invoke(cli, ["profile", "alice", "--folder", folder, "--edit", text])
        assert by_cli.exit_code == 2 and said in by_cli.output, by_cli.output
    assert _profile_of(store, "alice") == "- Kept"


def test_profile_posts_without_the_secret_are_refused(store: Any) -> None:
    client = client_for(store)
    secret = csrf_of(client.get("/?user=alice").text)
    client.post("/profile-save", data={"user": "alice", "text": "- Kept", "csrf": secret})
    form = {"user": "alice", "text": "- Replaced"}
    assert client.post("/profile-save", data=form).status_code == 403
    assert client.post("/profile-save", data={**form, "csrf": "guess"}).status_code == 403
    foreign = client.post(
        "/profile-save", data={**form, "csrf": secret}, headers={"Origin": "https://evil.example"}
    )
    assert foreign.status_code == 403
    no_cookie = TestClient(client.app, base_url=BASE, follow_redirects=False, client=PEER)
    assert no_cookie.post("/profile-save", data={**form, "csrf": secret}).status_code == 403
    assert client.post("/profile-clear", data={"user": "alice"}).status_code == 403
    assert client.get("/profile-save?user=alice&text=x").status_code == 405
    assert _profile_of(store, "alice") == "- Kept"
