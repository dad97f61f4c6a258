"""The conformance probe behind ``mas-ctl conformance``: does what an AgentCard advertises work?

:func:`~mas.ctl.conformance.probe.probe` fetches the card, then runs the checks of
:mod:`~mas.ctl.conformance.checks` on every advertised interface with the official a2a-sdk
client, and returns a :class:`mas.infra.conformance.ConformanceResult`.
"""

from mas.ctl.conformance.card import CardUnavailable, ProbeUsageError, card_url
from mas.ctl.conformance.probe import probe

__all__ = ["CardUnavailable", "ProbeUsageError", "card_url", "probe"]
