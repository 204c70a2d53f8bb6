"""The desk kinds: what runs inside one claimed brief (``agent``, ``cli``, and their tools)."""
