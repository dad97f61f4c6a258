"""The agent runtime: contracts, plugins and the registry that selects them."""
