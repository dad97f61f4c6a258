"""The kopf operator that reconciles infra.maslab.io/v1 Application resources.

Which decision lives where:

- **When** an Application is reconciled or retried, and what is remembered between
  reconciles (dirty, backoff and ``Retry-After``, our own last writes, settled, the cold
  pass): :mod:`mas_operator.workqueue`, the only owner; the backoff policy itself is
  :mod:`mas_operator.backoff` (pure).
- **What** the kopf watches do (remember the object, enqueue its owner) and the glue that
  runs one reconcile for the queue: :mod:`mas_operator.handlers`; the children's indexes
  the reconcile reads instead of LISTs: :mod:`mas_operator.indexes`.
- **How** one reconcile brings an Application about: :mod:`mas_operator.reconcile`; the
  children it wants come from the pure plan (:mod:`mas_operator.plan`) and builders
  (:mod:`mas_operator.children` and the ``build_*`` modules); the writes it skips because
  they would change nothing: :mod:`mas_operator.noops`; the status our last write left, for
  a reconcile that starts from an older copy: :mod:`mas_operator.status_writes`; its API
  I/O: :mod:`mas_operator.kube`.
- What the status says: :mod:`mas_operator.conditions` and :mod:`mas_operator.edges`; the
  opt-in AgentCard checks of external endpoints: :mod:`mas_operator.cardchecks`.
- Conformance (the Jobs a reconcile runs, their verdicts, and ``mas-operator
  conformance``): :mod:`mas_operator.conformance`.
- Running it (credentials, kopf settings, metrics, liveness, the leader Lease):
  :mod:`mas_operator.runner`, :mod:`mas_operator.leases`, :mod:`mas_operator.cli`.
"""
