"""Agent CLIs as desks: the profiles that point each CLI at the gateway."""
