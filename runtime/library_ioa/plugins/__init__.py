"""Plugins by protocol."""
