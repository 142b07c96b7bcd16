"""--static serves its folder's files only: never what a symbolic link points to outside it,
and never a folder that shares anything with the data folder (the admin token is there)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.http.conftest import start_server


def test_links_out_of_the_static_folder_are_not_followed(tmp_path: Path):
    data, static, outside = tmp_path / "data", tmp_path / "static", tmp_path / "outside"
    static.mkdir()
    outside.mkdir()
    (static / "page.html").write_text("<p>hello</p>")
    (static / "same.html").symlink_to(static / "page.html")  # inside: served
    (outside / "secret.txt").write_text("the-hidden-content")
    (static / "secret.txt").symlink_to(outside / "secret.txt")
    (static / "elsewhere").symlink_to(outside, target_is_directory=True)
    server = start_server(data, "--static", str(static))
    try:
        (static / "token").symlink_to(data / "admin.token")
        assert server.get("/static/page.html", token=None).text == "<p>hello</p>"
        assert server.get("/static/same.html", token=None).text == "<p>hello</p>"
        for name in (
            "secret.txt",
            "elsewhere/secret.txt",
            "token",
            "../data/admin.token",
            "%2e%2e/data/admin.token",
            "nope.html",
        ):
            response = server.get(f"/static/{name}", token=None)
            assert response.status_code == 404, name
            assert "the-hidden-content" not in response.text and server.token not in response.text
            assert response.json()["error"]
        began = time.monotonic()
        assert server.get("/health", token=None).status_code == 200
        assert time.monotonic() - began < 2.0
    finally:
        assert server.stop() == 0


@pytest.mark.parametrize("where", ["same", "inside", "around"])
def test_a_static_folder_sharing_the_data_folder_stops_the_start(tmp_path: Path, where: str):
    data = tmp_path / "served" / "data"
    data.mkdir(parents=True)
    static = {"same": data, "inside": data / "www", "around": tmp_path / "served"}[where]
    static.mkdir(exist_ok=True)
    with pytest.raises(RuntimeError, match="the data folder") as raised:
        start_server(data, "--static", str(static))
    assert "exited with 2" in str(raised.value)
    assert not (data / "admin.token").exists()  # stopped before anything was made
