"""Prometheus metrics of the runtime, on one module-level registry.

``mas-ctl serve`` exposes :data:`REGISTRY` on ``/metrics`` (:func:`exposition`); other
runtime parts (the A2A exposure) register their own metrics on the same registry. The
session mailbox updates the turn metrics, the delegation contract the delegation calls.

- ``maslab_turns_total{agent, outcome}``: turns ended, outcome = the ``TurnEnded`` status
  (completed, input_required, failed, canceled) or ``withdrawn`` (left the queue unrun);
- ``maslab_queue_depth{agent}``: turns queued, not yet running;
- ``maslab_turn_latency_seconds{agent}``: from the turn's start to its end;
- ``maslab_delegation_calls_total{source, target, outcome}``: delegate tool calls, outcome
  ``ok``, ``peer_failed`` (the peer's turn failed or was canceled), ``unreachable`` (the
  peer cannot be reached), ``timeout``, ``protocol`` (the peer answered something that is
  not the protocol), ``error`` (another send failure), ``refused`` (depth limit, bad
  arguments, unknown tool);
- ``maslab_tool_calls_total{agent, server, tool, outcome}``: tool-server calls (``tool`` is
  ``tools/list`` for a listing), outcome ``ok``, ``tool_error`` (the tool reported an error),
  ``unreachable``, ``timeout``, ``protocol`` (the server answered garbage), ``refused``;
- ``maslab_conversation_evictions_total{agent, reason}``: conversations evicted whole from
  the in-memory conversation store (:mod:`mas.runtime.memory_history`), reason ``count``
  or ``bytes``; ``maslab_conversation_messages_dropped_total{agent, reason}``: messages
  dropped from one conversation past its bound, reason ``length`` or ``bytes``;
- ``maslab_model_tokens_total{agent, model, kind}``: tokens of the model calls, kind
  ``input`` or ``output``, model the named model (``spec.models``) or the provider's model
  name or the plugin; ``maslab_model_call_tokens{agent, model, kind}``: a histogram of the
  tokens of one call;
- ``maslab_budget_exhausted_total{agent, budget}``: turns ended ``failed`` because a token
  budget (``turn``, ``session``, ``period``) was used up.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

REGISTRY = CollectorRegistry(auto_describe=True)
CONTENT_TYPE = CONTENT_TYPE_LATEST

TURNS = Counter(
    "maslab_turns",
    "Turns ended, by agent and outcome.",
    ["agent", "outcome"],
    registry=REGISTRY,
)
QUEUE_DEPTH = Gauge(
    "maslab_queue_depth",
    "Turns queued in the session mailbox, not yet running, by agent.",
    ["agent"],
    registry=REGISTRY,
)
TURN_LATENCY = Histogram(
    "maslab_turn_latency_seconds",
    "Time from a turn's start to its end, by agent.",
    ["agent"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
    registry=REGISTRY,
)
DELEGATIONS = Counter(
    "maslab_delegation_calls",
    "Delegate tool calls, by source agent, target agent and outcome.",
    ["source", "target", "outcome"],
    registry=REGISTRY,
)

TOOL_CALLS = Counter(
    "maslab_tool_calls",
    "Tool-server calls, by agent, server, tool and outcome.",
    ["agent", "server", "tool", "outcome"],
    registry=REGISTRY,
)

MODEL_TOKENS = Counter(
    "maslab_model_tokens",
    "Tokens of the model calls, by agent, model and kind (input or output).",
    ["agent", "model", "kind"],
    registry=REGISTRY,
)
MODEL_CALL_TOKENS = Histogram(
    "maslab_model_call_tokens",
    "Tokens of one model call, by agent, model and kind (input or output).",
    ["agent", "model", "kind"],
    buckets=(16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576),
    registry=REGISTRY,
)
BUDGET_EXHAUSTED = Counter(
    "maslab_budget_exhausted",
    "Turns ended failed because a token budget was used up, by agent and budget.",
    ["agent", "budget"],
    registry=REGISTRY,
)


def exposition() -> bytes:
    """The text exposition of :data:`REGISTRY` (serve it with :data:`CONTENT_TYPE`)."""
    return generate_latest(REGISTRY)


CONVERSATION_EVICTIONS = Counter(
    "maslab_conversation_evictions",
    "Conversations evicted from the in-memory conversation store, by agent and reason.",
    ["agent", "reason"],
    registry=REGISTRY,
)
CONVERSATION_MESSAGES_DROPPED = Counter(
    "maslab_conversation_messages_dropped",
    "Messages dropped from one conversation past its length or byte bound, by agent and reason.",
    ["agent", "reason"],
    registry=REGISTRY,
)
