"""The contracts the runtime checks; plugins implement them."""
