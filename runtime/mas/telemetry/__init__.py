"""Traces and structured logs shared by the runtime, mas-ctl and the operator."""
