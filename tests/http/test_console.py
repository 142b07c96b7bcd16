"""The console page at `/` over plain HTTP: its files, their types, the security headers.

The page itself is driven in Chromium by tests/browser/test_console.py.
"""

from __future__ import annotations

import re
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import pytest

from refimpl.http.endpoints.console_route import CONSOLE_ASSETS, CONSOLE_FOLDER
from tests.http.conftest import ROOT, Server

TYPES = {
    ".html": "text/html",
    ".css": "text/css",
    ".js": "text/javascript",
    ".mjs": "text/javascript",
}


def test_the_page_is_served_with_a_strict_policy_and_no_credentials(server: Server):
    page = server.get("/", token=None)
    assert page.status_code == 200
    assert page.headers["Content-Type"] == "text/html; charset=utf-8"
    policy = page.headers["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert directives["default-src"] == "'none'"
    assert directives["script-src"] == "'self'" and directives["style-src"] == "'self'"
    assert directives["connect-src"] == "'self'" and directives["frame-ancestors"] == "'none'"
    assert page.headers["X-Content-Type-Options"] == "nosniff"
    assert "<title>refimpl console</title>" in page.text
    assert "<script>" not in page.text and " style=" not in page.text  # nothing inline


@pytest.mark.parametrize("name", CONSOLE_ASSETS)
def test_every_file_of_the_page_is_served_with_its_type(server: Server, name: str):
    answer = server.get(f"/console/{name}", token=None)
    assert answer.status_code == 200, answer.text
    assert answer.headers["Content-Type"].startswith(TYPES[Path(name).suffix])
    assert answer.content == (CONSOLE_FOLDER / name).read_bytes()
    assert "Content-Security-Policy" in answer.headers
    again = server.get(
        f"/console/{name}", token=None, headers={"If-None-Match": answer.headers["ETag"]}
    )
    assert again.status_code == 304  # revalidated, not sent again


def test_the_page_names_only_files_that_are_served():
    named = set(
        re.findall(r'(?:src|href)="/console/([^"]+)"', (CONSOLE_FOLDER / "index.html").read_text())
    )
    for script in CONSOLE_FOLDER.glob("*.js"):
        named |= set(re.findall(r"from '\./([^']+)'", script.read_text()))
    on_disk = {
        p.relative_to(CONSOLE_FOLDER).as_posix() for p in CONSOLE_FOLDER.rglob("*") if p.is_file()
    }
    licences = {"vendor/LICENSE", "vendor/NOTICE"}  # shipped beside the vendored library
    assert named == set(CONSOLE_ASSETS) == on_disk - {"index.html"} - licences


def test_the_wheel_ships_the_page():
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    shipped = patterns["package-data"]["refimpl"]
    for path in CONSOLE_FOLDER.rglob("*"):
        relative = path.relative_to(ROOT / "refimpl").as_posix()
        assert any(fnmatch(relative, pattern) for pattern in shipped), relative


def test_unknown_files_and_other_hosts_are_refused(server: Server):
    for path in ("/console/", "/console/nope.js", "/console/../admin.token", "/console/index.html"):
        answer = server.get(path, token=None)
        assert answer.status_code == 404, path
        assert answer.json()["error"]
    rebound = server.get("/", token=None, headers={"Host": "attacker.example"})
    assert rebound.status_code == 400 and "allowed_hosts" in rebound.json()["error"]
    assert server.request("HEAD", "/", token=None).status_code == 200
    assert server.post("/", token=None).status_code == 405
