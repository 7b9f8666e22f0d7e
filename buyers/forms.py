"""The sign-in forms of the shop's page and of the admin's login, each asking
``buyers.lockout`` before Django checks the password and telling it how that went."""

from __future__ import annotations

from typing import Any

from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ImproperlyConfigured, ValidationError

from common.throttles import client_bucket

from .lockout import sign_in_attempt


class LockoutMixin(AuthenticationForm):
    """Raises ``SignInLocked`` out of ``is_valid()`` (no form error: the view answers
    it 429, ``buyers.views.lockout_answered``) while the client or the username is
    locked out; counts a refused try, forgets the username's on success."""

    def clean(self) -> dict[str, Any]:
        username = self.cleaned_data.get("username")
        if username is None or not self.cleaned_data.get("password"):
            return super().clean()  # Django refuses it without hashing anything
        if self.request is None:  # the views that use it pass theirs
            raise ImproperlyConfigured("a sign-in form is made with its request")
        with sign_in_attempt(client=client_bucket(self.request), username=username, refused=ValidationError):
            return super().clean()


class SignInForm(LockoutMixin):
    pass


class AdminSignInForm(LockoutMixin, AdminAuthenticationForm):
    pass
