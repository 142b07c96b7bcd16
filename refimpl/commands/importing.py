"""`refimpl import FILE --table t`: a CSV file through `POST /imp`, streamed, with progress.

On a server (`--url`) the file goes over HTTP; on a data folder (`--data`) through the same
route of an application in this process, so both check and answer the same way. The file is
read in blocks as it is sent, never whole; one import is one transaction, all or nothing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO, Any

import requests
from werkzeug.test import EnvironBuilder, run_wsgi_app

from refimpl.engine.progress import Progress, ProgressReport
from refimpl.errors import BadRequest, Unavailable

BLOCK = 256 * 1024  # bytes read from the file at once
TIMEOUT_SECONDS = 3600.0


class ProgressReader:
    """A file read by whoever sends it, reporting the bytes read so far."""

    def __init__(self, file: IO[bytes], size: int, task: str, report: ProgressReport) -> None:
        self._file = file
        self._size = size
        self._task = task
        self._report = report
        self._done = 0

    def __len__(self) -> int:  # lets requests send a Content-Length (413 comes before)
        return self._size

    def read(self, size: int = -1) -> bytes:
        data = self._file.read(BLOCK if size is None or size < 0 else min(size, BLOCK))
        self._done += len(data)
        self._report(Progress(self._task, self._done, self._size, "bytes"))
        return data


def import_to_server(
    file: Path, table: str, url: str, token: str | None, database: str, report: ProgressReport
) -> dict[str, Any]:
    """POST the file to `url`/imp; the server's JSON answer, or KdbError with its error."""
    headers = {"Content-Type": "text/csv"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    with _open(file) as stream:
        reader = ProgressReader(stream, os.fstat(stream.fileno()).st_size, _task(file), report)
        try:
            response = requests.post(
                f"{url.rstrip('/')}/imp",
                params={"table": table, "db": database},
                data=reader,
                headers=headers,
                timeout=TIMEOUT_SECONDS,
            )
        except requests.RequestException as exc:
            raise Unavailable(f"cannot reach {url}: {exc}") from None
    return _answer(response.status_code, response.content)


def import_to_folder(
    file: Path, table: str, data: Path, database: str, report: ProgressReport
) -> dict[str, Any]:
    """The file through `/imp` of an application over the data folder, as the admin."""
    from refimpl.engine.instance import Instance
    from refimpl.http.app import App, AppOptions

    with _open(file) as stream:
        size = os.fstat(stream.fileno()).st_size
        instance = Instance.open(data)
        try:
            app = App(instance, AppOptions(dev=True, max_body_bytes=max(size + 1, 1 << 20)))
            environ = EnvironBuilder(
                path="/imp",
                method="POST",
                query_string={"table": table, "db": database},
                content_type="text/csv",
            ).get_environ()
            environ["wsgi.input"] = ProgressReader(stream, size, _task(file), report)
            environ["CONTENT_LENGTH"] = str(size)
            try:
                # A WSGI caller of our own: a parked answer (the flush) is waited for here.
                body, status, _ = run_wsgi_app(app, environ, buffered=True)
            finally:
                app.begin_shutdown()
        finally:
            instance.close()
    return _answer(int(status.split()[0]), b"".join(body))


def _task(file: Path) -> str:
    return f"importing {file.name}"


def _open(file: Path) -> IO[bytes]:
    try:
        return file.open("rb")
    except OSError as exc:
        raise BadRequest(f"cannot read {file}: {exc.strerror}") from None


def _answer(status: int, content: bytes) -> dict[str, Any]:
    try:
        body = json.loads(content)
    except ValueError:
        raise Unavailable(f"the server answered {status} without JSON") from None
    if status >= 400:
        error = str(body.get("error", f"the import failed with status {status}"))
        raise (BadRequest(error) if status < 500 else Unavailable(error))
    return body
