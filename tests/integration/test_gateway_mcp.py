"""The gateway's MCP surface through the real SDK client over a real SSE socket, with fake
downstream ports: tool names and schemas, structured results, structured errors."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from services.gateway.app import create_app
from services.gateway.settings import GatewaySettings
from tests.fakes import fake_ports
from tests.mcp_client import sse_tools
from tests.servers import serve

EXPECTED_TOOLS = {
    "ingest_file",
    "ingest_content",
    "ingest_url",
    "ingest_folder",
    "search",
    "list_documents",
    "list_libraries",
    "delete_document",
    "get_document",
    "server_info",
    "get_job",
    "list_jobs",
    "cancel_job",
    "ingest_repo",
}


@pytest.fixture(scope="module")
def gateway_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = GatewaySettings(
        _env_file=None,
        var_dir=tmp_path_factory.mktemp("var"),
        auth_token=["full-token"],
        read_only_token=["read-token"],
        max_upload_bytes=2000,
    )
    with serve(create_app(settings, fake_ports())) as url:  # type: ignore[arg-type]
        yield url


FULL = {"Authorization": "Bearer full-token"}
READ = {"Authorization": "Bearer read-token"}


async def test_tools_are_listed_with_spec_names_and_params(gateway_url: str) -> None:
    async with sse_tools(gateway_url + "/sse", FULL) as tools:
        init = tools.session
        listed = await init.list_tools()
        names = {t.name for t in listed.tools}
        assert names == EXPECTED_TOOLS
        schema = {t.name: t.input_schema for t in listed.tools}
        assert set(schema["search"]["properties"]) == {
            "query",
            "top_k",
            "library",
            "filter",
            "max_tokens",
            "max_per_document",
            "min_score",
        }
        assert schema["search"]["required"] == ["query"]
        assert set(schema["get_document"]["properties"]) == {"doc_id", "chunk_index", "context"}
        assert schema["get_document"]["required"] == ["doc_id"]
        assert set(schema["ingest_content"]["required"]) == {"content", "source"}
        assert set(schema["list_documents"]["properties"]) == {"library", "limit", "offset"}
        assert "ctx" not in schema["ingest_file"]["properties"]


async def test_round_trip_and_structured_errors(gateway_url: str, tmp_path: Path) -> None:
    async with sse_tools(gateway_url + "/sse", FULL) as tools:
        ok = await tools.call("ingest_content", content="hello brave world", source="note")
        assert ok["status"] == "indexed" and ok["library"] == "default"
        hits = await tools.call("search", query="brave")
        assert hits["results"][0]["doc_id"] == ok["doc_id"]
        doc = await tools.call("get_document", doc_id=ok["doc_id"])
        assert doc["content"] == "hello brave world"

        bad_range = await tools.call("search", query="x", top_k=0)
        assert bad_range["status"] == "error" and bad_range["error_code"] == "invalid_input"
        assert "top_k" in bad_range["error"]
        bad_type = await tools.call("list_documents", limit="many")
        assert bad_type["status"] == "error" and bad_type["error_code"] == "invalid_input"
        missing = await tools.call("ingest_content", content="x")
        assert missing["error_code"] == "invalid_input" and "source" in missing["error"]
        blank = await tools.call("search", query="   ")
        assert blank["error_code"] == "invalid_input"
        unknown = await tools.call("get_document", doc_id="nope")
        assert unknown == {
            "status": "error",
            "error": "no document with doc_id nope",
            "error_code": "not_found",
        }
        no_file = await tools.call("ingest_file", path=str(tmp_path / "absent.pdf"))
        assert no_file["error_code"] == "file_not_readable"
        info = await tools.call("server_info", check_path=str(tmp_path / "absent.pdf"))
        assert info["name"] == "mcpvectordb" and info["path_check"]["readable"] is False
        bad_url = await tools.call("ingest_url", url="file:///etc/passwd")
        assert bad_url["error_code"] == "invalid_input"


async def test_read_only_token_can_search_but_not_write(gateway_url: str) -> None:
    async with sse_tools(gateway_url + "/sse", READ) as tools:
        refused = await tools.call("ingest_content", content="x", source="y")
        assert refused["error_code"] == "forbidden"
        repo = await tools.call("ingest_repo", url="owner/repo")
        assert repo["error_code"] == "forbidden"
        assert "results" in await tools.call("search", query="anything")


async def test_http_routes_need_a_token(gateway_url: str) -> None:
    async with httpx.AsyncClient(base_url=gateway_url) as http:
        assert (await http.get("/healthz")).status_code == 200
        assert (await http.get("/readyz")).status_code == 200
        assert (await http.get("/sse")).status_code == 401
        assert (await http.post("/upload")).status_code == 401
        wrong = await http.post("/upload", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.json()["error_code"] == "unauthorized"
        ro = await http.post("/upload", headers=READ, files={"file": ("a.txt", b"x", "text/plain")})
        assert ro.status_code == 403
        repo = await http.post("/ingest_repo", headers=READ, json={"url": "owner/repo"})
        assert repo.status_code == 403 and repo.json()["error_code"] == "forbidden"
        assert (await http.post("/ingest_repo", json={"url": "owner/repo"})).status_code == 401


async def test_upload_status_codes(gateway_url: str) -> None:
    async with httpx.AsyncClient(base_url=gateway_url, headers=FULL) as http:
        ok = await http.post(
            "/upload",
            files={"file": ("C:\\Users\\me\\notes.txt", b"upload body", "text/plain")},
            data={"library": "up", "metadata": '{"author": "Alice"}'},
        )
        assert ok.status_code == 200, ok.text
        assert ok.json()["source"] == "notes.txt" and ok.json()["library"] == "up"
        assert (await http.post("/upload", data={"library": "x"})).status_code == 400
        bad_meta = await http.post(
            "/upload", files={"file": ("a.txt", b"x")}, data={"metadata": "{not json"}
        )
        assert bad_meta.status_code == 400 and "metadata" in bad_meta.json()["error"]
        unsupported = await http.post("/upload", files={"file": ("random.bin", b"\x00\x01")})
        assert unsupported.status_code == 422
        assert unsupported.json()["error_code"] == "unsupported_format"
        too_big = await http.post("/upload", files={"file": ("big.txt", b"x" * 100_000)})
        assert too_big.status_code == 413


async def test_an_upload_keeps_the_name_a_windows_client_encoded(gateway_url: str) -> None:
    """PowerShell's `Invoke-RestMethod -Form` (.NET's HttpClient) sends a name that is not
    ASCII as RFC 5987's `filename*` beside a MIME encoded word in `filename`; other clients
    send one of the two, or the name as it is."""
    kündigung = "Kündigung März.txt"
    star = "utf-8''" + quote(kündigung)
    word = "=?utf-8?B?" + base64.b64encode(kündigung.encode()).decode() + "?="
    dispositions = {
        f'filename="{word}"; filename*={star}': kündigung,  # PowerShell 7.4, .NET
        f"filename=\"notes.txt\"; filename*=utf8''{quote('€ rates.txt')}": "€ rates.txt",
        'filename="=?utf-8?Q?Gr=C3=BC=C3=9Fe.txt?="': "Grüße.txt",  # a word alone
        'filename="Bären.txt"': "Bären.txt",  # curl, browsers, Python
    }
    async with httpx.AsyncClient(base_url=gateway_url, headers=FULL) as http:
        for n, (disposition, name) in enumerate(dispositions.items()):
            body = (
                f'--b\r\nContent-Disposition: form-data; name="file"; {disposition}\r\n'
                f"Content-Type: text/plain\r\n\r\nbody {n}\r\n--b--\r\n"
            ).encode()
            answer = await http.post(
                "/upload",
                content=body,
                headers={"Content-Type": "multipart/form-data; boundary=b"},
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["source"] == name, disposition


async def test_ingest_folder_endpoint(gateway_url: str, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha")
    (tmp_path / "b.md").write_text("beta")
    async with httpx.AsyncClient(base_url=gateway_url, headers=FULL) as http:
        ok = await http.post("/ingest_folder", json={"folder": str(tmp_path), "library": "f"})
        assert ok.status_code == 200, ok.text
        body = ok.json()
        assert body["total_files"] == 2 and body["indexed"] == 2 and body["errors"] == []
        bad = await http.post(
            "/ingest_folder", json={"folder": str(tmp_path), "max_concurrency": 0}
        )
        assert bad.status_code == 400 and bad.json()["error_code"] == "invalid_input"
        missing = await http.post("/ingest_folder", json={"folder": str(tmp_path / "no")})
        assert missing.status_code == 400 and "not found" in missing.json()["error"]


async def test_ingest_folder_patterns_over_http_and_mcp(gateway_url: str, tmp_path: Path) -> None:
    """`include` brings source code in (only that way), `exclude` leaves files and folders out,
    on the HTTP route and the MCP tool alike; a pattern over the size limit is invalid input."""
    (tmp_path / "notes.md").write_text("notes")
    (tmp_path / "tool.py").write_text("def main():\n    pass\n")
    (tmp_path / "drafts").mkdir()
    (tmp_path / "drafts" / "old.md").write_text("old")
    async with httpx.AsyncClient(base_url=gateway_url, headers=FULL) as http:
        plain = await http.post("/ingest_folder", json={"folder": str(tmp_path), "library": "p"})
        assert plain.json()["total_files"] == 2  # notes.md, drafts/old.md: no code
        code = await http.post(
            "/ingest_folder",
            json={"folder": str(tmp_path), "library": "p", "include": ["*.py"]},
        )
        assert [r["source"] for r in code.json()["results"]] == [str(tmp_path / "tool.py")]
        bad = await http.post(
            "/ingest_folder", json={"folder": str(tmp_path), "include": ["x" * 300]}
        )
        assert bad.status_code == 400 and bad.json()["error_code"] == "invalid_input"
    async with sse_tools(gateway_url + "/sse", FULL) as tools:
        left = await tools.call(
            "ingest_folder", folder=str(tmp_path), library="p", exclude=["drafts/"]
        )
        assert [r["source"] for r in left["results"]] == [str(tmp_path / "notes.md")]


async def test_search_options_and_document_windows_reach_the_index(gateway_url: str) -> None:
    async with sse_tools(gateway_url + "/sse", FULL) as tools:
        ok = await tools.call(
            "ingest_content", content="otter one\n\notter two\n\notter three", source="otters"
        )
        hits = await tools.call(
            "search",
            query="otter",
            filter={"chunk_index": {"$gte": 0}, "metadata.kind": {"$in": ["a", 1]}},
            max_tokens=500,
            max_per_document=2,
        )
        assert hits["truncated"] is False and isinstance(hits["total_tokens"], int)
        window = await tools.call("get_document", doc_id=ok["doc_id"], chunk_index=1, context=1)
        assert [c["chunk_index"] for c in window["chunks"]] == [0, 1, 2]
        assert (await tools.call("get_document", doc_id=ok["doc_id"]))["chunks"] is None

        bad_op = await tools.call("search", query="otter", filter={"page": {"$regex": "1"}})
        assert bad_op["error_code"] == "invalid_input"
        assert "unknown operator '$regex' on filter field 'page'" in bad_op["error"]
        bad_key = await tools.call("search", query="otter", filter={"metadata.a'b": 1})
        assert bad_key["error_code"] == "invalid_input" and "metadata keys" in bad_key["error"]
        for args in ({"max_tokens": 0}, {"max_per_document": 0}, {"max_tokens": 100_001}):
            refused = await tools.call("search", query="otter", **args)
            assert refused["error_code"] == "invalid_input", args
            assert next(iter(args)) in refused["error"]
        for args in ({"chunk_index": -1}, {"chunk_index": 0, "context": 21}):
            refused = await tools.call("get_document", doc_id=ok["doc_id"], **args)
            assert refused["error_code"] == "invalid_input", args
