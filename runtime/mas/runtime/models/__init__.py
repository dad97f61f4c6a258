"""Model plugins (registry category ``model``): the contract in :mod:`.base`, one module each."""
