"""Hostile HTTP requests over raw sockets and what an answer to one must be: `send` writes a
request on a connection of its own (a pipelined `GET /health` behind it, then a half-close)
and returns the statuses with the problems found; `framing_cases` and `parameter_cases` are
the fixed cases and `raw_requests` generates a mix of them. tests/http/test_hostile_fuzz.py
says what must hold; tools/fuzz_sql.py --requests N runs the mix for longer.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from urllib.parse import quote

from hypothesis import strategies as st

from tests.http.fuzz_judge import Target

WAIT = 10.0  # seconds a half-closed request may take to be answered

INSERT = b"INSERT INTO t (id) VALUES (7)"
FOLLOW_UP = b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n"

NUMBERS = [
    "9" * 5000, "0" * 5000 + "1", "\u00b2", "\u0663", "\uff11", "1_000", "0x10", "-1", " 1",
    "+1", "1e3", "1.5", "NaN", "inf", "", "%00", "%ff%fe", "\xff", "99999999999999999999",
    "-99999999999999999999", "1\x00",
]  # fmt: skip
NUMERIC_PARAMETERS = {
    "/api/changes": ["from", "limit", "wait"],
    "/api/subscribe": ["wait", "id"],
    "/write": ["precision"],
}
PATHS = [
    "/exec",
    "/exp",
    "/imp",
    "/write",
    "/api/changes",
    "/api/rev",
    "/api/subscribe",
    "/health",
    "/api/stats",
    "/openapi.json",
    "/api/session",
    "/nope",
    "*",
    "//exec",
    "/exec/../health",
    "/%2e%2e/exec",
    "/ex%00ec",
    "/%ff",
    "http://localhost/exec",
    "/exec#frag",
    "/exec?",
    "/exec?&&",
    "/exec?db",
]
VERSIONS = [
    "HTTP/1.1",
    "HTTP/1.0",
    "HTTP/0.9",
    "HTTP/2.0",
    "HTTP/1.2",
    "HTTP/11",
    "http/1.1",
    "HTTP/1.1 x",
    "HTTP/1.01",
    "HTTP/9.9",
    "HTTP/",
]
METHODS = [
    "GET",
    "POST",
    "get",
    "PUT",
    "DELETE",
    "HEAD",
    "OPTIONS",
    "TRACE",
    "CONNECT",
    "PRI",
    "G\x00T",
    "POST POST",
    "",
    "X" * 1000,
]
ODD_HEADERS = [
    "X-A: a\x00b", "X-A: a\x01", "X-A: \x7f", "X\x00A: b", "X-A: a\rb", "X-A: a\r\n b",
    "Nonsense", "X A: b", ": empty name", "X-A:" + "v" * 70_000, "Host: localhost\x00evil",
    "Host: evil.example", "Host:", "Expect: 100-continue", "Expect: nonsense",
    "Connection: close, keep-alive", "Connection: upgrade", "Upgrade: h2c", "Accept: text/html",
    "Content-Type: application/x-www-form-urlencoded", "Content-Type: multipart/form-data",
    "Content-Type: text/plain; charset=latin-1", "Authorization: Bearer", "Authorization: x",
    "Authorization: Bearer " + "k" * 10_000, "Cookie: kdb_session=" + "%ff" * 100,
]  # fmt: skip


@dataclass
class Exchange:
    """What a server answered on one connection: each answer's status, headers and body."""

    answers: list[tuple[int, dict[str, str], bytes]]
    problem: str = ""
    head_first: bool = False  # the first answer is to a HEAD request: no body to judge


def read_answers(data: bytes, head_first: bool) -> list[tuple[int, dict[str, str], bytes]]:
    """Split the bytes of a connection into answers (Content-Length bodies; the server sends
    no chunked answer to these requests). The answer to a HEAD request has no body."""
    answers: list[tuple[int, dict[str, str], bytes]] = []
    while data:
        head, separator, rest = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if (
            not separator
            or len(parts) < 2
            or not parts[0].startswith("HTTP/")
            or not parts[1].isdigit()
        ):
            answers.append((-1, {}, data[:200]))  # not HTTP: reported as such
            break
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length") or 0)
        if head_first and not answers and rest[:5] in (b"", b"HTTP/"):
            length = 0  # what a HEAD answer announces is not sent (unless the server sent it)
        answers.append((int(parts[1]), headers, rest[:length]))
        data = rest[length:]
    return answers


def exchange(address: tuple[str, int], data: bytes) -> Exchange:
    head_first = data.startswith(b"HEAD ")
    with socket.create_connection(address, timeout=WAIT) as sock:
        try:
            sock.sendall(data + FOLLOW_UP)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server answered and closed before reading it all: read its answer
        received: list[bytes] = []
        while True:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                return Exchange(
                    read_answers(b"".join(received), head_first),
                    f"no end of the answers {WAIT} s after the request ended",
                    head_first,
                )
            except OSError as error:  # a reset: keep what came before it
                problem = "" if received else f"the connection was reset without an answer: {error}"
                return Exchange(read_answers(b"".join(received), head_first), problem, head_first)
            if not chunk:
                break
            received.append(chunk)
    return Exchange(read_answers(b"".join(received), head_first), head_first=head_first)


def problems_of(result: Exchange) -> list[str]:
    problems = [result.problem] if result.problem else []
    if not result.answers:
        problems.append("the connection closed without an answer")
    for index, (status, headers, body) in enumerate(result.answers):
        if index == 0 and result.head_first and 400 <= status < 500:
            continue
        if status == -1:
            problems.append(f"not an HTTP answer: {body!r}")
        elif status >= 500 and not (status == 503 and "retry-after" in headers):
            problems.append(f"{status}: {body[:300]!r}")
        elif status >= 400 and not headers.get("content-type", "").startswith("application/json"):
            problems.append(f"{status} with content type {headers.get('content-type')!r}")
        elif status >= 400 and b'"error"' not in body:
            problems.append(f"{status} without an error sentence: {body[:300]!r}")
    return problems


def send(target: Target, data: bytes) -> tuple[list[int], list[str]]:
    """Send one raw request (and the follow-up); the statuses and what went wrong."""
    host, port = target.url.removeprefix("http://").rsplit(":", 1)
    result = exchange((host, int(port)), data)
    problems = problems_of(result)
    statuses = [status for status, _, _ in result.answers]
    if not target.alive():
        return statuses, [*problems, "/health did not answer within 2 s"]
    problems += [f"server log: {line}" for line in target.new_log_lines()]
    after = target.snapshot()
    refused = not statuses or statuses[0] >= 300 or statuses[0] < 0
    if refused and after != target.state:
        problems.append("a refused request committed")
    target.state = after
    return statuses, problems


# ---------------------------------------------------------------------------------------
# Requests
# ---------------------------------------------------------------------------------------


def head(
    target: Target,
    method: str = "POST",
    path: str = "",
    version: str = "HTTP/1.1",
    headers: tuple[str, ...] = (),
    host: bool = True,
    auth: bool = True,
) -> bytes:
    path = path or f"/exec?db={target.database}"
    lines = [f"{method} {path} {version}".rstrip(" ")]
    if host:
        lines.append("Host: localhost")
    if auth:
        lines.append(f"Authorization: Bearer {target.token}")
    lines += headers
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace")


def framing_cases(target: Target) -> dict[str, bytes]:
    """One request for each framing trick, each with an INSERT as its body."""
    n = len(INSERT)
    chunk = f"{n:x}\r\n".encode() + INSERT + b"\r\n0\r\n\r\n"
    te = "Transfer-Encoding: chunked"

    def post(*headers: str, **options: object) -> bytes:
        return head(target, headers=headers, **options)  # type: ignore[arg-type]

    cases = {
        "chunked": post(te) + chunk,
        "chunk extension": post(te) + f"{n:x};name=value\r\n".encode() + INSERT + b"\r\n0\r\n\r\n",
        "bare chunk extension": post(te) + f"{n:x};\r\n".encode() + INSERT + b"\r\n0\r\n\r\n",
        "huge chunk extension": post(te)
        + f"{n:x};x={'e' * 100_000}\r\n".encode()
        + INSERT
        + b"\r\n0\r\n\r\n",
        "chunk extension with control bytes": post(te)
        + f"{n:x};a=\x01\x7f\r\n".encode()
        + INSERT
        + b"\r\n0\r\n\r\n",
        "trailer fields": post(te) + f"{n:x}\r\n".encode() + INSERT + b"\r\n0\r\nX-T: 1\r\n\r\n",
        "LF-only chunks": post(te) + f"{n:x}\n".encode() + INSERT + b"\n0\n\n",
        "chunk without its CRLF": post(te) + f"{n:x}\r\n".encode() + INSERT + b"0\r\n\r\n",
        "no last chunk": post(te) + f"{n:x}\r\n".encode() + INSERT + b"\r\n",
        "chunk longer than its data": post(te) + f"{n + 50:x}\r\n".encode() + INSERT + b"\r\n",
        "chunk shorter than its data": post(te)
        + f"{n - 5:x}\r\n".encode()
        + INSERT
        + b"\r\n0\r\n\r\n",
    }
    for size in ["zz", "-1", "+1d", " 1d", "0x1d", "1d ", "f" * 20, "", "1" * 5000, "\u00b2"]:
        cases[f"chunk size {size[:20]!r}"] = (
            post(te) + f"{size}\r\n".encode() + INSERT + b"\r\n0\r\n\r\n"
        )
    for value in [
        "chunked, chunked",
        "gzip, chunked",
        "chunked, gzip",
        "identity",
        "gzip",
        "x",
        "Chunked",
        " chunked",
        "chunked\x0b",
        "chunked;q=1",
        "",
    ]:
        cases[f"Transfer-Encoding {value!r}"] = post(f"Transfer-Encoding: {value}") + chunk
    cases["two Transfer-Encoding headers"] = post(te, "Transfer-Encoding: gzip") + chunk
    cases["Transfer-Encoding and Content-Length"] = post(te, f"Content-Length: {n}") + chunk
    cases["Transfer-Encoding with a space before the colon"] = (
        post("Transfer-Encoding : chunked") + chunk
    )
    cases["Transfer_Encoding"] = post("Transfer_Encoding: chunked") + chunk
    cases["Transfer-Encoding on HTTP/1.0"] = post(te, version="HTTP/1.0") + chunk
    for value in [
        f"{n}, {n}",
        f"{n},{n + 1}",
        "-1",
        f"+{n}",
        f"0x{n:x}",
        f" {n} ",
        f"{n}abc",
        "99999999999999999999",
        "",
        "1e2",
        "\u0662\u0669",
        "9" * 5000,
        str(n + 10),
        str(n - 5),
    ]:
        cases[f"Content-Length {value[:20]!r}"] = post(f"Content-Length: {value}") + INSERT
    cases["two equal Content-Length"] = (
        post(f"Content-Length: {n}", f"Content-Length: {n}") + INSERT
    )
    cases["two different Content-Length"] = (
        post(f"Content-Length: {n}", f"Content-Length: {n - 5}") + INSERT
    )
    cases["a body without a length"] = post() + INSERT
    cases["HTTP/0.9"] = b"GET /health\r\n"
    cases["HTTP/0.9 with a body"] = b"POST /exec\r\n\r\n" + INSERT
    for version in VERSIONS[1:]:
        cases[f"version {version!r}"] = post(f"Content-Length: {n}", version=version) + INSERT
    for method in METHODS:
        cases[f"method {method[:20]!r}"] = post(f"Content-Length: {n}", method=method) + INSERT
    cases["no Host"] = post(f"Content-Length: {n}", host=False) + INSERT
    cases["two Host"] = post(f"Content-Length: {n}", "Host: other") + INSERT
    for header in ODD_HEADERS:
        cases[f"header {header[:30]!r}"] = post(f"Content-Length: {n}", header) + INSERT
    cases["200 headers"] = (
        post(f"Content-Length: {n}", *[f"X-{i}: {i}" for i in range(200)]) + INSERT
    )
    cases["a 300 KB head"] = (
        post(f"Content-Length: {n}", *[f"X-{i}: {'h' * 1000}" for i in range(300)]) + INSERT
    )
    cases["a 70,000-byte request line"] = head(target, path="/exec?query=" + "1" * 70_000)
    cases["a bare CR line end"] = head(target).replace(b"\r\n", b"\r", 1)
    cases["a request line of spaces"] = b"   \r\n\r\n"
    cases["binary"] = bytes(range(256))
    cases["TLS hello"] = bytes.fromhex("16030100a5010000a10303") + b"\x00" * 100
    return cases


def parameter_cases(target: Target) -> dict[str, bytes]:
    """Query strings with hostile numbers, bad UTF-8 and unknown or repeated names."""
    db = target.database
    cases = {}
    for path, names in NUMERIC_PARAMETERS.items():
        for name in names:
            for number in NUMBERS:
                query = f"db={db}&table=t&{name}={quote(number, safe='%')}"
                if path == "/api/subscribe":
                    query += "&query=" + quote("SELECT * FROM t")
                method = "POST" if path == "/write" else "GET"
                body = b"t id=7i\n" if path == "/write" else b""
                extra = (f"Content-Length: {len(body)}",) if body else ()
                cases[f"{path} {name}={number[:12]!r}"] = (
                    head(target, method, f"{path}?{query}", headers=extra) + body
                )
    for raw in ["%ff%fe", "%c0%af", "%ed%a0%80", "\xff", "%00", "%e2%82"]:
        cases[f"bad UTF-8 {raw!r} in SQL"] = head(target, "GET", f"/exec?db={db}&query={raw}")
        cases[f"bad UTF-8 {raw!r} in db"] = head(target, "GET", f"/exec?db={raw}&query=SELECT+1")
        cases[f"bad UTF-8 {raw!r} in a name"] = head(target, "GET", f"/exec?db={db}&{raw}=1")
    bad = b"INSERT INTO t (s) VALUES ('\xff\xfe')"
    cases["bad UTF-8 body"] = head(target, headers=(f"Content-Length: {len(bad)}",)) + bad
    cases["unknown parameter"] = head(target, "GET", f"/exec?db={db}&query=SELECT+1&nope=1")
    cases["repeated parameter"] = head(target, "GET", f"/exec?db={db}&db={db}&query=SELECT+1")
    cases["1,000 parameters"] = head(
        target, "GET", f"/exec?db={db}&" + "&".join(f"p{i}=1" for i in range(1000))
    )
    cases["SQL in the query and the body"] = (
        head(
            target,
            "POST",
            f"/exec?db={db}&query=SELECT+1",
            headers=(f"Content-Length: {len(INSERT)}",),
        )
        + INSERT
    )
    return cases


# ---------------------------------------------------------------------------------------
# Generated mixes
# ---------------------------------------------------------------------------------------


@st.composite
def raw_requests(draw: st.DrawFn, target: Target) -> bytes:
    """A request assembled from hostile pieces: method, target, version, headers, framing."""
    path = draw(st.sampled_from(PATHS))
    params = draw(
        st.lists(
            st.tuples(
                st.sampled_from(
                    [
                        "db",
                        "query",
                        "table",
                        "from",
                        "limit",
                        "wait",
                        "format",
                        "id",
                        "precision",
                        "symbol",
                        "column",
                        "nope",
                        "",
                        "\xff",
                    ]
                ),
                st.sampled_from([target.database, "t", "SELECT * FROM t", "csv", "json", *NUMBERS]),
            ),
            max_size=4,
        )
    )
    if params and "?" not in path and path.startswith("/"):
        path += "?" + "&".join(f"{quote(k, safe='%')}={quote(v, safe='%')}" for k, v in params)
    version = draw(st.sampled_from(["HTTP/1.1"] * 6 + VERSIONS))
    method = draw(st.sampled_from(["GET", "POST"] * 6 + METHODS))
    headers = draw(st.lists(st.sampled_from(ODD_HEADERS), max_size=2))
    body = draw(st.sampled_from([INSERT, b"id\n7\n", b"t id=7i\n", b""]))
    framing = draw(st.sampled_from(["length", "length", "chunked", "none", "both", "wrong"]))
    n = len(body)
    if framing == "length":
        headers.append(f"Content-Length: {n}")
    elif framing == "wrong":
        headers.append(f"Content-Length: {draw(st.sampled_from(NUMBERS[:8] + [str(n + 3)]))}")
    elif framing in ("chunked", "both"):
        headers.append(
            "Transfer-Encoding: "
            + draw(st.sampled_from(["chunked", "gzip, chunked", "chunked, gzip"]))
        )
        if framing == "both":
            headers.append(f"Content-Length: {n}")
        size = draw(st.sampled_from([f"{n:x}", f"{n:x};e=1", "zz", f"{n + 2:x}", "1" * 30]))
        body = f"{size}\r\n".encode() + body + b"\r\n0\r\n\r\n"
    return (
        head(
            target,
            method,
            path,
            version,
            tuple(headers),
            host=draw(st.booleans() | st.just(True)),
            auth=draw(st.booleans() | st.just(True)),
        )
        + body
    )
