"""Fixtures of the CLI tests: offline models for every command, a hosted config file."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from command_line import CLI_ENV
from fakes import KEY, FakePlatform


@pytest.fixture(autouse=True)
def _offline_models(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in CLI_ENV.items():
        if value:
            monkeypatch.setenv(name, value)
        else:
            monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("AGENTSCOPE_MEM0_CONFIG", raising=False)


@pytest.fixture
def config(tmp_path: Path, platform: FakePlatform, monkeypatch: pytest.MonkeyPatch) -> Path:
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
