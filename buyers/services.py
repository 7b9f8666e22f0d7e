"""Buyers: Django's own users, made and signed in, each with a bearer token."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.contrib.auth import authenticate, get_user_model
from django.contrib.auth.models import User
from django.contrib.auth.password_validation import (
    MinimumLengthValidator,
    get_default_password_validators,
    validate_password,
)
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from common.challenges import challenge_verify
from common.errors import CredentialsRefused, InvalidInput, UsernameTaken

from .lockout import sign_in_attempt, sign_in_check, sign_in_failed
from .tokens import Issued, token_issue

# A buyer's name is the orders' user_id: as long as the orders' column allows.
BUYER_NAME_MAX_LENGTH = 64
# What the settings' MinimumLengthValidator asks (AUTH_PASSWORD_VALIDATORS), for the schema.
PASSWORD_MIN_LENGTH = max((v.min_length for v in get_default_password_validators()
                           if isinstance(v, MinimumLengthValidator)), default=1)
THROWAWAY_PREFIX = "buyer-"
SIGN_UP = "sign-up"  # the purpose a new buyer's challenge names


def sign_up_bits() -> int:
    """The zero bits a new buyer's proof of work asks (0: none)."""
    return int(settings.FLASHSALE_SIGN_UP_CHALLENGE_BITS)


def buyer_create(*, username: str | None = None, password: str | None = None,
                 client: str | None = None, solution: str | None = None) -> tuple[User, Issued]:
    """A new buyer and a token for it. Without a username, a throwaway buyer
    (``buyer-<random>``) that has no password: it buys with its token (or the page's
    session) until that expires, and never signs in again. A taken username counts
    as a failed sign-in of ``client`` (``buyers.lockout``): asking which names are
    taken costs what guessing passwords does.

    :raises InvalidInput: the username or the password is not acceptable (why, per field).
    :raises UsernameTaken: another buyer has the username.
    :raises SignInLocked: ``client`` is locked out (a username was given).
    :raises ChallengeRefused: new buyers cost work, and ``solution`` does not show it.
    """
    User = get_user_model()
    given_name = username is not None
    if username is None:
        if password is not None:
            raise InvalidInput("a password needs a username", extra={"fields": {"username": ["required"]}})
        username = f"{THROWAWAY_PREFIX}{secrets.token_hex(8)}"
    user = User(username=username)
    errors = {}
    try:
        User.username_validator(username)
    except ValidationError as e:
        errors["username"] = e.messages
    if len(username) > BUYER_NAME_MAX_LENGTH:
        errors.setdefault("username", []).append(f"at most {BUYER_NAME_MAX_LENGTH} characters")
    if password is not None:
        try:
            validate_password(password, user)
        except ValidationError as e:
            errors["password"] = e.messages
    if errors:
        raise InvalidInput("the buyer cannot be made", extra={"fields": errors})
    if given_name:
        sign_in_check(client=client)
    challenge_verify(solution=solution, purpose=SIGN_UP, bits=sign_up_bits())
    if password is None:
        user.set_unusable_password()
    else:
        user.set_password(password)
    try:
        with transaction.atomic():
            user.save()
    except IntegrityError as e:
        if given_name:
            sign_in_failed(client=client)
        raise UsernameTaken(f"{username} is taken") from e
    return user, token_issue(username=username)


def buyer_sign_in(*, username: str, password: str, client: str | None) -> Issued:
    """A new token for a buyer that signs in with its password, from ``client`` (its
    address's bucket), unless the client or the username is locked out
    (``buyers.lockout``).

    :raises CredentialsRefused: no such buyer, or not that password (the answer does
        not say which).
    :raises SignInLocked: before the password is checked.
    """
    with sign_in_attempt(client=client, username=username, refused=CredentialsRefused):
        user = authenticate(username=username, password=password)
        if user is None or not user.is_active:
            raise CredentialsRefused("the username and password sign no buyer in")
    return token_issue(username=user.username)


def buyers_make(*, count: int, prefix: str, seconds: int | None = None) -> list[tuple[str, str]]:
    """``count`` buyers named ``<prefix><n>`` (n from 0), made in bulk without passwords
    (a load test's: they buy with their tokens), and a token for each: (username,
    token) in order. Buyers of those names made before are kept and given new tokens.
    """
    User = get_user_model()
    names = [f"{prefix}{n}" for n in range(count)]
    if names and len(names[-1]) > BUYER_NAME_MAX_LENGTH:
        raise InvalidInput(f"buyer names of at most {BUYER_NAME_MAX_LENGTH} characters")
    unusable = User(username="-")
    unusable.set_unusable_password()  # one random unusable hash serves them all: none signs in
    User.objects.bulk_create([User(username=name, password=unusable.password) for name in names],
                             batch_size=2000, ignore_conflicts=True)
    return [(name, token_issue(username=name, seconds=seconds).token) for name in names]
