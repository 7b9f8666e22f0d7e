"""A local stand-in for a pager: the receiver the stack's Alertmanager notifies, so
that an alert reaches someone a user can see here, with no mail server or chat
service to reach. Not product code: Alertmanager sends it what it would send any
webhook receiver (``webhook_config``: a JSON body, ``version`` 4, one notification per
alert group, ``status`` firing or resolved, its ``alerts`` with their labels and
annotations), and a real receiver (email, a chat webhook) is one change to
Alertmanager's config (docs/reference/metrics.md#where-alerts-go).

It writes one JSON line per alert of each notification to its log (stdout, and
``--log FILE``), and answers ``GET /alerts`` with the last notifications it kept
(newest first; ``?status=firing`` for those alone).
"""
