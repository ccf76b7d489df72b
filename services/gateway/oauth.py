"""OAuth 2.1 for the gateway as a resource server, per the MCP authorization specification.

With `OAUTH_ISSUER` set, a bearer token that is not one of the static tokens is taken as a JWT
access token from that authorization server and checked here: an asymmetric signature
(RS*, PS*, ES*, EdDSA; never `none`, never an HMAC, so a public key can never be used as an
HMAC secret) by a key of the issuer's JWKS, `iss`, `aud` (one of `OAUTH_AUDIENCE`), `exp`
and `nbf` with `LEEWAY_S` of clock skew. Its `scope` (or `scp`) claim becomes a `Grant`
(`OAUTH_READ_SCOPE`, `OAUTH_WRITE_SCOPE`), and `OAUTH_LIBRARIES_CLAIM`, when set, the
libraries it may use.

Keys come from `OAUTH_JWKS_URL`, or from the `jwks_uri` of the issuer's metadata
(`/.well-known/openid-configuration`, then `/.well-known/oauth-authorization-server`), over
httpx with timeouts. They are cached; a token naming a key id the cache lacks makes one fetch
again, at most once per `REFETCH_INTERVAL_S`, so a flood of made-up key ids cannot turn the
gateway into a load generator against the authorization server.

How an MCP client finds the authorization server (the protected-resource metadata and the
`WWW-Authenticate` challenge) is `services.gateway.resource_metadata`.

    InvalidToken (401 unauthorized)   the JWT is malformed, badly signed, expired, not for us
    UpstreamError (503)               the authorization server's keys cannot be fetched
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx
import jwt

from libs import SERVER_NAME
from libs.errors import InvalidInputError, UnauthorizedError, UpstreamError
from services.gateway.scopes import Grant, Need
from services.gateway.urls import check_url

if TYPE_CHECKING:
    from services.gateway.settings import GatewaySettings

log = logging.getLogger(__name__)

ASYMMETRIC_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
LEEWAY_S = 30
REFETCH_INTERVAL_S = 60.0
FETCH_TIMEOUT_S = 10.0
MAX_DOCUMENT_BYTES = 1024 * 1024


class InvalidToken(UnauthorizedError):
    """A bearer token that is not a valid access token for this gateway."""


def metadata_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata may be: OpenID Connect discovery, then RFC 8414 (with the
    issuer's path after the well-known segment), then the RFC 8414 form some servers use
    for issuers with a path (the well-known segment appended)."""
    parts = urlsplit(issuer)
    origin = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    urls = [f"{origin}{path}/.well-known/openid-configuration"]
    urls.append(f"{origin}/.well-known/oauth-authorization-server{path}")
    if path:
        urls.append(f"{origin}{path}/.well-known/oauth-authorization-server")
    return urls


@dataclass(frozen=True)
class SigningKey:
    """One JWKS key: the public key and the algorithm the JWK pins it to, if it does."""

    jwk: jwt.PyJWK
    alg: str | None


class JwksCache:
    """The authorization server's signing keys by key id, fetched when first needed and again
    for an unknown key id, at most once per `min_interval_s`."""

    def __init__(
        self,
        issuer: str,
        jwks_url: str | None,
        client: httpx.AsyncClient,
        *,
        min_interval_s: float = REFETCH_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.issuer = issuer
        self.jwks_url = jwks_url
        self._client = client
        self._min_interval_s = min_interval_s
        self._clock = clock
        self._keys: dict[str | None, SigningKey] = {}
        self._fetched_at: float | None = None
        self._failure: str | None = None  # why the last fetch failed, while no key is known
        self._lock = asyncio.Lock()
        self.fetches = 0

    async def key(self, kid: str | None) -> SigningKey:
        found = self._lookup(kid)
        if found is not None:
            return found
        async with self._lock:
            found = self._lookup(kid)  # another request may have fetched meanwhile
            if found is None and self._may_fetch():
                await self._refresh()
                found = self._lookup(kid)
        if found is None and not self._keys and self._failure is not None:
            raise UpstreamError(
                f"{self._failure}; the gateway tries again at most every "
                f"{self._min_interval_s:.0f} s"
            )
        if found is None:
            named = f"key id {kid!r}" if kid else "no key id (kid)"
            raise InvalidToken(
                f"the access token names {named}, which is not among the signing keys of "
                f"{self.issuer}; get a new token from that authorization server"
            )
        return found

    def _lookup(self, kid: str | None) -> SigningKey | None:
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))  # one key: a token may leave kid out
        return self._keys.get(kid)

    def _may_fetch(self) -> bool:
        return self._fetched_at is None or self._clock() - self._fetched_at >= self._min_interval_s

    async def _refresh(self) -> None:
        """Fetch the keys; a failure keeps the keys known so far and is remembered."""
        self._fetched_at = self._clock()
        self.fetches += 1
        try:
            self._keys = await self._fetch()
            self._failure = None
        except UpstreamError as exc:
            self._failure = exc.message
            if not self._keys:
                raise
            log.warning("could not refresh the signing keys: %s", exc.message)

    async def _fetch(self) -> dict[str | None, SigningKey]:
        if self.jwks_url is None:
            self.jwks_url = await self._discover_jwks_url()
        document = await self._get_json(self.jwks_url, "JWKS")
        keys: dict[str | None, SigningKey] = {}
        for entry in document.get("keys", []) if isinstance(document, dict) else []:
            if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
                continue
            try:
                key = jwt.PyJWK(entry)
            except jwt.PyJWTError as exc:  # a key type or curve this server cannot use
                log.info("skipping a JWKS key: %s", exc)
                continue
            alg = entry.get("alg")
            keys[entry.get("kid")] = SigningKey(key, alg if isinstance(alg, str) else None)
        if not keys:
            raise UpstreamError(
                f"the JWKS at {self.jwks_url} holds no usable signing key; check "
                "OAUTH_JWKS_URL or the authorization server's keys"
            )
        return keys

    async def _discover_jwks_url(self) -> str:
        for url in metadata_urls(self.issuer):
            try:
                metadata = await self._get_json(url, "metadata")
            except UpstreamError:
                continue
            if not isinstance(metadata, dict):
                continue
            if metadata.get("issuer") != self.issuer:
                raise UpstreamError(
                    f"the metadata at {url} names the issuer {metadata.get('issuer')!r}, not "
                    f"OAUTH_ISSUER {self.issuer!r}; set OAUTH_ISSUER to exactly the issuer "
                    "the authorization server announces"
                )
            jwks_uri = metadata.get("jwks_uri")
            if isinstance(jwks_uri, str):
                try:
                    return check_url(jwks_uri, "the metadata's jwks_uri")
                except InvalidInputError as exc:
                    raise UpstreamError(exc.message) from exc
        raise UpstreamError(
            f"could not read the metadata of the authorization server {self.issuer} (tried "
            f"{', '.join(metadata_urls(self.issuer))}); check OAUTH_ISSUER, or set "
            "OAUTH_JWKS_URL to its JWKS"
        )

    async def _get_json(self, url: str, what: str) -> Any:
        try:
            response = await self._client.get(url, headers={"Accept": "application/json"})
        except httpx.HTTPError as exc:
            raise UpstreamError(
                f"could not fetch the authorization server's {what} from {url}: "
                f"{type(exc).__name__}; is it reachable from the gateway?"
            ) from exc
        if response.status_code != 200 or len(response.content) > MAX_DOCUMENT_BYTES:
            raise UpstreamError(
                f"the authorization server's {what} at {url} answered HTTP "
                f"{response.status_code} ({len(response.content)} bytes)"
            )
        try:
            return response.json()
        except ValueError as exc:
            raise UpstreamError(f"the {what} at {url} is not JSON") from exc


class TokenVerifier:
    """JWT access tokens to `Grant`s; see the module docstring."""

    def __init__(self, settings: GatewaySettings, keys: JwksCache) -> None:
        assert settings.oauth_issuer is not None
        self.issuer = settings.oauth_issuer
        self.audience = list(settings.oauth_audience)
        self.read_scope = settings.oauth_read_scope
        self.write_scope = settings.oauth_write_scope
        self.libraries_claim = settings.oauth_libraries_claim
        self.keys = keys

    async def verify(self, token: str) -> Grant:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise InvalidToken(f"the bearer token is not a JWT access token ({exc})") from exc
        alg = header.get("alg")
        if alg not in ASYMMETRIC_ALGORITHMS:
            raise InvalidToken(
                f"the access token is signed with {alg!r}; this server accepts only "
                f"{', '.join(sorted(ASYMMETRIC_ALGORITHMS))} signatures from {self.issuer}"
            )
        kid = header.get("kid")
        key = await self.keys.key(kid if isinstance(kid, str) else None)
        if key.alg is not None and key.alg != alg:
            raise InvalidToken(
                f"the access token is signed with {alg}, but its key {kid!r} is for {key.alg}"
            )
        try:
            claims = jwt.decode(
                token,
                key.jwk.key,
                algorithms=[alg],
                audience=self.audience,
                issuer=self.issuer,
                leeway=LEEWAY_S,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError as exc:
            raise InvalidToken("the access token has expired; get a new one") from exc
        except jwt.ImmatureSignatureError as exc:
            raise InvalidToken(
                "the access token is not valid yet (nbf or iat in the future); check the "
                "clocks of the client and the authorization server"
            ) from exc
        except jwt.InvalidIssuerError as exc:
            raise InvalidToken(
                f"the access token was not issued by {self.issuer}; sign in there"
            ) from exc
        except jwt.InvalidAudienceError as exc:
            raise InvalidToken(
                "the access token is not meant for this server (its aud is not one of "
                f"{', '.join(self.audience)}); ask the authorization server for a token for "
                "this resource"
            ) from exc
        except jwt.MissingRequiredClaimError as exc:
            raise InvalidToken(f"the access token lacks the claim '{exc.claim}'") from exc
        except jwt.InvalidSignatureError as exc:
            raise InvalidToken(
                f"the access token's signature does not verify with the key {kid!r} of "
                f"{self.issuer}"
            ) from exc
        except jwt.PyJWTError as exc:
            raise InvalidToken(f"the access token is not valid: {exc}") from exc
        return self._grant(claims)

    def _grant(self, claims: dict[str, Any]) -> Grant:
        granted = _scopes_of(claims)
        needs: dict[Need, str] = {"read": self.read_scope, "write": self.write_scope}
        scopes = frozenset(need for need, name in needs.items() if name in granted)
        libraries: frozenset[str] | None = None
        if self.libraries_claim:
            listed = _names(claims.get(self.libraries_claim))
            libraries = None if "*" in listed else frozenset(listed)
        subject = claims.get("sub")
        return Grant(
            scopes=scopes,
            libraries=libraries,
            scope_names={"read": self.read_scope, "write": self.write_scope},
            subject=subject if isinstance(subject, str) else None,
        )


def _names(value: object) -> list[str]:
    """A claim holding names: a JSON list of strings, or one string of names separated by
    spaces or commas."""
    if isinstance(value, str):
        return [part for part in value.replace(",", " ").split() if part]
    if isinstance(value, list):
        return [item for item in value if isinstance(item, str) and item]
    return []


def _scopes_of(claims: dict[str, Any]) -> set[str]:
    """RFC 9068 puts scopes in `scope` (space-separated); Entra ID and Okta use `scp`."""
    return set(_names(claims.get("scope"))) | set(_names(claims.get("scp")))


@asynccontextmanager
async def verifier(settings: GatewaySettings) -> AsyncIterator[TokenVerifier | None]:
    """The token verifier for the app's lifetime, with its own HTTP client (no proxies from
    the environment, bounded time); `None` while OAuth is off."""
    if not settings.oauth_issuer:
        yield None
        return
    async with httpx.AsyncClient(
        timeout=httpx.Timeout(FETCH_TIMEOUT_S),
        trust_env=False,
        follow_redirects=False,
        headers={"User-Agent": f"{SERVER_NAME}/oauth"},
    ) as client:
        keys = JwksCache(settings.oauth_issuer, settings.oauth_jwks_url, client)
        yield TokenVerifier(settings, keys)
