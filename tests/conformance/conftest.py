"""Fixtures of the runner's own tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conformance.fake_http import FakeState, fake_server
from tests.conformance.liar_http import Behaviour, lying_server


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, FakeState]]:
    """A scripted stand-in for an implementation under test (`fake_http`), per module."""
    with fake_server() as running:
        yield running


@pytest.fixture
def liar() -> Iterator[tuple[str, Behaviour]]:
    """A server that lies as the test sets its `Behaviour` (`liar_http`)."""
    with lying_server() as running:
        yield running
