"""A keep-alive HTTP/1.1 client cheap enough for the load generators (`LeanHTTP`)."""

from __future__ import annotations

import socket


class LeanHTTP:
    """One keep-alive HTTP/1.1 connection: a request out, the whole answer in, nothing more.

    The load generators share the benchmark machine with the server. `requests` spends about
    0.3 ms of CPU on each small request (more than a point SELECT costs the server), which
    PostgreSQL's clients do not pay; this client spends a few tens of microseconds, so the
    figures measure the server rather than the client. It reads `Content-Length` and chunked
    bodies, and reconnects when the server closed the connection.
    """

    def __init__(self, url: str, headers: dict[str, str] | None = None) -> None:
        rest = url.split("://", 1)[1].rstrip("/")
        host, _, port = rest.partition(":")
        self.address = (host, int(port or 80))
        self.fixed = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        self.sock: socket.socket | None = None
        self.buffer = b""

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(self.address, timeout=120)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock, self.buffer = sock, b""
        return sock

    def request(
        self,
        method: str,
        target: str,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        """Send one request; (status, lower-cased headers, body)."""
        extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        head = (
            f"{method} {target} HTTP/1.1\r\nHost: {self.address[0]}\r\n{self.fixed}{extra}"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode("latin-1")
        for attempt in (0, 1):
            sock = self.sock or self._connect()
            try:
                sock.sendall(head + body)
                return self._read_answer(sock)
            except (ConnectionError, EOFError):
                self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def _fill(self, sock: socket.socket) -> None:
        chunk = sock.recv(262144)
        if not chunk:
            raise EOFError("the server closed the connection")
        self.buffer += chunk

    def _read_answer(self, sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
        while b"\r\n\r\n" not in self.buffer:
            self._fill(sock)
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if "content-length" in headers:
            size = int(headers["content-length"])
            while len(self.buffer) < size:
                self._fill(sock)
            body, self.buffer = self.buffer[:size], self.buffer[size:]
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            parts = []
            while True:
                while b"\r\n" not in self.buffer:
                    self._fill(sock)
                chunk_head, _, self.buffer = self.buffer.partition(b"\r\n")
                size = int(chunk_head.split(b";")[0], 16)
                while len(self.buffer) < size + 2:
                    self._fill(sock)
                parts.append(self.buffer[:size])
                self.buffer = self.buffer[size + 2 :]
                if size == 0:
                    break
            body = b"".join(parts)
        else:
            raise ValueError("an answer without Content-Length or chunked encoding")
        if headers.get("connection", "").lower() == "close":
            self.close()
        return status, headers, body

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
        self.sock, self.buffer = None, b""
