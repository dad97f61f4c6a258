"""MAS Lab: the Application model (``mas.infra``), the agent runtime and ``mas-ctl``."""
