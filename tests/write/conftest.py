"""Fixtures of the outbox tests on PostgreSQL."""

from __future__ import annotations

import os

import pytest

from _pgfixture import DSN_ENV, fresh_collection


@pytest.fixture
def dsn() -> str:
    """The test server (``AGENTSCOPE_MEM0_TEST_PG_DSN``); the test skips without one."""
    given = os.environ.get(DSN_ENV)
    if not given:
        pytest.skip(f"the PostgreSQL outbox needs a server: set {DSN_ENV}")
    return given


@pytest.fixture
def table() -> str:
    """An outbox table of the test's own."""
    return fresh_collection("outbox")
