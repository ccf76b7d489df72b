"""The `s3` profile as a project of its own (`s3_profile`): the store in a bucket of the `s3`
image's server, the index as its writer, two index readers serving the gateway's reads."""

from __future__ import annotations

import pytest

from tests.deploy.containers import s3_profile

pytestmark = pytest.mark.timeout(2400)


def test_the_s3_profile_runs_a_writer_and_readers_on_a_bucket(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    s3_profile.run(tmp_path_factory)
