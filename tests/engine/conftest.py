"""Fixtures of the engine's tests: a fresh instance on a temporary data folder, and a session
on it. A module that needs other options or tables overrides them by name."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from refimpl.engine.instance import Instance
from refimpl.engine.session import Session


@pytest.fixture
def instance(tmp_path: Path) -> Iterator[Instance]:
    opened = Instance.open(tmp_path / "data")
    yield opened
    opened.close()


@pytest.fixture
def session(instance: Instance) -> Iterator[Session]:
    opened = instance.session()
    yield opened
    opened.close()
