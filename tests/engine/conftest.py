"""Fixtures of the engine's tests: a fresh instance on a temporary data folder, a session on
it, and sessions of two users. A module that needs other options or tables overrides them by
name."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from refimpl.engine.instance import Instance
from refimpl.engine.rights import Principal
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


@pytest.fixture
def users(instance: Instance, admin: Session) -> Iterator[tuple[Session, Session]]:
    """Sessions of users `u` and `v` on `demo`, which the module's own `admin` fixture
    creates (with the rights its tests need) before they are opened."""
    u, v = (instance.session("demo", Principal(name)) for name in ("u", "v"))
    yield u, v
    u.close()
    v.close()
