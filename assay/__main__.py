"""``python -m assay`` runs the CLI, so tests and subprocesses need no console script."""

from assay.cli.main import main

if __name__ == "__main__":
    main()
