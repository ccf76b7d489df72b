"""The container tier: the four images built by compose from the repository's Dockerfile, the
repository's docker-compose.yml started on free loopback ports, and the product driven end to
end through the real MCP SDK client, as a user of `make compose-up` would drive it.

The project is the repository's docker-compose.yml with an env file of the test's own (free
host ports, the images' tag, the host ingest folder, the base image built from Debian
packages) and a small override adding, on the internal network, `web`, a static file server
for `ingest_url`, and `gitserver`, a git server (smart HTTP) for `ingest_repo`. Nothing
leaves the machine: the gateway and Prometheus are reached through ports published on
127.0.0.1, the containers talk only on the project's networks. RETRY_ATTEMPTS / RETRY_MAX_S
are raised (as in tests/e2e/test_crash_safety.py) so that the gateway's retries outlast the
index's restart after `docker kill`.

What is checked: each image holds exactly its locked packages; every container is healthy,
runs as UID 10001 on a read-only root; a gateway that cannot reach its services is unhealthy;
every MCP tool (the job tools following a background folder ingest, `ingest_repo` cloning
with the gateway image's git), streamable HTTP, `POST /upload` with a Windows file name,
`ingest_folder` on the mounted host folder; Prometheus (monitoring profile) scraping all
four; `docker kill` of the index in the middle of a folder ingest leaving no partial document
and the counts right; the data kept across `down` / `up`. Last, the `s3` profile as a project
of its own (tests/deploy/s3_profile.py): the store in a bucket of the `s3` image's server, the
index as its writer, two index readers serving the gateway's reads.

The modules: `engine` (Docker, the base image, `Compose`), `stack` (the project and its
`Stack`, opened once for the package by `conftest.py`), `s3_profile`; the tests in
`test_images`, `test_product`, `test_restart` and `test_s3_profile`, run in that order (the
restarts come after the product's checks, which they would disturb). `make test-containers`
runs this package (`make container-tools` installs Docker, compose and mmdebstrap from Debian
first); it skips, saying why, where Docker cannot run.
"""
