"""GitHub as a forge: the REST layer, the adapter (git layer + API layer), and ``assay init``."""
