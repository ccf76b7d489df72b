"""A hand-made authorization server for the token tests: its own RSA and EC keys, its metadata
and JWKS served by a real ASGI app on loopback, and `mint` to sign access tokens with any
claims, header and key, the forged ones included (`alg: none`, HS256 keyed with the public
key, a key of someone else's under a published key id).

The end-to-end tests use a real authorization server (`oidc-provider`); this one exists for
the tokens no real server would ever issue.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from dataclasses import dataclass, field
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass
class LocalIssuer:
    """Keys by key id; `published` are the ids its JWKS lists (the rest sign forgeries)."""

    url: str = ""
    keys: dict[str, PrivateKey] = field(default_factory=dict)
    published: list[str] = field(default_factory=list)
    jwks_requests: int = 0

    @classmethod
    def create(cls) -> LocalIssuer:
        issuer = cls()
        issuer.keys = {
            "rsa-1": rsa.generate_private_key(public_exponent=65537, key_size=2048),
            "ec-1": ec.generate_private_key(ec.SECP256R1()),
            "rsa-next": rsa.generate_private_key(public_exponent=65537, key_size=2048),
            "attacker": rsa.generate_private_key(public_exponent=65537, key_size=2048),
        }
        issuer.published = ["rsa-1", "ec-1"]
        return issuer

    def jwks(self) -> dict[str, Any]:
        keys = []
        for kid in self.published:
            public = self.keys[kid].public_key()
            algorithm = jwt.algorithms.RSAAlgorithm if kid.startswith("rsa") else None
            if algorithm is not None:
                entry = json.loads(algorithm.to_jwk(public))
                entry["alg"] = "RS256"
            else:
                entry = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(public))
            entry.update(kid=kid, use="sig")
            keys.append(entry)
        return {"keys": keys}

    def public_pem(self, kid: str) -> bytes:
        return (
            self.keys[kid]
            .public_key()
            .public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )

    def claims(self, audience: str, **extra: Any) -> dict[str, Any]:
        now = int(time.time())
        base: dict[str, Any] = {
            "iss": self.url,
            "sub": "alice",
            "aud": audience,
            "iat": now,
            "exp": now + 600,
            "scope": "mcpvectordb:read mcpvectordb:write",
        }
        base.update(extra)
        return {k: v for k, v in base.items() if v is not None}

    def mint(self, claims: dict[str, Any], *, kid: str = "rsa-1", signer: str | None = None) -> str:
        """Sign `claims` with the key `signer` (default: the key of `kid`), naming `kid`."""
        key = self.keys[signer or kid]
        algorithm = "RS256" if isinstance(key, rsa.RSAPrivateKey) else "ES256"
        return jwt.encode(claims, key, algorithm=algorithm, headers={"kid": kid})

    def unsigned(self, claims: dict[str, Any], *, kid: str = "rsa-1") -> str:
        """`alg: none`: no signature at all."""
        header = b64url(json.dumps({"alg": "none", "typ": "JWT", "kid": kid}).encode())
        return f"{header}.{b64url(json.dumps(claims).encode())}."

    def hmac_with_public_key(self, claims: dict[str, Any], *, kid: str = "rsa-1") -> str:
        """HS256 keyed with the published public key (PEM): the key-confusion attack."""
        header = b64url(json.dumps({"alg": "HS256", "typ": "JWT", "kid": kid}).encode())
        body = f"{header}.{b64url(json.dumps(claims).encode())}"
        mac = hmac.new(self.public_pem(kid), body.encode(), hashlib.sha256).digest()
        return f"{body}.{b64url(mac)}"

    def app(self) -> Starlette:
        async def metadata(request: Request) -> JSONResponse:
            return JSONResponse(
                {"issuer": self.url, "jwks_uri": f"{self.url}/jwks", "token_endpoint": "x"}
            )

        async def jwks(request: Request) -> JSONResponse:
            self.jwks_requests += 1
            return JSONResponse(self.jwks())

        return Starlette(
            routes=[
                Route("/.well-known/openid-configuration", metadata),
                Route("/jwks", jwks),
            ]
        )
