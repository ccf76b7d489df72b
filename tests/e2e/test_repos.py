"""`ingest_repo` end to end: the four real services on loopback, a real git server on
loopback (`git http-backend`, `tests.git_server`), the MCP SDK client over SSE and the HTTP
route. A repository of real Markdown and text is ingested, searched (sources, metadata, line
numbers against the files, `min_score`), changed by a commit (one file edited, one deleted,
one added) and synced again; then the refusals: a ref that does not exist, a loopback name
that is not allow-listed, a repository over `REPO_MAX_BYTES` (3 MB in this cluster) — each
a clear error with nothing written; and a background job."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import SHARED_FILES
from tests.e2e.conftest import Cluster
from tests.git_server import WorkingCopy, git_http_server
from tests.mcp_client import Tools, sse_tools

pytestmark = pytest.mark.e2e

LIBRARY = "repo-e2e"
README = SHARED_FILES / "markitdown/markitdown-project-README.md"
NOVEL = SHARED_FILES / "gutenberg/1342-0.txt"
INVOICE = SHARED_FILES / "markitdown/expected_outputs/REPAIR-2022-INV-001_multipage.md"
RECEIPT = SHARED_FILES / "markitdown/expected_outputs/RECEIPT-2024-TXN-98765_retail_purchase.md"


CLI = (
    '"""The walrus command line."""\n\nimport sys\n\n\nclass Walrus:\n'
    "    def tusks(self, count: int) -> str:\n"
    '        return "tusk " * count\n\n\n'
    "def main() -> None:\n    print(Walrus().tusks(int(sys.argv[1])))\n"
)


def novel_lines(first: int, last: int) -> str:
    return "\n".join(NOVEL.read_text(encoding="utf-8").split("\n")[first:last]) + "\n"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, WorkingCopy, int]]:
    for path in (README, NOVEL, INVOICE, RECEIPT):
        if not path.is_file():
            pytest.skip(f"shared file missing: {path}")
    root = tmp_path_factory.mktemp("git")
    (root / "srv").mkdir()
    docs = WorkingCopy(root / "docs", root / "srv" / "docs.git")
    docs.write(
        {
            "README.md": README.read_text(encoding="utf-8"),
            "docs/invoice.md": INVOICE.read_text(encoding="utf-8"),
            "docs/chapter.txt": novel_lines(100, 300),
            "notes.txt": "Release notes\n\nThe walrus feature shipped in version 2.\n",
            "docs/install.rst": "Install\n=======\n\nRun pip install markitdown to install.\n",
            # Source code: only an include pattern that names it brings it in.
            "tool/cli.py": CLI,
            # Left out by the default exclusions and includes:
            "node_modules/pkg/README.md": "# vendored package\n",
            "package-lock.json": "{}\n",
            "logo.png": b"\x89PNG\r\n\x1a\n",
        }
    )
    docs.commit("first", tag="v1")
    big = WorkingCopy(root / "big", root / "srv" / "big.git")
    big.write({"README.md": "# big\n", "data.txt": os.urandom(4_000_000).hex()[:4_000_000]})
    big.commit("big")
    with git_http_server(root / "srv") as port:
        yield f"http://127.0.0.1:{port}/docs.git", docs, port


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def total(tools: Tools, library: str) -> int:
    listed = await tools.call("list_documents", library=library, limit=100)
    return int(listed["total"])


def test_a_repository_is_ingested_searched_and_synced(
    cluster: Cluster, served: tuple[str, WorkingCopy, int]
) -> None:
    url, docs, _ = served
    first = docs.path

    async def go() -> None:
        async with sse_tools(cluster.gateway + "/sse") as tools:
            result = await tools.call("ingest_repo", url=url, library=LIBRARY)
            assert result.get("status") != "error", result
            commit_one = result["commit"]
            assert result["repo"] == url and result["ref"] == "main"
            assert result["commit_before"] is None
            assert (result["total_files"], result["indexed"], result["failed"]) == (5, 5, 0)
            sources = {r["source"] for r in result["results"]}
            assert sources == {
                f"{url}#{p}"
                for p in (
                    "README.md",
                    "docs/chapter.txt",
                    "docs/install.rst",
                    "docs/invoice.md",
                    "notes.txt",
                )
            }

            found = await tools.call(
                "search", query="convert PDF files to Markdown", library=LIBRARY, top_k=10
            )
            hits = found["results"]
            assert hits and hits[0]["source"] == f"{url}#README.md"
            for hit in hits:
                path = hit["source"].split("#", 1)[1]
                meta = hit["metadata"]
                assert (meta["repo"], meta["ref"], meta["commit"], meta["path"]) == (
                    url,
                    "main",
                    commit_one,
                    path,
                )
                # Line numbers point at the chunk in the file as committed.
                lines = [x.rstrip() for x in (first / path).read_text().split("\n")]
                window = "\n".join(lines[hit["start_line"] - 1 : hit["end_line"]])
                assert 1 <= hit["start_line"] <= hit["end_line"] <= len(lines)
                assert hit["content"] in window, (path, hit["start_line"], hit["end_line"])
                assert hit["similarity"] is not None

            # min_score on this real content: only the README and install notes are about
            # converting files; the novel's chapter is not.
            floored = await tools.call(
                "search",
                query="convert PDF files to Markdown",
                library=LIBRARY,
                top_k=20,
                min_score=0.4,
            )
            assert floored["results"]
            assert all(h["similarity"] >= 0.4 for h in floored["results"])
            assert not any(h["source"].endswith("chapter.txt") for h in floored["results"])

            # A new commit: one file edited, one deleted, one added.
            docs.write({"docs/invoice.md": RECEIPT.read_text(encoding="utf-8")})
            docs.remove("notes.txt")
            docs.write({"docs/new.md": "# New page\n\nHow to configure the walrus exporter.\n"})
            commit_two = docs.commit("second")
            again = await tools.call("ingest_repo", url=url, library=LIBRARY)
            assert again.get("status") != "error", again
            assert again["commit_before"] == commit_one and again["commit"] == commit_two
            counts = [again[k] for k in ("indexed", "replaced", "skipped", "deleted", "failed")]
            assert counts == [1, 1, 3, 1, 0]
            assert again["deleted_sources"] == [f"{url}#notes.txt"]
            assert await total(tools, LIBRARY) == 5
            walrus = await tools.call("search", query="walrus exporter", library=LIBRARY, top_k=3)
            assert walrus["results"][0]["source"] == f"{url}#docs/new.md"
            assert walrus["results"][0]["metadata"]["commit"] == commit_two

    run(go())
    # The same body over HTTP: nothing changed, so every file is skipped.
    answer = httpx.post(
        cluster.gateway + "/ingest_repo", json={"url": url, "library": LIBRARY}, timeout=300
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["skipped"], body["indexed"], body["replaced"], body["deleted"]) == (5, 0, 0, 0)


def test_refusals_are_clear_and_write_nothing(
    cluster: Cluster, served: tuple[str, WorkingCopy, int]
) -> None:
    url, _, port = served

    async def go() -> None:
        async with sse_tools(cluster.gateway + "/sse") as tools:
            missing = await tools.call("ingest_repo", url=url, ref="no-such-branch", library="r1")
            assert missing["error_code"] == "not_found", missing
            assert "no-such-branch" in missing["error"]
            local = await tools.call(
                "ingest_repo", url=f"http://localhost:{port}/docs.git", library="r1"
            )
            assert local["error_code"] == "path_not_allowed", local
            assert "URL_ALLOW_HOSTS" in local["error"]
            big = await tools.call(
                "ingest_repo", url=f"http://127.0.0.1:{port}/big.git", library="r1"
            )
            assert big["error_code"] == "too_large", big
            assert "REPO_MAX_BYTES" in big["error"]
            few = await tools.call("ingest_repo", url=url, library="r1", max_files=2)
            assert few["error_code"] == "too_large" and "max_files" in few["error"], few
            scheme = await tools.call("ingest_repo", url="file:///etc", library="r1")
            assert scheme["error_code"] == "invalid_input", scheme
            assert await total(tools, "r1") == 0

    run(go())
    answer = httpx.post(
        cluster.gateway + "/ingest_repo",
        json={"url": url, "ref": "no-such-branch", "library": "r1"},
        timeout=60,
    )
    assert answer.status_code == 404 and answer.json()["error_code"] == "not_found"


def test_a_tag_in_the_background_as_a_job(
    cluster: Cluster, served: tuple[str, WorkingCopy, int]
) -> None:
    url, _, _ = served

    async def go() -> None:
        async with sse_tools(cluster.gateway + "/sse") as tools:
            accepted = await tools.call(
                "ingest_repo",
                url=url,
                ref="v1",
                library="repo-job",
                include=["docs/**"],
                background=True,
            )
            assert accepted["status"] == "accepted", accepted
            deadline = time.monotonic() + 300
            while True:
                job = await tools.call("get_job", job_id=accepted["job_id"])
                if job["status"] not in ("queued", "running"):
                    break
                assert time.monotonic() < deadline, job
                await asyncio.sleep(0.5)
            assert job["kind"] == "ingest_repo" and job["status"] == "succeeded", job
            assert job["folder"] == url
            # v1 is the first commit: docs/ held three files then.
            assert (job["total_files"], job["indexed"]) == (3, 3), job
            listed = await tools.call("list_documents", library="repo-job", limit=10)
            assert {d["metadata"]["ref"] for d in listed["documents"]} == {"v1"}
            # The same commit named by its id: the same files, all skipped.
            commit = listed["documents"][0]["metadata"]["commit"]
            by_id = await tools.call(
                "ingest_repo", url=url, ref=commit, library="repo-job", include=["docs/**"]
            )
            assert (by_id["ref"], by_id["commit"], by_id["skipped"]) == (commit, commit, 3), by_id

    run(go())


def test_source_code_only_by_an_include_pattern(
    cluster: Cluster, served: tuple[str, WorkingCopy, int]
) -> None:
    """The default patterns leave `tool/cli.py` out (the other tests count without it);
    `include=["*.py"]` ingests it as code: the method is found at its lines (the file is one
    chunk, so its heading path is the definitions all of it shares: none)."""
    url, _, _ = served

    async def go() -> None:
        async with sse_tools(cluster.gateway + "/sse") as tools:
            result = await tools.call(
                "ingest_repo", url=url, ref="v1", library="repo-code", include=["*.py"]
            )
            assert (result["total_files"], result["indexed"], result["failed"]) == (1, 1, 0)
            found = await tools.call("search", query="walrus tusks count", library="repo-code")
            top = found["results"][0]
            assert top["source"] == f"{url}#tool/cli.py" and top["file_type"] == "py"
            assert top["title"] == "cli.py" and top["headings"] == []
            lines = CLI.split("\n")
            tusks = lines.index("    def tusks(self, count: int) -> str:") + 1
            assert top["start_line"] <= tusks <= top["end_line"]

    asyncio.run(go())
