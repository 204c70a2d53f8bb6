"""The model gateway: a loopback server that journals every model call an agent CLI makes."""
