"""Crash tests: a writer process is killed with SIGKILL at random moments, again and again.

The writer (`crash_child.py`, forked by a small fork server so a crash costs no Python start)
commits transactions on one data folder and prints `ACK k` after each commit returns. The test
kills it: after a random time, right after a random acknowledgement, during an explicit
CHECKPOINT, and during a background checkpoint (which, with log trims, runs every hundred
commits or so). Some kills are followed by a torn tail: garbage, a zero run or part of a next
frame after the last record, or the last record itself cut short when nobody acknowledged its
transaction (what a power cut during a write leaves). After every kill the test reopens the
folder and checks:

- every acknowledged transaction is there, and nothing after the one in flight;
- the transactions present are exactly 1..K: no hole, and none partial (each writes n marker
  rows, which must be all there or none); a transaction whose record was cut is gone;
- the tables equal a model rebuilt from the transactions' plans (balances keep their total);
- a cut tail is reported in `recovery_messages`, as a sentence naming the file and offset.

Then the next writer continues on the same folder. A second test does the same with eight
writer threads sharing fsyncs (group commit): each writer's transactions present are a prefix
of its sequence holding all it acknowledged. The `long` form (tools/crash_soak.py) kills 300
times.
"""

from __future__ import annotations

import pytest

from tests.engine.crash_run import crash_run


def test_sigkill_at_random_moments_loses_no_acknowledged_commit(tmp_path):
    stats = crash_run(tmp_path / "data", seed=1, kills=40, seconds=30, min_kills=20)
    print("\n".join(stats.lines()))
    assert stats.kills >= 20
    assert stats.commits_verified >= stats.commits_acknowledged > 0
    assert stats.tails_torn == 0 or stats.tails_cut >= stats.tails_torn


def test_sigkill_of_concurrent_committers_loses_no_acknowledged_commit(tmp_path):
    # Eight writer threads share fsyncs (group commit): a kill may land between one leader's
    # fsync and its followers' acknowledgements, but never lose an acknowledged commit.
    stats = crash_run(tmp_path / "data", seed=3, kills=10, seconds=12, min_kills=8, threads=8)
    print("\n".join(stats.lines()))
    assert stats.kills >= 8
    assert stats.commits_verified >= stats.commits_acknowledged > 0


@pytest.mark.long
@pytest.mark.parametrize("threads", [1, 8])
def test_sigkill_soak(tmp_path, threads):
    stats = crash_run(
        tmp_path / "data", seed=2, kills=300, seconds=3600, min_kills=300, threads=threads
    )
    print("\n".join(stats.lines()))
    assert stats.kills == 300
    assert stats.kills_in_checkpoint > 0 and stats.kills_in_background_checkpoint > 0
    assert stats.records_cut > 0
