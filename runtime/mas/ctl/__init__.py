"""mas-ctl: run, serve and inspect an Application on one machine."""
