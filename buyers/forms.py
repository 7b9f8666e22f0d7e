"""The sign-in forms of the shop's page and of the admin's login, each asking
``buyers.lockout`` before Django checks the password and telling it how that went."""

from __future__ import annotations

from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError

from common.throttles import client_bucket

from .lockout import sign_in_attempt


class LockoutMixin:
    """Raises ``SignInLocked`` out of ``is_valid()`` (no form error: the view answers
    it 429, ``buyers.views.lockout_answered``) while the client or the username is
    locked out; counts a refused try, forgets the username's on success."""

    def clean(self):
        username = self.cleaned_data.get("username")
        if username is None or not self.cleaned_data.get("password"):
            return super().clean()  # Django refuses it without hashing anything
        with sign_in_attempt(client=client_bucket(self.request), username=username, refused=ValidationError):
            return super().clean()


class SignInForm(LockoutMixin, AuthenticationForm):
    pass


class AdminSignInForm(LockoutMixin, AdminAuthenticationForm):
    pass
