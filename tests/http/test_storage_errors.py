"""Storage failures over HTTP: a clear 503 that changes nothing, and damage that stops the start.

A real server on loopback, real clients. The disk's failure is staged in the file system, not
mocked: a folder where a temporary file must be written makes creating that file fail (EISDIR),
as a full or failing disk would at the same step.

- DROP TOKEN and REVOKE whose access file cannot be saved answer 503 with a JSON error, the
  server still answers /health, the token still works and the grant still holds, also after a
  restart; once the disk is sound the same statement works and lasts.
- CHECKPOINT that cannot write its file answers 503 and leaves no file behind; the log goes on.
- A flipped bit in the last log frame stops the start, naming file, offset and the LSN lost and
  the command past it; `refimpl check --cut-damaged-log` moves it aside and the server starts.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from refimpl.engine.storage.wal_segments import HEADER
from tests.http.conftest import Server, _clean_environment, start_server

HEALTH_SECONDS = 2.0  # a generous liveness bound


def assert_alive(server: Server) -> None:
    assert requests.get(server.url + "/health", timeout=HEALTH_SECONDS).status_code == 200


def assert_503(response: requests.Response, *words: str) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["Content-Type"].startswith("application/json")
    message = response.json()["error"]
    for word in words:
        assert word in message, message
    assert "Traceback" not in response.text


def restart(server: Server) -> Server:
    assert server.stop() == 0, server.log.read_text()[-3000:]
    again = start_server(server.data)
    again.token = server.token
    return again


@pytest.fixture
def fresh(tmp_path: Path):
    running = start_server(tmp_path / "data")
    servers = [running]
    yield running, servers
    for server in servers:
        server.stop()
    for server in servers:
        assert "Traceback" not in server.log.read_text(), server.log.read_text()[-3000:]


def test_token_drop_and_revoke_that_cannot_be_saved_answer_503_and_change_nothing(fresh):
    server, servers = fresh
    server.sql("CREATE TABLE t (id INT)")
    server.sql("INSERT INTO t VALUES (1)")
    server.sql("CREATE USER u")
    token = server.new_token("u")
    server.sql("GRANT READ ON DATABASE demo TO u")
    blocker = server.data / ".access.json.tmp"
    blocker.mkdir()  # the access file's temporary file cannot be written now

    assert_503(server.exec(f"DROP TOKEN '{token}'"), "access file", "nothing was changed")
    assert_alive(server)
    assert_503(server.exec("REVOKE READ ON DATABASE demo FROM u"), "could not be saved")
    assert server.rows("SELECT * FROM t", token=token) == [[1]]  # token and grant hold

    server = restart(server)
    servers.append(server)
    assert server.rows("SELECT * FROM t", token=token) == [[1]]  # on disk too

    blocker.rmdir()
    server.sql("REVOKE READ ON DATABASE demo FROM u")
    server.sql(f"DROP TOKEN '{token}'")
    assert server.exec("SELECT * FROM t", token=token).status_code == 401
    server = restart(server)
    servers.append(server)
    assert server.exec("SELECT * FROM t", token=token).status_code == 401


def test_checkpoint_that_cannot_be_written_answers_503_and_leaves_no_file(fresh):
    server, _servers = fresh
    server.sql("CREATE TABLE t (id INT)")
    server.sql("INSERT INTO t VALUES (1)")
    folder = server.data / "demo" / "checkpoints"
    lsn = 2  # CREATE TABLE, INSERT
    blocker = folder / f"checkpoint-{lsn:020d}.kdb.tmp"
    blocker.mkdir(parents=True)
    assert_503(server.exec("CHECKPOINT"), "checkpoint", "CHECKPOINT again")
    assert_alive(server)
    assert sorted(p.name for p in folder.iterdir()) == [blocker.name]  # no file of it left
    blocker.rmdir()
    server.sql("INSERT INTO t VALUES (2)")
    assert server.sql("CHECKPOINT")["message"] == "checkpoint written at LSN 3"
    assert server.rows("SELECT * FROM t") == [[1], [2]]


def test_a_flipped_bit_in_the_last_frame_stops_the_start_until_cut_aside(tmp_path):
    data = tmp_path / "data"
    server = start_server(data)
    server.sql("CREATE TABLE t (id INT)")
    server.sql("INSERT INTO t VALUES (1)")
    server.sql("INSERT INTO t VALUES (2)")  # LSN 3, the last acknowledged commit
    token = server.token
    assert server.stop() == 0
    (segment,) = sorted((data / "demo" / "wal").glob("*.wal"))
    frames = segment.read_bytes()
    offset = 0
    for _ in range(2):
        offset += HEADER.size + HEADER.unpack_from(frames, offset)[0]
    damaged = bytearray(frames)
    damaged[offset + HEADER.size + 1] ^= 0x10
    segment.write_bytes(bytes(damaged))

    with pytest.raises(RuntimeError) as caught:
        start_server(data)
    said = str(caught.value)
    for words in (str(segment), f"at offset {offset}", "LSN 3", "--cut-damaged-log"):
        assert words in said, said
    assert "Traceback" not in said

    check = [sys.executable, "-m", "refimpl", "check", "--data", str(data)]
    run = subprocess.run(check, capture_output=True, text=True, env=_clean_environment())
    assert run.returncode == 1 and "state: DAMAGED" in run.stdout, run.stdout
    run = subprocess.run(
        [*check, "--cut-damaged-log"], capture_output=True, text=True, env=_clean_environment()
    )
    assert run.returncode == 0 and "LSN 3 lost" in run.stdout, run.stdout + run.stderr

    server = start_server(data)
    server.token = token
    try:
        assert server.rows("SELECT * FROM t") == [[1]]
    finally:
        server.stop()
    shutil.rmtree(data / "demo" / "damaged")
