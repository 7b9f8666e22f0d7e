"""The scenario catalog (shared/SCENARIOS.md): each pitfall from the seed articles,
run broken and fixed, with numbers. ``python -m scenarios --help``; the catalog is
``scenarios.catalog.CATALOG``."""
