"""The ``oidc`` scheme of ``a2a.auth``: bad settings refused with the field, the value and what
is accepted; the card's OpenID Connect scheme and no static credential for it."""

from __future__ import annotations

import pydantic
import pytest

from library_ioa.serving.auth import card_security, resolve_credentials
from mas.infra.models import A2AAuth, A2AOptions

pytestmark = pytest.mark.timeout(30)

ISSUER = "https://login.example.com/realms/staff"


def oidc(**options: object) -> dict[str, object]:
    return {"type": "oidc", "oidc": {"issuer": ISSUER, "audiences": ["mas"], **options}}


def refusal(document: dict[str, object]) -> str:
    with pytest.raises(pydantic.ValidationError) as refused:
        A2AOptions.model_validate(document)
    return str(refused.value)


def test_bad_oidc_settings_name_the_field_and_what_is_accepted() -> None:
    assert "type oidc needs oidc: {issuer, audiences}" in refusal(
        {"auth": {"schemes": [{"type": "oidc"}]}}
    )
    text = refusal({"auth": {"schemes": [oidc(issuer="http://login.example.com")]}})
    assert "issuer 'http://login.example.com' is not an issuer URL" in text
    assert "plain http only on loopback" in text
    assert "audiences" in refusal({"auth": {"schemes": [oidc(audiences=[])]}})
    both = {**oidc(), "value_env": "TOKEN"}
    assert "type oidc takes no secret_key_ref or value_env" in refusal(
        {"auth": {"schemes": [both]}}
    )
    text = refusal({"allow": ["oidc:user:alice"]})
    assert "allow[0] 'oidc:user:alice' names an OIDC caller, but a2a.auth has no scheme" in text
    assert "'oidc:group:GROUP'" in refusal({"auth": {"schemes": [oidc()]}, "allow": ["oidc:x"]})


def test_the_card_declares_an_openid_connect_scheme_and_no_static_credential() -> None:
    auth = A2AAuth.model_validate({"schemes": [oidc(), {"type": "bearer", "value_env": "T"}]})
    schemes, requirements = card_security(auth)
    scheme = schemes["oidc"].open_id_connect_security_scheme
    assert scheme.open_id_connect_url == f"{ISSUER}/.well-known/openid-configuration"
    assert [list(r.schemes) for r in requirements] == [["oidc"], ["bearer"]]
    assert [c.scheme_id for c in resolve_credentials("desk", auth, {"T": "x"})] == ["bearer"]
