"""Redis as the catalog store of split tiers and shared servers: the asset, run, module and event
rows (catalog_rows.py)."""
