"""Where an A2A endpoint keeps its tasks, push configs and conversations (``a2a.task_store``).

- :mod:`.task_stores`: ``TaskStores``, what the SDK's request handler takes from an
  endpoint's stores, and ``TaskStoreError``;
- :mod:`.endpoint`: :func:`~.endpoint.build_task_stores` turns ``TaskStoreOptions`` into
  those stores, and states their rules;
- :mod:`.memory`: the bounded in-memory task store (the default);
- :mod:`.final_state`: a terminal state is final, around the in-memory store;
- the ``sql`` store, imported only for one: :mod:`.sql` (``build_sql_stores``),
  :mod:`.sql_guards` (a terminal state is final on the database stores), :mod:`.runs`
  (which replica runs which in-flight task, and failing the tasks of replicas that died) and
  :mod:`.sql_history` (the agent's conversations in the same database).
"""
