"""What a bench starts and must stop (a server, a PostgreSQL cluster): a context manager that
stops it when its start fails halfway too, so no process or folder outlives the bench."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Self


class Started(ABC):
    @abstractmethod
    def start(self) -> Self: ...

    @abstractmethod
    def stop(self) -> None: ...

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()
