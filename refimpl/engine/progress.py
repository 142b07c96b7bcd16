"""How far a long piece of engine work has come (recovery, a check), told through a callback.

A leaf: it imports nothing of the engine. The engine calls a `ProgressReport` now and then
(never on a hot path) and never prints; the command line decides whether and how to show it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Progress:
    """`done` of `total` `unit`s of `task` (a sentence such as "recovering database 'demo'")."""

    task: str
    done: int
    total: int
    unit: str


ProgressReport = Callable[[Progress], None]

REPORT_EVERY = 2048  # records replayed between two reports


def no_report(progress: Progress) -> None:
    """The default: nobody is told."""
