"""Credentials stay out of what a service says: LANCEDB_STORAGE_OPTIONS is checked without
echoing values, secrets registered from the store's location are masked in log lines, error
payloads and readiness details, URIs lose their user information, signed URLs their
signatures."""

from __future__ import annotations

import json
import logging
import sys

import pytest
from pydantic import ValidationError

from libs.errors import MvdbError, StoreError, invalid_input
from libs.redaction import (
    MASK,
    is_secret_name,
    redact_uri,
    remember_environment,
    scrub,
)
from libs.telemetry import JsonFormatter
from services.index.settings import IndexSettings
from services.index.store.location import remember_credentials, shown_uri

SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"


def test_storage_options_parse_from_json_with_scalars_as_strings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(
        "LANCEDB_STORAGE_OPTIONS",
        '{"endpoint": "http://127.0.0.1:9000", "allow_http": true, "timeout": 30}',
    )
    assert IndexSettings().lancedb_storage_options == {
        "endpoint": "http://127.0.0.1:9000",
        "allow_http": "true",
        "timeout": "30",
    }
    monkeypatch.setenv("LANCEDB_STORAGE_OPTIONS", "")
    assert IndexSettings().lancedb_storage_options == {}


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ('{"aws_secret_access_key": "' + SECRET + '"', "not valid JSON"),
        ('["' + SECRET + '"]', "must be a JSON object"),
        ('{"aws_secret_access_key": ["' + SECRET + '"]}', "'aws_secret_access_key' must be"),
        ('{"": "' + SECRET + '"}', "empty option name"),
    ],
)
def test_a_bad_storage_options_value_is_named_and_never_echoed(
    monkeypatch: pytest.MonkeyPatch, raw: str, says: str
) -> None:
    monkeypatch.setenv("LANCEDB_STORAGE_OPTIONS", raw)
    with pytest.raises(ValidationError) as caught:
        IndexSettings()
    message = invalid_input(caught.value, "settings").message
    assert says in message and "LANCEDB_STORAGE_OPTIONS" in message
    assert SECRET not in str(caught.value) and SECRET not in message


def test_secret_names() -> None:
    for name in (
        "aws_secret_access_key",
        "aws_access_key_id",
        "aws_session_token",
        "AWS_SECRET_ACCESS_KEY",
        "azure_storage_account_key",
        "azure_storage_sas_token",
        "google_service_account_key",
        "password",
    ):
        assert is_secret_name(name), name
    for name in ("endpoint", "region", "allow_http", "skip_signature", "bucket", "timeout"):
        assert not is_secret_name(name), name


def test_uris_lose_their_user_information_and_signed_parameters() -> None:
    assert redact_uri("s3://AKIAEXAMPLE:topsecretvalue@bucket/prefix") == "s3://***@bucket/prefix"
    assert redact_uri("s3://bucket/prefix") == "s3://bucket/prefix"
    assert redact_uri("./var/lancedb") == "./var/lancedb"
    text = (
        "GET http://127.0.0.1:9000/b/k?X-Amz-Algorithm=AWS4&X-Amz-Credential=AKIA%2F2026"
        "&X-Amz-Signature=abcdef0123&part=1 failed; az://c/p?sig=s3cr3tsig&sv=2024"
    )
    cleaned = scrub(text)
    for leaked in ("AKIA%2F2026", "abcdef0123", "s3cr3tsig"):
        assert leaked not in cleaned
    assert "part=1" in cleaned and "sv=2024" in cleaned


def test_the_store_location_registers_its_secrets_everywhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    option_secret = "opt-" + SECRET
    env_secret = "env-" + SECRET
    user_secret = "uri-" + SECRET
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", env_secret)
    settings = IndexSettings(
        lancedb_uri=f"s3://someuser:{user_secret}@bucket/prefix",
        lancedb_storage_options={
            "aws_secret_access_key": option_secret,
            "region": "us-east-1",
            "allow_http": "true",
        },
    )
    remember_credentials(settings)
    assert shown_uri(settings) == "s3://***@bucket/prefix"
    said = f"failed with {option_secret}, {env_secret} and {user_secret} in us-east-1 (true)"
    cleaned = scrub(said)
    assert option_secret not in cleaned and env_secret not in cleaned
    assert user_secret not in cleaned
    assert "us-east-1" in cleaned and "(true)" in cleaned, "non-secret values stay"

    # The error shape every caller sees.
    payload = StoreError(f"could not write: {option_secret}").to_payload()
    assert option_secret not in json.dumps(payload) and MASK in payload["error"]
    assert option_secret not in MvdbError(said).to_payload()["error"]

    # Log lines, including a traceback's text.
    formatter = JsonFormatter("index")
    try:
        raise RuntimeError(f"object store said {env_secret}")
    except RuntimeError:
        record = logging.LogRecord(
            "t", logging.ERROR, __file__, 1, "opening %s", (user_secret,), sys.exc_info()
        )
    record.fields = {"key": option_secret}
    line = formatter.format(record)
    for secret in (option_secret, env_secret, user_secret):
        assert secret not in line
    assert json.loads(line)["level"] == "error"


def test_short_or_switch_like_values_are_not_masked_everywhere() -> None:
    remember_environment({"AWS_SESSION_TOKEN": "true", "AWS_SECRET_ACCESS_KEY": "abc"})
    assert scrub("true abc") == "true abc"
