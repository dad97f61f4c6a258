"""Workload identity between agents: the tokens agents send and the checks they make.

- :mod:`.keys`: an issuer's signing keys, from its OIDC discovery document and JWKS, cached
  and refreshed when a token names a key id the cache does not hold;
- :mod:`.verification`: :class:`~.verification.TokenVerifier` checks a JWT locally
  (signature, issuer, audience, expiry and not-before with a small clock skew) and maps a
  Kubernetes ServiceAccount token to the calling workload;
- :mod:`.token_file`: the caller's own projected token, re-read when the kubelet rotates it.

The naming rules (the audience, the token path, the ServiceAccount of each agent) are in
:mod:`mas.infra.identity`, shared with the operator. No kubernetes client: plain HTTPS.
"""
