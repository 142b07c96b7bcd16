"""Group commit: concurrent committers share fsyncs, and every acknowledged row is there.

With a 2 ms delay added to every fsync (a real SSD's flush), 16 threads with a session each
commit single-row INSERTs. Commits that arrive while one fsync runs wait for the next, which
covers all of them, so the log's fsync count grows far slower than the commit count. Every row
is then there, also after a reopen.
"""

from __future__ import annotations

import threading

import refimpl
from refimpl.engine.options import EngineOptions

THREADS = 16
PER_THREAD = 40


def test_sixteen_committers_share_fsyncs(tmp_path):
    path = tmp_path / "data"
    connection = refimpl.connect(path, options=EngineOptions(fsync_delay=0.002))
    connection.execute("CREATE TABLE g (id INT PRIMARY KEY, thread INT, seq INT)")
    log = connection.instance.database("demo").log
    barrier = threading.Barrier(THREADS + 1)
    errors: list[BaseException] = []
    acknowledged: list[list[int]] = [[] for _ in range(THREADS)]

    def writer(index: int) -> None:
        session = connection.session()
        try:
            barrier.wait()
            for seq in range(PER_THREAD):
                row_id = index * PER_THREAD + seq
                result = session.execute("INSERT INTO g VALUES (?, ?, ?)", (row_id, index, seq))
                assert result.count == 1
                acknowledged[index].append(row_id)
        except BaseException as error:  # reported by the main thread
            errors.append(error)
        finally:
            session.close()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    lsn_before, fsyncs_before = log.last_lsn, log.fsync_count
    barrier.wait()
    for thread in threads:
        thread.join(timeout=120)
        assert not thread.is_alive()
    assert errors == []
    commits = THREADS * PER_THREAD
    fsyncs = log.fsync_count - fsyncs_before
    assert log.last_lsn - lsn_before == commits  # one log record per commit
    assert log.durable_lsn == log.last_lsn
    print(f"{commits} commits, {fsyncs} fsyncs")
    assert fsyncs < commits / 3, f"{fsyncs} fsyncs for {commits} commits"

    expected = sorted(i for rows in acknowledged for i in rows)
    assert expected == list(range(commits))
    rows = connection.execute("SELECT id, thread, seq FROM g ORDER BY id").rows
    assert rows == [(i, i // PER_THREAD, i % PER_THREAD) for i in range(commits)]
    connection.close()

    with refimpl.connect(path) as reopened:
        assert reopened.execute("SELECT count(*), sum(id) FROM g").rows == [
            (commits, commits * (commits - 1) // 2)
        ]


def test_each_commit_of_a_lone_writer_is_its_own_fsync(tmp_path):
    # The other side of the coin: without concurrency nothing is batched, and every
    # acknowledged commit was fsync'd before the call returned.
    connection = refimpl.connect(tmp_path / "data", options=EngineOptions(fsync_delay=0.0))
    connection.execute("CREATE TABLE g (id INT PRIMARY KEY)")
    log = connection.instance.database("demo").log
    before = log.fsync_count
    for i in range(50):
        connection.execute("INSERT INTO g VALUES (?)", (i,))
        assert log.durable_lsn == log.last_lsn
    assert log.fsync_count - before >= 50
    connection.close()
