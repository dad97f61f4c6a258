"""Push notifications of an A2A endpoint (``a2a.push``).

- :mod:`.url_policy`: which push URLs are accepted and called (the SSRF policy);
- :mod:`.configs`: the cap on push configs per task;
- :mod:`.ownership`: who may attach a push config to a task without ``a2a.auth``;
- :mod:`.delivery`: delivery off the event path, per-config queues and per-receiver pools.
"""
