"""The A2A server side: the executor that maps A2A sends onto the session mailbox."""
