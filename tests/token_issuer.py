"""An OIDC issuer the test holds: generated signing keys, its discovery document and JWKS."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

ISSUER = "https://kubernetes.default.svc.cluster.local"
AUDIENCE = "maslab.io/a2a"
NOW = 1_800_000_000.0
DISCOVERY = f"{ISSUER}/.well-known/openid-configuration"
JWKS = f"{ISSUER}/openid/v1/jwks"


class Issuer:
    """Signing keys the test holds, published as an OIDC discovery document and JWKS."""

    def __init__(self) -> None:
        self.keys: dict[str, Any] = {}
        self.published: list[str] = []
        self.fetched: list[str] = []
        self.add("rsa-1", rsa.generate_private_key(public_exponent=65537, key_size=2048))

    def add(self, kid: str, key: Any, publish: bool = True) -> None:
        self.keys[kid] = key
        if publish:
            self.published.append(kid)

    async def fetch(self, url: str) -> Mapping[str, Any]:
        self.fetched.append(url)
        if url == DISCOVERY:
            return {"issuer": ISSUER, "jwks_uri": JWKS}
        assert url == JWKS
        keys = []
        for kid in self.published:
            public = self.keys[kid].public_key()
            if isinstance(public, rsa.RSAPublicKey):
                data = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(public))
                data["alg"] = "RS256"
            else:
                data = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(public))
                data["alg"] = "ES256"
            keys.append({**data, "kid": kid, "use": "sig"})
        return {"keys": keys}

    def token(self, kid: str = "rsa-1", **claims: Any) -> str:
        body = {
            "iss": ISSUER,
            "aud": [AUDIENCE],
            "sub": "system:serviceaccount:team-a:desk-concierge",
            "iat": int(NOW),
            "nbf": int(NOW),
            "exp": int(NOW) + 600,
            "kubernetes.io": {
                "namespace": "team-a",
                "serviceaccount": {"name": "desk-concierge", "uid": "u1"},
                "pod": {"name": "desk-concierge-7d9-abc", "uid": "u2"},
            },
        }
        body.update(claims)
        body = {k: v for k, v in body.items() if v is not None}
        key = self.keys[kid]
        alg = "RS256" if isinstance(key, rsa.RSAPrivateKey) else "ES256"
        return jwt.encode(body, key, algorithm=alg, headers={"kid": kid})


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now
