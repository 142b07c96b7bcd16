"""Progress of long work, shown only once it has taken a while.

A `ProgressView` is the engine's `ProgressReport` callback: nothing is shown for work that
ends within `after` seconds; then a rich bar on a terminal, else (when given `line`) a line
at most every `every` seconds, and a last line when a task is done.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)
from rich.progress import (
    Progress as RichProgress,
)

from refimpl.engine.progress import Progress


def describe(progress: Progress) -> str:
    """One line: `recovering database 'demo': 4096 of 10000 records (40%)`."""
    if progress.total <= 0:
        return f"{progress.task}: {progress.done} {progress.unit}"
    share = 100 * progress.done // progress.total
    return f"{progress.task}: {progress.done} of {progress.total} {progress.unit} ({share}%)"


class ProgressView:
    """Shows progress reports once their work has run `after` seconds (see the module)."""

    def __init__(
        self,
        *,
        terminal: Console | None = None,
        line: Callable[[str], None] | None = None,
        after: float = 1.0,
        every: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._terminal = terminal
        self._line = line
        self._after = after
        self._every = every
        self._clock = clock
        self._started = clock()
        self._last_line = float("-inf")
        self._bar: RichProgress | None = None
        self._tasks: dict[str, TaskID] = {}

    def __call__(self, progress: Progress) -> None:
        now = self._clock()
        if now - self._started < self._after:
            return
        if self._terminal is not None:
            self._show_bar(progress)
            return
        finished = progress.total > 0 and progress.done >= progress.total
        if self._line is not None and (finished or now - self._last_line >= self._every):
            self._last_line = now
            self._line(describe(progress))

    def _show_bar(self, progress: Progress) -> None:
        if self._bar is None:
            amount = DownloadColumn() if progress.unit == "bytes" else MofNCompleteColumn()
            self._bar = RichProgress(
                TextColumn("{task.description}"),
                BarColumn(),
                amount,
                TimeRemainingColumn(),
                console=self._terminal,
                transient=False,
            )
            self._bar.start()
        task = self._tasks.get(progress.task)
        total = progress.total if progress.total > 0 else None
        if task is None:
            task = self._bar.add_task(progress.task, total=total)
            self._tasks[progress.task] = task
        self._bar.update(task, completed=progress.done, total=total)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def __enter__(self) -> ProgressView:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()
