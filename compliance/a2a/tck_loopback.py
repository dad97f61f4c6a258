"""A pytest plugin loaded into the TCK run (``-p tck_loopback``): keep its listeners on loopback.

The TCK's push-notification webhook receiver binds every interface by default. This plugin is
imported before the TCK's ``conftest.py`` and changes that default to 127.0.0.1, so a run never
opens a port beyond the machine. It changes nothing else in the TCK.
"""

from __future__ import annotations

LOOPBACK = "127.0.0.1"


def pytest_configure(config: object) -> None:
    """Rebind the webhook receiver's default host before any fixture creates one."""
    from tck.webhook import server

    init = server.WebhookReceiver.__init__
    defaults = init.__defaults__ or ()
    if defaults and defaults[0] != LOOPBACK:
        init.__defaults__ = (LOOPBACK, *defaults[1:])
