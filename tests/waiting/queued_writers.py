"""Writers as `FanoutPace` sees them (`Writers`): the pacing tests' stand-in for a log's
count of queued commits (`test_room.py`, `test_fanout_behind.py`)."""

from __future__ import annotations


class Writers:
    """A log's count of queued commits, as `FanoutPace` reads it: `storm` rises at each
    read (writers queue all the while), else it stands."""

    def __init__(self, storm: bool) -> None:
        self.storm = storm
        self.count = 0

    @property
    def queued_appends(self) -> int:
        self.count += self.storm
        return self.count
