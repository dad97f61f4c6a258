"""The Application model, its validation and the route builder (pure: no I/O beyond files)."""
