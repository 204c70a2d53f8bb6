"""Which desks exist and what each takes next: the manifest format and brief selection."""
