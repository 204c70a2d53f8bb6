"""The ``assay`` command line: a thin click layer over the library."""
