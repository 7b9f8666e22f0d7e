"""The tables of the MySQL lock strategies (seed 000)."""

from django.db import models


class LockClaim(models.Model):
    """The ``mysql`` lock table: a holder INSERTs its name inside its transaction
    and DELETEs it before committing, so a row never outlives its holder; the
    UNIQUE key makes a second holder's INSERT wait on the first's uncommitted row."""

    name = models.CharField(max_length=255, unique=True)


class LockRow(models.Model):
    """The ``mysql-for-update`` lock rows: created on first use and kept; a holder
    locks its row with SELECT ... FOR UPDATE until its transaction ends."""

    name = models.CharField(max_length=255, unique=True)
