"""Desks: manifests, agent tools, the agent loop, the desk loop, resync and objectives."""
