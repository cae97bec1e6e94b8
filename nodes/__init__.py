"""One file per graph node; each is ``async (state, runtime) -> update`` and imports no other node."""
