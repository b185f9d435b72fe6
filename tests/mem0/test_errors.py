"""mem0's errors become the package's own in one place (``_mem0/errors.py``).

An internal unit on purpose: the kinds it names decide what the write queue
retries and what the command line's exit code is.
"""

from __future__ import annotations

from typing import Any

import pytest
from mem0 import AsyncMemory

from agentscope_mem0 import (
    ConfigurationError,
    Mem0Backend,
    PermanentBackendError,
    TransientBackendError,
)
from agentscope_mem0._mem0.errors import backend_error, mapped_errors


class _StatusError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status_code = status


class _HostedError(Exception):
    """mem0ai 2.2's hosted errors keep the status in ``debug_info`` only."""

    def __init__(self, status: int) -> None:
        super().__init__("request failed")
        self.debug_info = {"status_code": status}


@pytest.mark.parametrize(
    ("raised", "kind"),
    [
        (_StatusError(503), TransientBackendError),
        (_StatusError(429), TransientBackendError),
        (_StatusError(400), PermanentBackendError),
        (_HostedError(502), TransientBackendError),
        (_HostedError(401), PermanentBackendError),
        (ConnectionResetError("reset by peer"), TransientBackendError),
        (TimeoutError(), TransientBackendError),
        (RuntimeError("database is locked"), TransientBackendError),
        (ValueError("vector of the wrong size"), PermanentBackendError),
        (KeyError("id"), PermanentBackendError),
        # Unknown: retried a bounded number of times rather than dropped.
        (RuntimeError("something odd"), TransientBackendError),
    ],
)
def test_the_kind_says_whether_retrying_may_help(raised: Exception, kind: type) -> None:
    error = backend_error(raised, "search")
    assert type(error) is kind
    assert str(error).startswith(f"mem0 search failed: {type(raised).__name__}")


def test_the_status_of_an_error_raised_from_another_counts() -> None:
    try:
        try:
            raise _StatusError(504)
        except _StatusError as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as outer:
        assert type(backend_error(outer, "add")) is TransientBackendError


def test_mapped_errors_raises_from_the_original_and_passes_the_packages_own() -> None:
    original = ValueError("bad filter")
    with pytest.raises(PermanentBackendError) as info, mapped_errors("get_all"):
        raise original
    assert info.value.__cause__ is original
    assert str(info.value) == "mem0 get_all failed: ValueError: bad filter"

    own = TransientBackendError("already ours")
    with pytest.raises(TransientBackendError) as passed, mapped_errors("add"):
        raise own
    assert passed.value is own
    with pytest.raises(ConfigurationError, match="fix it"), mapped_errors("add"):
        raise ConfigurationError("fix it")


async def test_a_failed_metadata_update_is_mapped_like_a_client_call(
    memory: AsyncMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The backend's direct vector-store update goes through the same mapping."""
    refused = ConnectionRefusedError("store is down")

    def get(**_: Any) -> Any:
        raise refused

    monkeypatch.setattr(memory.vector_store, "get", get)
    with pytest.raises(TransientBackendError) as info:
        await Mem0Backend(memory).update_metadata("some-id", {"superseded_by": None})
    assert info.value.__cause__ is refused
    assert str(info.value) == "mem0 metadata update failed: ConnectionRefusedError: store is down"
