"""The product through the containers, as a user of `make compose-up` drives it: every MCP
tool (the job tools following a background folder ingest), `POST /upload` with a Windows file
name, `ingest_repo` cloning with the gateway image's git, `ingest_folder` on the mounted host
folder, and Prometheus (the monitoring profile) scraping all four services."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from pathlib import Path

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from libs.contracts import TOOLS as CATALOG
from tests.conftest import SHARED_FILES
from tests.deploy.containers.engine import SERVICES
from tests.deploy.containers.stack import Stack, call, readable, wait
from tests.git_server import WorkingCopy
from tests.mcp_client import sse_tools
from tests.uploads import check_windows_upload

SCANNED = SHARED_FILES / "markitdown" / "MEDRPT-2024-PAT-3847_medical_report_scan.pdf"
TOOLS = {tool.name for tool in CATALOG}  # the tool table the images' gateway publishes

# The first test to run builds the base and service images (minutes on a machine without them).
pytestmark = pytest.mark.timeout(2400)


def test_every_tool_over_mcp(stack: Stack) -> None:
    folder = stack.ingest / "tools"
    (folder / "folder" / "sub").mkdir(parents=True)
    shutil.copy(SHARED_FILES / "markitdown" / "test.pdf", folder / "report.pdf")
    shutil.copy(SHARED_FILES / "markitdown" / "test.json", folder / "folder" / "a.json")
    shutil.copy(SHARED_FILES / "markitdown" / "test_rss.xml", folder / "folder" / "sub" / "b.xml")
    (folder / "later").mkdir()
    shutil.copy(SHARED_FILES / "markitdown" / "test.json", folder / "later" / "c.json")
    readable(folder)

    async def go() -> None:
        async with sse_tools(stack.gateway + "/sse") as tools:
            listed = await tools.session.list_tools()
            assert {tool.name for tool in listed.tools} == TOOLS

            info = await tools.call("server_info", check_path="/srv/ingest/tools/report.pdf")
            assert info["name"] == "mcpvectordb" and info["embedding_dim"] == 384
            assert info["path_check"]["readable"] is True
            assert info["path_check"]["size_bytes"] == (folder / "report.pdf").stat().st_size

            pdf = await tools.call(
                "ingest_file", path="/srv/ingest/tools/report.pdf", library="tools",
                metadata={"kind": "pdf"},
            )  # fmt: skip
            assert pdf["status"] == "indexed" and pdf["chunk_count"] > 0, pdf
            outside = await tools.call("ingest_file", path="/etc/passwd", library="tools")
            assert outside["error_code"] == "path_not_allowed", outside

            note = await tools.call(
                "ingest_content",
                content="# Quokka\n\nThe quokka is a small marsupial from Rottnest Island.",
                source="notes/quokka.md",
                library="tools",
            )
            assert note["status"] == "indexed", note
            web = await tools.call("ingest_url", url="http://web:8080/post.html", library="tools")
            assert web["status"] == "indexed" and web["source"] == "http://web:8080/post.html"
            batch = await tools.call(
                "ingest_folder", folder="/srv/ingest/tools/folder", library="tools"
            )
            assert (batch["total_files"], batch["indexed"], batch["failed"]) == (2, 2, 0), batch

            # The same as a background job, followed with the job tools.
            accepted = await tools.call(
                "ingest_folder", folder="/srv/ingest/tools/later", library="tools", background=True
            )
            assert accepted["status"] == "accepted", accepted
            deadline = time.monotonic() + 120
            while (job := await tools.call("get_job", job_id=accepted["job_id"]))["status"] in (
                "queued",
                "running",
            ):
                assert time.monotonic() < deadline, job
                await asyncio.sleep(0.2)
            assert (job["status"], job["total_files"], job["indexed"]) == ("succeeded", 1, 1), job
            finished = await tools.call("list_jobs", status="succeeded")
            assert accepted["job_id"] in {j["job_id"] for j in finished["jobs"]}
            unchanged = await tools.call("cancel_job", job_id=accepted["job_id"])
            assert unchanged["status"] == "succeeded", "a finished job is returned as it is"

            found = await tools.call(
                "search", query="multiple agents that cooperate", filter={"file_type": "pdf"}
            )
            assert {hit["doc_id"] for hit in found["results"]} == {pdf["doc_id"]}, found
            assert all(hit["page"] >= 1 for hit in found["results"])
            assert found["results"][0]["metadata"] == {"kind": "pdf"}
            marsupial = await tools.call("search", query="Rottnest Island marsupial", top_k=1)
            assert marsupial["results"][0]["doc_id"] == note["doc_id"]

            documents = await tools.call("list_documents", library="tools", limit=100)
            assert documents["count"] == 6
            libraries = {
                lib["library"]: lib for lib in (await tools.call("list_libraries"))["libraries"]
            }
            assert libraries["tools"]["document_count"] == 6
            assert libraries["tools"]["chunk_count"] == sum(
                d["chunk_count"] for d in documents["documents"]
            )

            full = await tools.call("get_document", doc_id=note["doc_id"])
            assert "Rottnest Island" in full["content"]
            deleted = await tools.call("delete_document", doc_id=note["doc_id"])
            assert deleted["status"] == "deleted"
            gone = await tools.call("get_document", doc_id=note["doc_id"])
            assert gone["error_code"] == "not_found"

        async with (
            streamable_http_client(stack.gateway + "/mcp") as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            result = await session.call_tool("list_documents", {"library": "tools"})
            assert result.structured_content is not None
            assert result.structured_content["count"] == 5

    asyncio.run(go())


def test_upload_with_a_windows_file_name(stack: Stack) -> None:
    check_windows_upload(stack.gateway)


def test_ingest_repo_clones_with_the_git_of_the_gateway_image(stack: Stack, tmp_path: Path) -> None:
    """ingest_repo runs the git command line in the gateway container, here against a git
    server on the compose network."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed here, and the test repository is made with it")
    docs = WorkingCopy(tmp_path / "work", stack.git / "docs.git")
    docs.write(
        {
            "README.md": "# Walrus handbook\n\nWalruses haul out on sea ice to rest.\n",
            "docs/feeding.md": "# Feeding\n\nWalruses eat clams from the sea floor.\n",
        }
    )
    commit = docs.commit("first")
    for item in [stack.git, *stack.git.rglob("*")]:  # served by the images' user
        os.chown(item, 10001, 10001)
    url = "http://gitserver:8081/docs.git"
    result = call(stack, "ingest_repo", url=url, library="repo")
    assert (result.get("commit"), result.get("indexed")) == (commit, 2), result
    found = call(stack, "search", query="walruses haul out on ice", library="repo", top_k=1)
    (hit,) = found["results"]
    assert hit["source"] == f"{url}#README.md"
    assert hit["metadata"]["commit"] == commit


def test_ingest_folder_reads_the_mounted_host_folder(stack: Stack) -> None:
    folder = stack.ingest / "http"
    (folder / "sub").mkdir(parents=True)
    shutil.copy(SHARED_FILES / "markitdown" / "test.json", folder / "a.json")
    shutil.copy(SHARED_FILES / "markitdown" / "test_rss.xml", folder / "sub" / "feed.xml")
    shutil.copy(SCANNED, folder / "scan.pdf")
    readable(folder)
    request = {"folder": "/srv/ingest/http", "library": "folder", "max_concurrency": 2}
    response = httpx.post(stack.gateway + "/ingest_folder", json=request, timeout=600)
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["total_files"], body["indexed"], body["failed"]) == (3, 2, 1), body
    assert body["errors"][0]["file"].endswith("scan.pdf")
    assert body["errors"][0]["error_code"] == "no_text_extracted"

    outside = httpx.post(
        stack.gateway + "/ingest_folder", json={"folder": "/app", "library": "x"}, timeout=60
    )
    assert 400 <= outside.status_code < 500, outside.text
    assert outside.json()["error_code"] == "path_not_allowed"


def test_the_monitoring_profile_scrapes_all_four_services(stack: Stack) -> None:
    compose = stack.compose
    compose("up", "-d", "--no-build", "prometheus", profiles=("monitoring",))
    try:

        def targets() -> dict[str, str]:
            try:
                body = httpx.get(stack.prometheus + "/api/v1/targets", timeout=5).json()
            except (httpx.HTTPError, ValueError):
                return {}
            return {t["labels"]["job"]: t["health"] for t in body["data"]["activeTargets"]}

        # The shipped configuration scrapes every 15 s.
        wait(
            lambda: targets() == dict.fromkeys(SERVICES, "up"),
            120,
            lambda: f"targets: {targets()}\n{compose.logs()}",
        )
        up = httpx.get(stack.prometheus + "/api/v1/query", params={"query": "up"}, timeout=5)
        values = {r["metric"]["job"]: r["value"][1] for r in up.json()["data"]["result"]}
        assert values == dict.fromkeys(SERVICES, "1")
    finally:
        compose("rm", "--stop", "--force", "prometheus", profiles=("monitoring",), check=False)
