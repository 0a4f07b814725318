"""The compiler of Nominal's compute language, laid out as the language is:

- plan.py: `compile_plan`, from a request to a `Plan` (the channels read, the tree of evaluators);
- limits.py: what one compilation may ask for and expand (`Limits`, the compile budget);
- catalogs.py: the catalogs a compilation may look up, passed in by whoever compiles;
- registry.py: which builder builds each variant of each union, and which are refused and why;
- builder.py: the `Builder`, one compilation's state and the JSON reading every builder shares;
- helpers.py, datasets.py: what several builder families share (radii, datasets and the catalog);
- builders/: one module per family of nodes, each registering its variants.
"""
