"""Tests of the write-ahead log: framing, rotation, recovery, group commit, failure, retention."""

from __future__ import annotations

import errno
import os
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from refimpl.engine.files import FileOps
from refimpl.engine.storage.wal import WriteAheadLog
from refimpl.engine.storage.wal_repair import cut_damaged_log, inspect_log
from refimpl.engine.storage.wal_segments import HEADER_SIZE, segment_name
from refimpl.errors import CorruptLog, Gone, WritesStopped
from tests.engine.wal_files import (
    FRAME,
    NO_SYNC,
    fill,
    flip_byte,
    make_three_segments,
    payload_of,
    segment_files,
)


class FailingSync(FileOps):
    """Real files whose fsync fails with `code` while `failing` is set; counts its calls."""

    def __init__(self, code: int) -> None:
        self.code = code
        self.failing = threading.Event()
        self.calls = 0

    def fsync(self, fd: int) -> None:
        self.calls += 1
        if self.failing.is_set():
            raise OSError(self.code, os.strerror(self.code))
        super().fsync(fd)


# --- appending and reading ------------------------------------------------------------------


def test_append_and_read_round_trip(tmp_path: Path) -> None:
    with WriteAheadLog(tmp_path / "log") as log:
        assert (log.last_lsn, log.durable_lsn, log.oldest_lsn) == (0, 0, 1)
        assert list(log.read(0)) == []
        payloads = [b"", b"x", bytes(range(256)) * 40, b"last"]
        lsns = [log.append(p) for p in payloads]
        assert lsns == [1, 2, 3, 4]
        log.wait_durable(4)
        assert log.durable_lsn == 4
        assert list(log.read(0)) == list(zip(lsns, payloads, strict=True))
        assert list(log.read(2)) == [(3, payloads[2]), (4, payloads[3])]
        assert list(log.read(4)) == []
        assert list(log.read(1, limit_records=2)) == [(2, b"x"), (3, payloads[2])]
        assert list(log.read(0, limit_records=0)) == []
        assert log.total_bytes == sum(HEADER_SIZE + len(p) for p in payloads)
        assert (tmp_path / "log" / "00000000000000000001.wal").is_file()


def test_read_shows_nothing_past_the_durable_lsn(tmp_path: Path) -> None:
    with WriteAheadLog(tmp_path, files=NO_SYNC) as log:
        log.wait_durable(log.append(b"one"))
        log.append(b"two")  # appended, not yet durable
        assert log.last_lsn == 2 and log.durable_lsn == 1
        assert list(log.read(0)) == [(1, b"one")]
        pending = log.read(0)  # the bound is fixed when read is called
        log.wait_durable(2)
        assert list(pending) == [(1, b"one")]
        assert list(log.read(0)) == [(1, b"one"), (2, b"two")]


def test_lsns_continue_across_reopen(tmp_path: Path) -> None:
    with WriteAheadLog(tmp_path, segment_bytes=200) as log:
        first = fill(log, 5)
        log.append(b"closed, so flushed")  # close makes every appended record durable
    with WriteAheadLog(tmp_path, segment_bytes=200) as log:
        assert log.recovery_messages == []
        assert (log.last_lsn, log.durable_lsn, log.oldest_lsn) == (6, 6, 1)
        assert log.append(b"seven") == 7
        log.wait_durable(7)
        assert [p for _, p in log.read(0)] == [*first, b"closed, so flushed", b"seven"]


def test_rotation_at_segment_bytes_and_reads_across_segments(tmp_path: Path) -> None:
    payloads = make_three_segments(tmp_path)
    assert [p.name for p in segment_files(tmp_path)] == [
        segment_name(1),
        segment_name(5),
        segment_name(9),
    ]
    assert segment_name(5) == "00000000000000000005.wal"
    with WriteAheadLog(tmp_path, segment_bytes=200) as log:
        infos = log.segments()
        assert [s.size for s in infos] == [4 * FRAME] * 3
        assert log.total_bytes == 12 * FRAME
        for after in range(13):  # from the start, the middle of segments and their edges
            expected = list(enumerate(payloads[after:], start=after + 1))
            assert list(log.read(after)) == expected
        assert list(log.read(3, limit_records=3)) == [
            (4, payloads[3]),
            (5, payloads[4]),
            (6, payloads[5]),
        ]
        # Appending after reopen continues in the last segment until it is full.
        log.append(b"z" * 50)
        assert log.segments()[-1].first_lsn == 13


def test_a_record_larger_than_a_segment_goes_whole_into_one(tmp_path: Path) -> None:
    big = os.urandom(5000)
    with WriteAheadLog(tmp_path, segment_bytes=100) as log:
        log.append(b"small")
        log.append(big)
        log.append(b"after")
        log.wait_durable(3)
        assert [(s.first_lsn, s.last_lsn) for s in log.segments()] == [(1, 2), (3, 3)]
        assert log.segments()[0].size == 2 * HEADER_SIZE + 5 + 5000
    with WriteAheadLog(tmp_path, segment_bytes=100) as log:
        assert list(log.read(1)) == [(2, big), (3, b"after")]


def test_read_from_the_middle_of_a_big_segment_seeks_near_it(tmp_path: Path) -> None:
    with WriteAheadLog(tmp_path, files=NO_SYNC) as log:
        payloads = fill(log, 1000, size=20)
        for after in (0, 1, 254, 255, 256, 257, 511, 512, 700, 998, 999, 1000):
            got = list(log.read(after))
            assert got == list(enumerate(payloads[after:], start=after + 1))
        # Destroy the first frame on disk: a read from LSN 900 starts at the indexed record 769
        # and never touches it, while a read from the start does.
        flip_byte(segment_files(tmp_path)[0], HEADER_SIZE + 3)
        assert [lsn for lsn, _ in log.read(899, limit_records=2)] == [900, 901]
        with pytest.raises(CorruptLog) as caught:
            list(log.read(0))
        assert caught.value.offset == 0


def test_readers_see_every_durable_record_exactly_once_while_appending(tmp_path: Path) -> None:
    count = 1500
    with WriteAheadLog(tmp_path, segment_bytes=3000, files=NO_SYNC) as log:
        errors: list[BaseException] = []

        def writer() -> None:
            for i in range(1, count + 1):
                lsn = log.append(payload_of(i, 30))
                if i % 7 == 0 or i == count:
                    log.wait_durable(lsn)

        def reader() -> None:
            try:
                position = 0
                while position < count:
                    for lsn, payload in log.read(position):
                        assert lsn == position + 1
                        assert payload == payload_of(lsn, 30)
                        position = lsn
            except BaseException as exc:
                errors.append(exc)
                raise

        threads = [threading.Thread(target=writer)] + [
            threading.Thread(target=reader) for _ in range(3)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert not errors
        assert len(log.segments()) > 5


# --- group commit -----------------------------------------------------------------------------


def test_group_commit_shares_one_fsync_among_waiting_committers(tmp_path: Path) -> None:
    threads, per_thread = 16, 25
    commits = threads * per_thread
    with WriteAheadLog(tmp_path, fsync_delay=0.002) as log:
        before = log.fsync_count
        write_lock = threading.Lock()  # the database write lock the caller holds
        start = threading.Barrier(threads)
        acknowledged: list[int] = []

        def committer(t: int) -> None:
            start.wait()
            for i in range(per_thread):
                with write_lock:
                    lsn = log.append(f"{t}/{i}".encode())
                log.wait_durable(lsn)
                assert log.durable_lsn >= lsn
                acknowledged.append(lsn)

        workers = [threading.Thread(target=committer, args=(t,)) for t in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=30)
        fsyncs = log.fsync_count - before
        assert sorted(acknowledged) == list(range(1, commits + 1))
        assert fsyncs < commits / 2
        assert sorted(p for _, p in log.read(0)) == sorted(
            f"{t}/{i}".encode() for t in range(threads) for i in range(per_thread)
        )


def test_queued_appends_counts_the_commits_that_found_another_not_yet_durable(
    tmp_path: Path,
) -> None:
    with WriteAheadLog(tmp_path) as log:
        for n in range(3):  # each durable before the next: nobody queued
            log.wait_durable(log.append(f"alone {n}".encode()))
        assert log.queued_appends == 0
        first = log.append(b"waits for its flush")
        log.append(b"behind it")
        log.append(b"and behind that")
        assert log.queued_appends == 2
        log.wait_durable(first + 2)
        log.wait_durable(log.append(b"alone again"))
        assert log.queued_appends == 2


def test_a_failed_fsync_stops_writes_and_acknowledges_nothing_after(tmp_path: Path) -> None:
    files = FailingSync(errno.EIO)
    failing = files.failing
    log = WriteAheadLog(tmp_path / "log", files=files)
    log.wait_durable(log.append(b"safe"))
    failing.set()
    lsn = log.append(b"lost")
    with pytest.raises(WritesStopped) as caught:
        log.wait_durable(lsn)
    message = str(caught.value)
    assert "Input/output error" in message and "restart" in message
    assert log.durable_lsn == 1
    calls_after_failure = files.calls
    failing.clear()  # the disk "recovers": the log must still never retry or acknowledge
    with pytest.raises(WritesStopped):
        log.wait_durable(lsn)
    with pytest.raises(WritesStopped):
        log.wait_durable(1)
    with pytest.raises(WritesStopped):
        log.append(b"more")
    with pytest.raises(WritesStopped):
        log.remove_through(1)
    assert files.calls == calls_after_failure
    assert list(log.read(0)) == [(1, b"safe")]
    assert log.durable_lsn == 1 and log.last_lsn == 2
    log.close()  # the failure was reported already; closing releases the file quietly
    log.close()
    # A restart recovers from what is on disk: "safe" for sure, "lost" only if it got there.
    with WriteAheadLog(tmp_path / "log") as reopened:
        recovered = [p for _, p in reopened.read(0)]
        assert recovered in ([b"safe"], [b"safe", b"lost"])


def test_a_failed_fsync_fails_every_waiting_committer(tmp_path: Path) -> None:
    files = FailingSync(errno.ENOSPC)
    log = WriteAheadLog(tmp_path, files=files)
    files.failing.set()  # after opening, so that opening itself succeeds
    results: list[str] = []
    lock = threading.Lock()

    def committer() -> None:
        with lock:
            try:
                lsn = log.append(b"x")
            except WritesStopped:
                results.append("stopped")
                return
        try:
            log.wait_durable(lsn)
            results.append("acknowledged")
        except WritesStopped:
            results.append("stopped")

    workers = [threading.Thread(target=committer) for _ in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=10)
    assert results == ["stopped"] * 8
    assert log.durable_lsn == 0
    log.close()


def test_a_failed_write_also_stops_writes(tmp_path: Path) -> None:
    log = WriteAheadLog(tmp_path, files=NO_SYNC)
    log.wait_durable(log.append(b"one"))
    # Swap the leader's file for a read-only one: the next write fails as a broken disk would.
    assert log._write_fd is not None  # open once a record was written
    os.close(log._write_fd)
    log._write_fd = os.open(segment_files(tmp_path)[0], os.O_RDONLY)
    with pytest.raises(WritesStopped, match="could not write to .*Bad file descriptor"):
        log.wait_durable(log.append(b"two"))
    with pytest.raises(WritesStopped):
        log.append(b"three")
    assert log.durable_lsn == 1
    log.close()


# --- recovery ---------------------------------------------------------------------------------


def test_a_torn_tail_is_cut_back_with_a_message(tmp_path: Path) -> None:
    with WriteAheadLog(tmp_path, files=NO_SYNC) as log:
        payloads = fill(log, 10)
    path = segment_files(tmp_path)[0]
    with open(path, "r+b") as file:
        file.truncate(10 * FRAME - 7)  # the last frame is torn mid-payload
    with WriteAheadLog(tmp_path) as log:
        assert log.recovery_messages == [
            f"cut a torn tail of {FRAME - 7} bytes from {path} at offset {9 * FRAME} (after LSN 9)"
        ]
        assert path.stat().st_size == 9 * FRAME
        assert [p for _, p in log.read(0)] == payloads[:9]
        assert log.append(b"new ten") == 10
    with WriteAheadLog(tmp_path) as log:
        assert log.recovery_messages == []
        assert list(log.read(8)) == [(9, payloads[8]), (10, b"new ten")]


def test_trailing_zero_bytes_are_the_logs_end_and_appends_overwrite_them(tmp_path: Path) -> None:
    # Zeros after the last valid frame are what the log writes ahead of its end (wal_zeros):
    # neither a torn tail nor damage, and kept, so that later appends land in them.
    with WriteAheadLog(tmp_path, segment_bytes=200, files=NO_SYNC) as log:
        payloads = fill(log, 6)
    path = segment_files(tmp_path)[-1]
    with open(path, "ab") as file:
        file.write(bytes(4096))
    report = inspect_log(tmp_path)
    assert report.ok and report.records == 6 and report.torn_tail is None
    assert path.stat().st_size == 2 * FRAME + 4096  # inspecting changed nothing
    with WriteAheadLog(tmp_path, segment_bytes=200) as log:
        assert log.recovery_messages == []
        assert [p for _, p in log.read(0)] == payloads
        assert log.append(b"seven") == 7
    assert path.stat().st_size == 2 * FRAME + 4096  # written into the zeros
    with WriteAheadLog(tmp_path, segment_bytes=200) as log:
        assert log.recovery_messages == []
        assert [p for _, p in log.read(0)] == [*payloads, b"seven"]


def test_a_partial_header_is_a_torn_tail(tmp_path: Path) -> None:
    with WriteAheadLog(tmp_path, files=NO_SYNC) as log:
        fill(log, 3)
    path = segment_files(tmp_path)[0]
    with open(path, "ab") as file:
        file.write(b"\x07\x00\x00")
    with WriteAheadLog(tmp_path) as log:
        assert log.last_lsn == 3
        assert log.recovery_messages == [
            f"cut a torn tail of 3 bytes from {path} at offset {3 * FRAME} (after LSN 3)"
        ]


@pytest.mark.parametrize("where", ["payload", "length", "lsn", "checksum"])
def test_a_flipped_bit_in_the_whole_last_frame_is_damage_not_a_torn_tail(
    tmp_path: Path, where: str
) -> None:
    # Issue 13: the last frame was written whole (and acknowledged); a bit flipped in it later
    # must not be cut as a torn write, silently losing that commit.
    with WriteAheadLog(tmp_path, files=NO_SYNC) as log:
        fill(log, 3)
    path = segment_files(tmp_path)[0]
    offset = 2 * FRAME + {"payload": HEADER_SIZE + 5, "length": 0, "lsn": 8, "checksum": 4}[where]
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01  # one bit: the length stays within the file
    path.write_bytes(bytes(data))
    before = path.read_bytes()
    with pytest.raises(CorruptLog) as caught:
        WriteAheadLog(tmp_path)
    error = caught.value
    assert (error.path, error.offset) == (str(path), 2 * FRAME)
    assert "LSN 3" in error.message and "--cut-damaged-log" in error.message
    assert path.read_bytes() == before  # refusing changed nothing
    report = inspect_log(tmp_path)
    assert not report.ok and report.damage is not None
    assert (report.damage.first_lost_lsn, report.damage.last_lost_lsn) == (3, 3)
    assert f"damage in {path} at offset {2 * FRAME}" in "\n".join(report.sentences())


def test_cutting_damage_aside_keeps_its_bytes_and_the_log_opens(tmp_path: Path) -> None:
    log_folder, aside = tmp_path / "wal", tmp_path / "damaged"
    make_three_segments(log_folder)
    first, middle, last = segment_files(log_folder)
    flip_byte(middle, FRAME + HEADER_SIZE + 10)  # LSN 6; 7 to 12 follow intact
    cut_from = middle.read_bytes()[FRAME:]
    damage = cut_damaged_log(log_folder, aside)
    assert damage is not None and damage.lost() == "LSN 6 to 12"
    assert (aside / f"{middle.name}.from-{FRAME}").read_bytes() == cut_from
    assert (aside / last.name).is_file() and not last.exists()
    with WriteAheadLog(log_folder, segment_bytes=200) as log:
        assert log.last_lsn == 5 and log.recovery_messages == []
        assert log.append(b"six again") == 6
    assert cut_damaged_log(log_folder, aside) is None


def test_a_torn_first_frame_of_a_new_segment_leaves_it_empty(tmp_path: Path) -> None:
    make_three_segments(tmp_path)
    last = segment_files(tmp_path)[-1]
    with open(last, "r+b") as file:
        file.truncate(10)
    with WriteAheadLog(tmp_path, segment_bytes=200) as log:
        assert "before any record" not in log.recovery_messages[0]
        assert "after LSN 8" in log.recovery_messages[0]
        assert log.last_lsn == 8 and log.segments()[-1].first_lsn == 9
        assert log.append(b"nine") == 9
    with WriteAheadLog(tmp_path, segment_bytes=200) as log:
        assert list(log.read(8)) == [(9, b"nine")]


def test_damage_in_a_segment_that_is_not_the_last_is_refused(tmp_path: Path) -> None:
    make_three_segments(tmp_path)
    middle = segment_files(tmp_path)[1]
    flip_byte(middle, FRAME + HEADER_SIZE + 10)  # inside the second frame's payload
    with pytest.raises(CorruptLog) as caught:
        WriteAheadLog(tmp_path, segment_bytes=200)
    assert caught.value.path == str(middle)
    assert caught.value.offset == FRAME
    assert str(middle) in str(caught.value) and f"offset {FRAME}" in str(caught.value)
    report = inspect_log(tmp_path)
    assert not report.ok and report.damage is not None
    assert report.damage.path == middle and report.damage.offset == FRAME
    assert report.damage.lost() == "LSN 6 to 12"


def test_a_bad_frame_followed_by_valid_frames_in_the_last_segment_is_refused(
    tmp_path: Path,
) -> None:
    make_three_segments(tmp_path)
    last = segment_files(tmp_path)[-1]
    flip_byte(last, HEADER_SIZE + 20)  # the payload of the segment's first frame
    with pytest.raises(CorruptLog) as caught:
        WriteAheadLog(tmp_path, segment_bytes=200)
    assert (caught.value.path, caught.value.offset) == (str(last), 0)
    assert f"follows at offset {FRAME}" in str(caught.value)


def test_a_damaged_length_that_loses_the_frame_boundaries_is_still_found(tmp_path: Path) -> None:
    with WriteAheadLog(tmp_path, files=NO_SYNC) as log:
        fill(log, 20)
    path = segment_files(tmp_path)[0]
    flip_byte(path, 5 * FRAME + 3)  # the length of LSN 6 becomes huge: it "runs past the end"
    with pytest.raises(CorruptLog) as caught:
        WriteAheadLog(tmp_path)
    assert caught.value.offset == 5 * FRAME
    assert "LSN 7" in str(caught.value)


def test_a_missing_segment_is_a_break_in_the_lsn_sequence(tmp_path: Path) -> None:
    make_three_segments(tmp_path)
    first, middle, last = segment_files(tmp_path)
    middle.unlink()
    with pytest.raises(CorruptLog) as caught:
        WriteAheadLog(tmp_path, segment_bytes=200)
    assert (caught.value.path, caught.value.offset) == (str(last), 0)
    assert "LSN 5 was expected" in str(caught.value)


def test_a_misnamed_segment_is_refused(tmp_path: Path) -> None:
    with WriteAheadLog(tmp_path, files=NO_SYNC) as log:
        fill(log, 3)
    path = segment_files(tmp_path)[0]
    path.rename(tmp_path / segment_name(2))
    with pytest.raises(CorruptLog, match="LSN 1 where LSN 2 was expected"):
        WriteAheadLog(tmp_path)


def test_inspect_log_reports_a_clean_log(tmp_path: Path) -> None:
    make_three_segments(tmp_path)
    (tmp_path / "notes.txt").write_text("not a segment")
    report = inspect_log(tmp_path)
    assert report.ok and report.torn_tail is None and report.damage is None
    assert (report.records, report.first_lsn, report.last_lsn) == (12, 1, 12)
    assert [s.first_lsn for s in report.segments] == [1, 5, 9]
    assert "3 segment(s), 12 record(s), LSN 1 to 12" in report.sentences()[0]
    empty = inspect_log(tmp_path / "missing")
    assert empty.ok and empty.records == 0 and empty.first_lsn is None


# --- retention --------------------------------------------------------------------------------


def test_remove_through_drops_closed_segments_and_older_reads_are_gone(tmp_path: Path) -> None:
    with WriteAheadLog(tmp_path, segment_bytes=200) as log:
        payloads = fill(log, 12)
        assert log.remove_through(3) == 0  # segment 1..4 still holds LSN 4
        assert log.remove_through(6) == 4 * FRAME
        assert log.oldest_lsn == 5
        assert [p.name for p in segment_files(tmp_path)] == [segment_name(5), segment_name(9)]
        assert log.total_bytes == 8 * FRAME
        with pytest.raises(Gone) as caught:
            log.read(3)
        assert caught.value.gone_before == 5
        assert "LSN 5" in str(caught.value)
        assert list(log.read(4)) == list(enumerate(payloads[4:], start=5))
        assert list(log.read(0)) == list(enumerate(payloads[4:], start=5))
        # The active segment is never removed, even when every record is covered.
        assert log.remove_through(12) == 4 * FRAME
        assert [s.first_lsn for s in log.segments()] == [9]
        assert log.oldest_lsn == 9
        fill(log, 3)  # a running sum: appends after removals count on from what is left
        assert log.total_bytes == sum(s.size for s in log.segments()) == 7 * FRAME
    with WriteAheadLog(tmp_path, segment_bytes=200) as log:
        assert (log.oldest_lsn, log.last_lsn) == (9, 15)
        with pytest.raises(Gone):
            log.read(7)


def test_remove_through_keeps_records_that_are_not_durable(tmp_path: Path) -> None:
    with WriteAheadLog(tmp_path, segment_bytes=200, files=NO_SYNC) as log:
        for i in range(1, 10):
            log.append(payload_of(i))
        assert log.remove_through(9) == 0  # nothing durable yet
        log.wait_durable(9)
        assert log.remove_through(9) == 8 * FRAME


def test_a_segment_removed_while_a_read_is_open_raises_gone(tmp_path: Path) -> None:
    with WriteAheadLog(tmp_path, segment_bytes=200, files=NO_SYNC) as log:
        fill(log, 12)
        records = log.read(0)
        assert next(records)[0] == 1  # segment 1 is open and stays readable
        later = log.read(5)
        log.remove_through(8)
        with pytest.raises(Gone) as caught:
            list(later)
        assert caught.value.gone_before == 9
        # The open segment is still read to its end; the next one is gone.
        seen = []
        with pytest.raises(Gone):
            for lsn, _ in records:
                seen.append(lsn)
        assert seen == [2, 3, 4]


# --- closing ----------------------------------------------------------------------------------


def test_close_flushes_is_idempotent_and_stops_appends(tmp_path: Path) -> None:
    log = WriteAheadLog(tmp_path)
    log.append(b"a")
    log.append(b"b")
    log.close()
    assert log.durable_lsn == 2
    log.close()
    with pytest.raises(WritesStopped, match="closed"):
        log.append(b"c")
    assert list(log.read(0)) == [(1, b"a"), (2, b"b")]
    with WriteAheadLog(tmp_path) as reopened:
        assert reopened.last_lsn == 2


# --- the recovery property --------------------------------------------------------------------

_steps = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 300), st.booleans()),
        # A crash: what is not durable may be cut at any point, garbage zeros may follow, and a
        # last segment holding no durable record may not exist at all.
        st.tuples(st.just("crash"), st.floats(0, 1), st.integers(0, 40), st.booleans()),
    ),
    max_size=40,
)


def _crash(
    directory: Path, appended: list[bytes], durable: int, cut: float, zeros: int, drop: bool
) -> None:
    files = segment_files(directory)
    if not files:
        return
    last = files[-1]
    first_lsn = int(last.name[:20])
    if drop and durable < first_lsn and len(files) > 1:
        last.unlink()
        return
    keep = sum(HEADER_SIZE + len(appended[lsn - 1]) for lsn in range(first_lsn, durable + 1))
    size = last.stat().st_size
    end = keep + int(cut * (size - keep))
    # Zeros after a cut frame end it short of its length: a torn write. Enough zeros to fill
    # it out would make it a whole frame that fails its checksum, which is damage by rule
    # (spec/changes.md, "Damage and recovery"; tests/engine/test_corruption.py).
    frame_start = keep
    for lsn in range(max(durable + 1, first_lsn), len(appended) + 1):
        frame_end = frame_start + HEADER_SIZE + len(appended[lsn - 1])
        if frame_start < end < frame_end:
            zeros = min(zeros, frame_end - end - 1)
            break
        frame_start = frame_end
    with open(last, "r+b") as file:
        file.truncate(end)
        file.seek(0, os.SEEK_END)
        file.write(bytes(zeros))


def _check_prefix(log: WriteAheadLog, appended: list[bytes], durable: int) -> int:
    recovered = list(log.read(0))
    assert [lsn for lsn, _ in recovered] == list(range(1, len(recovered) + 1))
    assert [p for _, p in recovered] == appended[: len(recovered)]
    assert len(recovered) >= durable
    assert log.last_lsn == log.durable_lsn == len(recovered)
    return len(recovered)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(segment_bytes=st.sampled_from([1, 64, 200, 1000, 1 << 20]), steps=_steps)
def test_recovery_keeps_exactly_a_prefix_holding_everything_durable(
    segment_bytes: int, steps: list[tuple]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "log"
        log = WriteAheadLog(directory, segment_bytes=segment_bytes, files=NO_SYNC)
        appended: list[bytes] = []
        durable = 0
        for step in steps:
            if step[0] == "append":
                _, size, wait = step
                payload = payload_of(len(appended) + 1, size)
                assert log.append(payload) == len(appended) + 1
                appended.append(payload)
                if wait:
                    log.wait_durable(len(appended))
                    durable = len(appended)
            else:
                _, cut, zeros, drop = step
                log.close()
                _crash(directory, appended, durable, cut, zeros, drop)
                log = WriteAheadLog(directory, segment_bytes=segment_bytes, files=NO_SYNC)
                durable = _check_prefix(log, appended, durable)
                del appended[durable:]
        log.close()
        log = WriteAheadLog(directory, segment_bytes=segment_bytes, files=NO_SYNC)
        assert log.recovery_messages == []
        assert _check_prefix(log, appended, len(appended)) == len(appended)
        log.close()
