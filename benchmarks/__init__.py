"""The benchmarks: each ``python -m benchmarks.<name>`` against the running stack."""

import os

# Some measure the shop's own code (the gate's keys and scripts), whose modules bring
# DRF's, which read Django's settings as they load: the base settings, as the stack's
# processes have them, unless the caller named others.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flashsale.settings.base")
