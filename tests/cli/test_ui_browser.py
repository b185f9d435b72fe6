"""The inspector in a real headless browser: Debian's chromium driven by Playwright.

The server is the real app under uvicorn on a free loopback port, on the
CLI's real embedded store in tmp_path (mem0, local Qdrant, HashEmbedding).
Skipped, with the reason, when chromium or Playwright is not installed
(``apt-get install chromium``; ``pip install -e '.[dev]'``; no browser is
ever downloaded).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from playwright import sync_api

from agentscope_mem0 import Scope
from agentscope_mem0.cli._config import load_settings
from agentscope_mem0.cli._mem0_store import open_store
from agentscope_mem0.cli.ui._web import create_app

CHROMIUM = (
    os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
)
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)"
)

LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context()
    opened = context.new_page()
    opened.set_default_timeout(15_000)
    yield opened
    context.close()


@dataclasses.dataclass
class Served:
    url: str
    store: Any
    ids: dict[str, str]


def _seed(store: Any) -> dict[str, str]:
    items = [
        ("alice", None, "Alice drinks green tea every morning."),
        ("alice", "bot", "Alice has a cat named Miso."),
        ("alice", None, HOSTILE),
        ("bob", None, "Bob's locker code is zebracorn."),
    ]
    ids: dict[str, str] = {}

    async def add_all() -> None:
        for user, agent, text in items:
            (stored,) = await store.add(text, Scope(user, agent), infer=False)
            ids[text] = str(stored["id"])

    # Playwright's sync API keeps an event loop running on this thread.
    worker = threading.Thread(target=asyncio.run, args=(add_all(),))
    worker.start()
    worker.join(60)
    assert len(ids) == len(items)
    return ids


TOKEN = "browser-test-token-0123456789"


@pytest.fixture(params=[False], ids=["loopback"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Served]:
    settings = load_settings(folder=str(tmp_path / "data"), config_path=None)
    settings = dataclasses.replace(settings, embedding_model="hash")
    store = open_store(settings, embeds=True)
    ids = _seed(store)
    # With the token, the app behaves as when bound to a public address.
    token = TOKEN if request.param else None
    app = create_app(store, token=token)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, name="inspector", daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        assert time.monotonic() < deadline, "the inspector did not start"
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield Served(url=f"http://127.0.0.1:{port}", store=store, ids=ids)
    finally:
        server.should_exit = True
        thread.join(10)
        store.close()


def _texts(page: Any, selector: str) -> list[str]:
    return [t.strip() for t in page.locator(selector).all_inner_texts()]


def test_a_users_memories_appear_and_nobody_elses(page: Any, served: Served) -> None:
    page.goto(served.url + "/")
    assert _texts(page, "#users a.user") == ["alice", "bob"]  # most memories first
    page.click("#users a.user:text-is('alice')")
    page.wait_for_url("**/?user=alice")
    texts = _texts(page, "#memories tr.memory td.text")
    assert len(texts) == 3
    assert any(t.startswith("Alice drinks green tea every morning.") for t in texts)
    assert any(t.startswith("Alice has a cat named Miso.") for t in texts)
    assert "zebracorn" not in page.content()
    page.goto(served.url + "/?user=bob")
    assert [t.splitlines()[0] for t in _texts(page, "#memories td.text")] == [
        "Bob's locker code is zebracorn."
    ]
    assert "Miso" not in page.content()


def test_search_ranks_with_scores(page: Any, served: Served) -> None:
    page.goto(served.url + "/?user=alice")
    page.fill("input[name=q]", "green tea in the morning")
    page.click("#search-form button[type=submit]")
    page.wait_for_selector("#hits")
    rows = page.locator("#hits tr.hit")
    assert rows.count() >= 1
    first = rows.nth(0).locator("td.text").inner_text()
    assert first == "Alice drinks green tea every morning."
    scores = [float(s) for s in _texts(page, "#hits td.score")]
    assert scores == sorted(scores, reverse=True)
    assert all(0 < s <= 1.0001 for s in scores)
    assert "zebracorn" not in page.content()  # bob's memory is never a hit


def test_forget_one_asks_then_it_is_gone(page: Any, served: Served) -> None:
    page.goto(served.url + "/?user=alice")
    row = page.locator("#memories tr.memory", has_text="Alice has a cat named Miso.")
    row.locator("button.forget").click()
    page.wait_for_selector("#question")
    assert "Alice has a cat named Miso." in page.inner_text("#question")
    page.click("#cancel")
    page.wait_for_selector("#memories")
    assert page.locator("#memories tr.memory", has_text="Miso").count() == 1

    page.locator("#memories tr.memory", has_text="Miso").locator("button.forget").click()
    page.click("#confirm")
    page.wait_for_selector(".flash")
    assert "Forgot: Alice has a cat named Miso." in page.inner_text(".flash")
    assert page.locator("#memories tr.memory", has_text="Miso").count() == 0
    assert page.locator("#memories tr.memory").count() == 2
    page.reload()
    assert "Miso" not in page.inner_text("#memories")


def test_forget_all_of_a_user(page: Any, served: Served) -> None:
    page.goto(served.url + "/?user=bob")
    page.click("#forget-all")
    page.wait_for_selector("#question")
    assert "all 1 memories of user bob" in page.inner_text("#question")
    page.click("#confirm")
    page.wait_for_selector(".flash")
    assert "Forgot 1 memories of bob." in page.inner_text(".flash")
    assert _texts(page, "#users a.user") == ["alice"]


def test_the_profile_is_edited_through_the_form(page: Any, served: Served) -> None:
    from agentscope_mem0.cli._profile import change_profile

    page.goto(served.url + "/?user=alice")
    assert page.locator("#no-profile").count() == 1
    page.click("#profile-edit summary")
    page.fill("#profile-text", "- Prefers to be called Ali\n- Drinks green tea <daily>")
    page.click("#profile-save")
    page.wait_for_selector(".flash")
    assert "Saved the profile of alice" in page.inner_text(".flash")
    assert page.inner_text("#profile") == "- Prefers to be called Ali\n- Drinks green tea <daily>"
    record = change_profile(served.store.settings, "alice")  # what the CLI reads
    assert record is not None and record.content.endswith("green tea <daily>")

    page.click("#profile-clear")
    page.wait_for_selector(".flash")
    assert "Cleared the profile of alice" in page.inner_text(".flash")
    assert page.locator("#profile").count() == 0 and page.locator("#no-profile").count() == 1


def test_a_memory_holding_script_stays_text(page: Any, served: Served) -> None:
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(served.url + "/?user=alice")
    row = page.locator("#memories tr.memory", has_text="window.__pwned")
    assert row.locator("td.text").inner_text().splitlines()[0] == HOSTILE
    assert page.evaluate("document.querySelectorAll('script').length") == 0
    assert page.evaluate("document.querySelectorAll('main img').length") == 0
    assert page.evaluate("typeof window.__pwned") == "undefined"
    page.goto(served.url + "/search?user=alice&q=pwned+script")
    assert page.evaluate("document.querySelectorAll('script, main img').length") == 0
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert errors == []


@pytest.mark.parametrize("served", [True], indirect=True, ids=["token"])
def test_with_a_token_the_printed_url_opens_and_forms_work(
    browser: Any, page: Any, served: Served
) -> None:
    stranger = browser.new_context()
    try:
        denied = stranger.new_page().goto(served.url + "/?user=alice")
        assert denied is not None and denied.status == 401
    finally:
        stranger.close()
    page.goto(f"{served.url}/?token={TOKEN}")
    assert page.url == served.url + "/"  # the token left the address bar
    page.click("#users a.user:text-is('alice')")
    page.locator("#memories tr.memory", has_text="Miso").locator("button.forget").click()
    page.click("#confirm")
    page.wait_for_selector(".flash")
    assert page.locator("#memories tr.memory", has_text="Miso").count() == 0


SCREENSHOTS = os.environ.get("AGENTSCOPE_MEM0_SCREENSHOTS")
"""A folder to keep the layout test's screenshots in (``docs/inspector`` for the docs)."""


def _add_timeline(store: Any) -> str:
    """A move that superseded an older home, with the dates the judge writes."""
    from agentscope_mem0.cli._records import MemoryRecord

    old = MemoryRecord(
        id="0b6c3a52-1d2e-4f00-9a6b-000000000001",
        text="Alice lives in Hangzhou.",
        user_id="alice",
        agent_id="assistant",
        created_at="2026-01-05T10:00:00+00:00",
        metadata={
            "superseded_by": "0b6c3a52-1d2e-4f00-9a6b-000000000002",
            "valid_until": "2026-06-01T09:00:00+00:00",
        },
    )
    new = MemoryRecord(
        id="0b6c3a52-1d2e-4f00-9a6b-000000000002",
        text="Alice moved to Beijing last month.",
        user_id="alice",
        agent_id="assistant",
        created_at="2026-06-01T09:00:00+00:00",
        updated_at="2026-06-03T18:30:00+00:00",
        metadata={"supersedes": ["0b6c3a52-1d2e-4f00-9a6b-000000000001"]},
    )

    async def insert() -> None:
        await store.import_batch([old, new])

    worker = threading.Thread(target=asyncio.run, args=(insert(),))
    worker.start()
    worker.join(60)
    return old.id


@pytest.mark.parametrize("width", [1280, 420])
def test_the_layout_uses_the_window_and_fits_a_phone(
    browser: Any, served: Served, width: int, tmp_path: Path
) -> None:
    """Nothing wider than the window, headers and tags on one line each (no word
    broken), the tables using the width; the screenshots are the docs' pictures."""
    old = _add_timeline(served.store)
    folder = Path(SCREENSHOTS) if SCREENSHOTS else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": width, "height": 900})
    try:
        page = context.new_page()
        page.set_default_timeout(15_000)
        pages = {
            "home": "/",
            "user": "/?user=alice&all=1",
            "as-of": "/?user=alice&as_of=2026-05-31",  # the old home, superseded later
            "search": "/search?user=alice&q=where+does+alice+live",
            "timeline": f"/memory?id={old}",
        }
        for name, path in pages.items():
            page.goto(served.url + path)
            assert page.evaluate("document.documentElement.scrollWidth") <= width, name
            broken = page.evaluate(
                """[...document.querySelectorAll('th, .tag, header a, header b')]
                .filter(e => e.offsetParent !== null)
                .filter(e => e.getBoundingClientRect().height >
                             1.6 * parseFloat(getComputedStyle(e).lineHeight || 18))
                .map(e => e.textContent)"""
            )
            assert broken == [], (name, broken)
            if width >= 1000:
                table = page.locator("main table").first
                assert table.bounding_box()["width"] > 0.85 * width, name
            page.screenshot(path=str(folder / f"{name}-{width}.png"), full_page=True)
            assert (folder / f"{name}-{width}.png").stat().st_size > 5_000
        # The timeline page tells the story of the old home.
        page.goto(served.url + pages["timeline"])
        timeline = page.inner_text("#timeline")
        assert "ADD" in timeline and "SUPERSEDED_BY" in timeline
        assert "Alice moved to Beijing last month." in timeline
    finally:
        context.close()
