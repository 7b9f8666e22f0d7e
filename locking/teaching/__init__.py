"""Teaching variants: the broken locks the seed articles start from, kept so their
failure can be shown beside the fix. Never configure one as a strategy."""
