"""Fixtures of the runner's own tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conformance.fake_http import FakeState, fake_server
from tests.conformance.test_steps import liar  # noqa: F401 (the scripted server of test_steps, for test_operators too)


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, FakeState]]:
    """A scripted stand-in for an implementation under test (`fake_http`), per module."""
    with fake_server() as running:
        yield running
