"""The tables of the MySQL lock strategies (article 000)."""

from django.db import models

# Lock names compare byte for byte, as Redis and ZooKeeper compare them (MariaDB's
# default collation folds case and ignores trailing spaces).
BYTE_EXACT = "utf8mb4_nopad_bin"


class LockClaim(models.Model):
    """The ``mysql`` lock table: a holder INSERTs its name (``slot`` ``CLAIM``) inside
    its transaction and DELETEs it before committing, so a claim never outlives its
    holder; the UNIQUE key makes a second holder's INSERT wait on the first's
    uncommitted row.

    Beside each name's claim lies its ``FLOOR``, a row made once and kept, which sorts
    just before the claim. Without it, names next to each other in the index (a
    product's segments, ``stock:sku:0``, ``stock:sku:1``…) share the gaps between
    their claims: the gap locks a waiter takes on one name's claim (and passes on to
    the next record when a deleted claim is purged) block the next name's INSERT,
    and holders of different names deadlock. With floors, every gap a claim's INSERT
    and its waiters touch lies between its own floor and the next name's, which
    nothing locks."""

    FLOOR, CLAIM = 0, 1

    name = models.CharField(max_length=255, db_collation=BYTE_EXACT)
    slot = models.PositiveSmallIntegerField(default=CLAIM)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["name", "slot"], name="lock_claim_name_slot")]


class LockRow(models.Model):
    """The ``mysql-for-update`` lock rows: created on first use and kept; a holder
    locks its row with SELECT ... FOR UPDATE until its transaction ends."""

    name = models.CharField(max_length=255, unique=True, db_collation=BYTE_EXACT)
