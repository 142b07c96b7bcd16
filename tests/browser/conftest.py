"""Headless Chromium driven over the DevTools protocol, with nothing but the standard library.

Chromium is started with `--remote-debugging-port=0`; the port it took is read from the
`DevToolsActivePort` file in its profile folder, and the protocol is spoken over a small
WebSocket client (RFC 6455: masked text frames out, text/continuation/ping/close in).
The tests are skipped, with the reason, only when no Chromium binary is found.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.site import Site

START_TIMEOUT = 30.0
BINARIES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


def find_chromium() -> str | None:
    wanted = os.environ.get("CHROMIUM")
    if wanted and shutil.which(wanted):
        return shutil.which(wanted)
    for name in BINARIES:
        found = shutil.which(name)
        if found:
            return found
    return None


class WebSocket:
    """A minimal client WebSocket over a plain TCP connection (loopback only)."""

    def __init__(self, host: str, port: int, path: str, timeout: float = 30.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        request = (
            f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n"
        )
        self.sock.sendall(request.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError(f"the DevTools socket closed during the handshake: {head!r}")
            head += chunk
        status, _, rest = head.partition(b"\r\n\r\n")
        if b" 101 " not in status.split(b"\r\n")[0]:
            raise ConnectionError(f"the DevTools socket refused the upgrade: {status!r}")
        self.buffer = rest

    def _read(self, count: int) -> bytes:
        while len(self.buffer) < count:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("the DevTools socket closed")
            self.buffer += chunk
        data, self.buffer = self.buffer[:count], self.buffer[count:]
        return data

    def _send_frame(self, opcode: int, payload: bytes) -> None:
        mask = os.urandom(4)
        length = len(payload)
        if length < 126:
            head = struct.pack("!BB", 0x80 | opcode, 0x80 | length)
        elif length < 1 << 16:
            head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, length)
        else:
            head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, length)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(head + mask + masked)

    def send(self, text: str) -> None:
        self._send_frame(0x1, text.encode("utf-8"))

    def receive(self) -> str:
        """The next whole text message; pings are answered on the way."""
        parts: list[bytes] = []
        while True:
            first, second = self._read(2)
            opcode, length = first & 0x0F, second & 0x7F
            if length == 126:
                (length,) = struct.unpack("!H", self._read(2))
            elif length == 127:
                (length,) = struct.unpack("!Q", self._read(8))
            mask = self._read(4) if second & 0x80 else None
            payload = self._read(length)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            if opcode == 0x8:
                raise ConnectionError("the DevTools socket was closed by the browser")
            if opcode == 0x9:
                self._send_frame(0xA, payload)
                continue
            if opcode in (0x1, 0x2, 0x0):
                parts.append(payload)
                if first & 0x80:
                    return b"".join(parts).decode("utf-8")

    def close(self) -> None:
        try:
            self._send_frame(0x8, b"")
        except OSError:
            pass
        self.sock.close()


class Page:
    """One tab, reached through a flattened DevTools session of the browser connection."""

    def __init__(self, browser: Browser, session_id: str) -> None:
        self.browser = browser
        self.session_id = session_id

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        return self.browser.call(method, session_id=self.session_id, **params)

    def navigate(self, url: str) -> None:
        self.call("Page.enable")
        self.call("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete'", timeout=30)

    def evaluate(self, expression: str) -> Any:
        answer = self.call(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in answer:
            raise AssertionError(f"the page threw: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    def wait_for(self, expression: str, timeout: float) -> Any:
        """Evaluate until the value is truthy; the last value when the time is up."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value or time.monotonic() > deadline:
                return value
            time.sleep(0.1)


class Browser:
    def __init__(self, binary: str, profile: Path) -> None:
        profile.mkdir(parents=True, exist_ok=True)
        self.log = profile.parent / "chromium.log"
        self.process = subprocess.Popen(
            [
                binary,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-dev-shm-usage",
                f"--user-data-dir={profile}",
                "--remote-debugging-port=0",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=self.log.open("wb"),
        )
        active = profile / "DevToolsActivePort"
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"chromium exited: {self.log.read_text()[-2000:]}")
            lines = active.read_text().split("\n") if active.exists() else []
            if len(lines) >= 2 and lines[0].strip() and lines[1].strip():
                break
            if time.monotonic() > deadline:
                self.process.kill()
                raise RuntimeError(f"chromium did not open DevTools: {self.log.read_text()}")
            time.sleep(0.05)
        self.socket = WebSocket("127.0.0.1", int(lines[0]), lines[1].strip())
        self.next_id = 0

    def call(self, method: str, session_id: str | None = None, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params}
        if session_id is not None:
            message["sessionId"] = session_id
        self.socket.send(json.dumps(message))
        while True:  # events and other answers are skipped: calls are made one at a time
            answer = json.loads(self.socket.receive())
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise AssertionError(f"DevTools {method} failed: {answer['error']}")
                return answer.get("result", {})

    def new_page(self) -> Page:
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        return Page(self, session)

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (OSError, ConnectionError, AssertionError):
            pass
        self.socket.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "browser: headless Chromium tests (short: they run by default)"
    )


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    binary = find_chromium()
    if binary is None:
        pytest.skip("no Chromium binary found (chromium, chromium-browser or google-chrome)")
    running = Browser(binary, tmp_path_factory.mktemp("chromium") / "profile")
    try:
        yield running
    finally:
        running.close()


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    """A server for the test, with a static folder for its pages (`tests.browser.site`)."""
    with Site(tmp_path) as running:
        yield running
