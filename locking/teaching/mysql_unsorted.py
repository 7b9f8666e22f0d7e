"""BROKEN ON PURPOSE: the MySQL lock table without the seed's ordering rule.

Names are taken in the order given, not sorted, so two purchases of the same two
items listed in opposite orders each take one name and wait for the other: InnoDB
detects the deadlock and rolls one back (scenario S12). ``between_names`` runs after
the first name is taken, so a scenario can make the interleaving certain.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.db.backends.utils import CursorWrapper

from ..backends.mysql import InsertLock, InsertLockBackend


class UnsortedInsertLock(InsertLock):
    def __init__(self, names: Iterable[str], *, between_names: Callable[[], None] = lambda: None,
                 **kwargs: Any) -> None:
        names = list(dict.fromkeys(names))  # de-duplicated, but in the caller's order
        super().__init__(names, **kwargs)
        self.names = names
        self.between_names = between_names

    def take(self, cursor: CursorWrapper, name: str) -> None:
        super().take(cursor, name)
        if name == self.names[0]:
            self.between_names()


class UnsortedInsertLockBackend(InsertLockBackend):
    def lock_many(self, names: Iterable[str], *,
                  between_names: Callable[[], None] = lambda: None) -> UnsortedInsertLock:
        return UnsortedInsertLock(names, backend=self, wait_timeout=self.wait_timeout,
                                  between_names=between_names)
