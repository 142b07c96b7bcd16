"""FanoutPace after a round that left streams behind (a shared part stopped at its budget):
while writers queue and the rest of the process is busy, the next round waits its whole
spacing (MAX_BEHIND_WAIT at most), not the latency cap's MAX_FANOUT_WAIT, so that the
streams keep to their share of the processor; with the rest mostly idle (writers that queue
for the disk) the cap holds; while none queue, it goes at once as after any round."""

from __future__ import annotations

import pytest

from refimpl.waiting.fanout import (
    BUSY_SHARE,
    FANOUT_SPACING,
    MAX_BEHIND_WAIT,
    MAX_FANOUT_WAIT,
    FanoutPace,
)
from tests.waiting.queued_writers import Writers


def _pace(storm: bool) -> tuple[FanoutPace, list[float], list[float], Writers]:
    clock, cpu = [100.0], [0.0]
    pace = FanoutPace(lambda: cpu[0], lambda: clock[0])
    writers = Writers(storm)  # held: the pace watches a log only while it is alive
    pace.watch(writers)
    return pace, clock, cpu, writers


def test_a_round_that_left_streams_behind_is_spaced_by_its_whole_share() -> None:
    pace, clock, cpu, _ = _pace(storm=True)
    clock[0] += 0.06
    pace.round(0.06, behind=True)  # a thousand streams sent a part of 249 KB each
    end, wanted = clock[0], FANOUT_SPACING * 0.06
    assert wanted > MAX_FANOUT_WAIT
    assert pace.next_round == pytest.approx(end + MAX_FANOUT_WAIT)  # by the clock, at best
    cpu[0] += MAX_FANOUT_WAIT  # the rest of the process busy all the while
    assert not pace.due(end + MAX_FANOUT_WAIT)
    assert pace.next_round == pytest.approx(end + wanted)
    cpu[0] += wanted - MAX_FANOUT_WAIT
    assert pace.due(end + wanted)
    # However long a round took, and however busy the rest: MAX_BEHIND_WAIT at most.
    clock[0] += 1.0
    pace.round(1.0, behind=True)
    end = clock[0]
    cpu[0] += MAX_BEHIND_WAIT
    assert not pace.due(end + MAX_FANOUT_WAIT)
    assert pace.next_round == pytest.approx(end + MAX_BEHIND_WAIT)
    assert pace.due(end + MAX_BEHIND_WAIT)


def test_behind_while_writers_queue_for_the_disk_the_latency_cap_holds() -> None:
    pace, clock, cpu, _ = _pace(storm=True)
    clock[0] += 0.06
    pace.round(0.06, behind=True)
    cpu[0] += BUSY_SHARE * MAX_FANOUT_WAIT / 2  # the rest of the process mostly idle
    assert pace.due(clock[0] + MAX_FANOUT_WAIT)


def test_a_round_that_sent_everything_keeps_the_latency_cap() -> None:
    pace, clock, _, _ = _pace(storm=True)
    clock[0] += 0.06
    pace.round(0.06, behind=False)
    assert pace.next_round - clock[0] == MAX_FANOUT_WAIT
    assert pace.due(clock[0] + MAX_FANOUT_WAIT)


def test_streams_behind_catch_up_at_once_while_no_writer_queues() -> None:
    pace, clock, cpu, _ = _pace(storm=False)
    clock[0] += 0.06
    cpu[0] += 1.0
    pace.round(0.06, behind=True)
    assert pace.next_round == clock[0] and pace.due(clock[0])
