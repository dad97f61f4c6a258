"""mas-ctl subcommands, one module each."""
