"""The desk layer's records on the forge: events, reviews, and the one read of the forge."""
