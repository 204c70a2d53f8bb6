"""Forge fixtures shared by every test area (bare repos, git daemon, smart HTTP)."""
