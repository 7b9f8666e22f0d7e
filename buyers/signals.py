"""A buyer deactivated or deleted: its tokens are withdrawn (``buyers.withdrawals``)
before the row changes. When the withdrawal cannot be written (the cache's Redis is
away), the change is refused with 503 ``unavailable`` and nothing changes: a buyer
made inactive whose tokens still buy would be an answer that is not true. Should the
row's write fail after the withdrawal, the buyer signs in again: nothing is lost."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models.signals import pre_delete, pre_save
from django.dispatch import receiver

from common.cache_errors import CACHE_ERRORS
from common.errors import Unavailable

from .withdrawals import buyer_withdraw


def _withdrawn(username: str, change: str) -> None:
    try:
        buyer_withdraw(username=username)
    except CACHE_ERRORS as e:
        raise Unavailable(f"buyer {username} is not {change}: its tokens could not be withdrawn "
                          "(the cache's Redis cannot be reached); nothing changed", backend="redis") from e


@receiver(pre_save, sender=settings.AUTH_USER_MODEL, dispatch_uid="buyers-withdraw-on-deactivate")
def _deactivating(sender: type[User], instance: User, **kwargs: object) -> None:
    # A row saved inactive again (its name edited, say) withdraws again: harmless, an
    # inactive buyer is issued no token.
    if not instance._state.adding and not instance.is_active:
        _withdrawn(instance.get_username(), "deactivated")


@receiver(pre_delete, sender=settings.AUTH_USER_MODEL, dispatch_uid="buyers-withdraw-on-delete")
def _deleting(sender: type[User], instance: User, **kwargs: object) -> None:
    _withdrawn(instance.get_username(), "deleted")
