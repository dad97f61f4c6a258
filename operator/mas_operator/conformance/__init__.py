"""Conformance of the deployed agents: which decision lives in which module.

- :mod:`~mas_operator.conformance.jobs` (pure): the Job that probes one agent's AgentCard,
  and when a new one is due (its name carries a digest of everything it probes).
- :mod:`~mas_operator.conformance.step`: the conformance step of a reconcile, its only API
  I/O: create the Jobs that are due, delete the stale ones, read each verdict.
- :mod:`~mas_operator.conformance.verdicts` (pure): from a Job and its pod to each agent's
  ``Conformant`` verdict and the Application's condition.
- :mod:`~mas_operator.conformance.command`: ``mas-operator conformance``, the chart's Helm
  test, which probes every published AgentCard from outside a reconcile and reads each
  verdict as the step does.
"""
