"""Implementations of :class:`~mas.runtime.boundary.agentcomm.AgentCommContract`."""
