"""``make chaos``: sales with retrying buyers while a server of the stack fails, and
whether every answer stayed true and nothing was lost (``python -m chaos --help``)."""
