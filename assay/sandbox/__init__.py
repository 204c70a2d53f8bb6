"""The sandbox: where agent-chosen and branch-chosen code runs, holding no credential."""
