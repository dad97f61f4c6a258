"""Session-level pieces shared by the mas-ctl modes."""
