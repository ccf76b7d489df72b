"""`POST /upload` as a Windows host sends it, checked the same way against every deployment
(the services on loopback, the containers): a file named by its full Windows path is stored
under its base name and skipped when sent again unchanged; a file of no known type is 422."""

from __future__ import annotations

import httpx

from tests.conftest import SHARED_FILES

WINDOWS_NAME = "C:\\Users\\alex\\Documents\\test.docx"


def check_windows_upload(gateway: str) -> None:
    content = (SHARED_FILES / "markitdown" / "test.docx").read_bytes()
    response = httpx.post(
        gateway + "/upload",
        files={"file": (WINDOWS_NAME, content)},
        data={"library": "uploads", "metadata": '{"author": "Alice"}'},
        timeout=120,
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "indexed" and body["source"] == "test.docx", body
    again = httpx.post(
        gateway + "/upload",
        files={"file": (WINDOWS_NAME, content)},
        data={"library": "uploads"},
        timeout=120,
    )
    assert again.json()["status"] == "skipped"
    bad = httpx.post(gateway + "/upload", files={"file": ("random.bin", b"\x00" * 10)}, timeout=30)
    assert bad.status_code == 422
