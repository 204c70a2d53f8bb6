"""The desk host: the loop that claims and runs briefs, its session hooks, and its wakers."""
