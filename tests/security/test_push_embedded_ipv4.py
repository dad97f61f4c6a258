"""The strict push policy judges IPv6 forms that carry an IPv4 address by that address."""

from __future__ import annotations

import pytest

from library_ioa.plugins.a2a.server.push.url_policy import PushUrlPolicy, address_is_public

pytestmark = [pytest.mark.timeout(30)]


@pytest.mark.parametrize(
    "url",
    [
        "http://[2002:7f00:1::]/",  # 6to4 of 127.0.0.1
        "http://[2002:a9fe:a9fe::1]/meta",  # 6to4 of 169.254.169.254
        "http://[2002:c0a8:101::]/",  # 6to4 of 192.168.1.1
        "http://[64:ff9b::7f00:1]/",  # NAT64 of 127.0.0.1
        "http://[64:ff9b::a00:1]/hook",  # NAT64 of 10.0.0.1
        "http://[64:ff9b::a9fe:a9fe]/",  # NAT64 of the metadata address
        "http://[2001:0:808:808:0:f227:80ff:fffe]/",  # Teredo, client 127.0.0.1
        "http://[2001:0:a00:1:0:f227:f7f7:f7f7]/",  # Teredo, server 10.0.0.1
    ],
)
async def test_embedded_private_ipv4_forms_are_refused(url: str) -> None:
    policy = PushUrlPolicy(resolve_timeout=3)
    reason = await policy.refusal(url)
    assert reason is not None and "non-public" in reason


@pytest.mark.parametrize(
    "address",
    [
        "2002:808:808::1",  # 6to4 of 8.8.8.8
        "64:ff9b::808:808",  # NAT64 of 8.8.8.8
        "2001:0:808:808:0:f227:f7f7:f7f7",  # Teredo: server 8.8.8.8, client 8.8.8.8
    ],
)
def test_embedded_public_ipv4_forms_are_public(address: str) -> None:
    assert address_is_public(address)
