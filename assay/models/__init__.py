"""Model adapters behind one small interface (see ``assay.models.base``)."""
