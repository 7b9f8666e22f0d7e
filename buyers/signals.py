"""A buyer deactivated or deleted: its tokens are withdrawn (``buyers.withdrawals``)."""

from __future__ import annotations

from django.conf import settings
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from .withdrawals import buyer_withdraw


@receiver(post_save, sender=settings.AUTH_USER_MODEL, dispatch_uid="buyers-withdraw-on-deactivate")
def _deactivated(sender, instance, created: bool, **kwargs) -> None:
    if not created and not instance.is_active:
        buyer_withdraw(username=instance.get_username())


@receiver(post_delete, sender=settings.AUTH_USER_MODEL, dispatch_uid="buyers-withdraw-on-delete")
def _deleted(sender, instance, **kwargs) -> None:
    buyer_withdraw(username=instance.get_username())
