"""Protocol plugins of the MAS Lab runtime (A2A client and server)."""
