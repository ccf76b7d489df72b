"""The gateway's folder-sync routes on a real socket over the hand-written fakes: `POST
/upload` with a `source`, the manifest (`GET /sources`), delete by source and by doc_id, with
their status codes, scopes and error shapes."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import httpx
import pytest

from services.gateway.app import create_app
from services.gateway.settings import GatewaySettings
from tests.fakes import fake_ports
from tests.servers import serve

pytestmark = pytest.mark.integration

FULL = {"Authorization": "Bearer full-token"}
READ = {"Authorization": "Bearer read-token"}


@pytest.fixture(scope="module")
def gateway_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = GatewaySettings(
        _env_file=None,
        var_dir=tmp_path_factory.mktemp("var"),
        auth_token=["full-token"],
        read_only_token=["read-token"],
    )
    with serve(create_app(settings, fake_ports())) as url:
        yield url


def _upload(http: httpx.Client, name: str, body: bytes, **fields: str) -> httpx.Response:
    return http.post("/upload", files={"file": (name, body, "text/plain")}, data=fields)


def test_source_names_the_document_and_the_manifest_lists_it(gateway_url: str) -> None:
    with httpx.Client(base_url=gateway_url, headers=FULL) as http:
        q3 = _upload(http, "report.md", b"third quarter", source="Q3/report.md", library="s")
        q4 = _upload(
            http, "C:\\x\\report.md", b"fourth quarter", source="Q4/report.md", library="s"
        )
        plain = _upload(http, "C:\\x\\notes.md", b"notes", library="s")
        assert (q3.status_code, q4.status_code, plain.status_code) == (200, 200, 200), q4.text
        assert q3.json()["source"] == "Q3/report.md" and plain.json()["source"] == "notes.md"
        again = _upload(http, "report.md", b"third quarter", source="Q3/report.md", library="s")
        assert again.json()["status"] == "skipped"

        listed = http.get("/sources", params={"library": "s"})
        assert listed.status_code == 200, listed.text
        body = listed.json()
        assert [e["source"] for e in body["sources"]] == [
            "Q3/report.md",
            "Q4/report.md",
            "notes.md",
        ]
        assert body["next_cursor"] is None
        first = body["sources"][0]
        assert first["content_sha256"] == hashlib.sha256(b"third quarter").hexdigest()
        assert first["doc_id"] == q3.json()["doc_id"]

        page = http.get("/sources", params={"library": "s", "limit": "1", "prefix": "Q"}).json()
        assert [e["source"] for e in page["sources"]] == ["Q3/report.md"]
        rest = http.get(
            "/sources", params={"library": "s", "prefix": "Q", "cursor": page["next_cursor"]}
        ).json()
        assert [e["source"] for e in rest["sources"]] == ["Q4/report.md"]

        # Read-only callers may read the manifest.
        assert http.get("/sources", params={"library": "s"}, headers=READ).status_code == 200


def test_bad_manifest_queries_are_400(gateway_url: str) -> None:
    with httpx.Client(base_url=gateway_url, headers=FULL) as http:
        for params in ({"limit": "0"}, {"limit": "many"}, {"cursor": "%%%"}, {"extra": "1"}):
            answer = http.get("/sources", params=params)
            assert answer.status_code == 400, params
            assert answer.json()["error_code"] == "invalid_input"
        bad_source = _upload(http, "a.md", b"x", source="\x01")
        assert bad_source.status_code == 400 and "source" in bad_source.json()["error"]


def test_delete_by_source_and_by_doc_id(gateway_url: str) -> None:
    with httpx.Client(base_url=gateway_url, headers=FULL) as http:
        one = _upload(http, "one.md", b"one", source="d/one.md", library="del").json()
        _upload(http, "two.md", b"two", source="d/two.md", library="del")

        refused = http.delete(
            "/documents", params={"library": "del", "source": "d/two.md"}, headers=READ
        )
        assert refused.status_code == 403

        by_source = http.delete("/documents", params={"library": "del", "source": "d/two.md"})
        assert by_source.status_code == 200, by_source.text
        assert by_source.json()["status"] == "deleted"
        by_id = http.delete(f"/documents/{one['doc_id']}")
        assert by_id.status_code == 200 and by_id.json()["doc_id"] == one["doc_id"]
        assert http.get("/sources", params={"library": "del"}).json()["sources"] == []

        missing = http.delete("/documents", params={"library": "del", "source": "d/two.md"})
        assert missing.status_code == 404
        assert missing.json()["error_code"] == "not_found"
        assert "d/two.md" in missing.json()["error"]
        assert http.delete(f"/documents/{one['doc_id']}").status_code == 404
        assert http.delete("/documents", params={"library": "del"}).status_code == 400
