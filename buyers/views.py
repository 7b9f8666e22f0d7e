"""The shop page's buyers: continue as a new buyer in one click, sign up, sign in,
sign out. Each signs the browser in with Django's session; the page then buys with
it and its CSRF token (``buyers.authentication``)."""

from __future__ import annotations

import functools
from collections.abc import Callable

from django.contrib import admin
from django.contrib.auth import login
from django.contrib.auth.views import LoginView, LogoutView
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from common.errors import ApplicationError, ChallengeRefused, SignInLocked, error_json
from common.throttles import client_bucket

from .apis import SignUpThrottle
from .forms import SignInForm
from .services import buyer_create, sign_up_bits

MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"
# The page's forms carry a proof of work's solution (when one is asked) in this field.
SOLUTION_FIELD = "challenge_solution"


def _next(request: HttpRequest) -> str:
    """Where to go back to: the page's own ``next``, or the shop."""
    target = request.POST.get("next") or request.GET.get("next") or "/"
    allowed = url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()},
                                              require_https=request.is_secure())
    return target if allowed else "/"


def _throttled(request: HttpRequest) -> HttpResponse | None:
    throttle = SignUpThrottle()
    if throttle.allow_request(request, None):
        return None
    return HttpResponse("Too many new buyers from this address: wait a minute.", status=429,
                        headers={"Retry-After": str(int(throttle.wait() or 60))}, content_type="text/plain")


def _locked_out(request: HttpRequest, locked: SignInLocked, template: str | None) -> HttpResponse:
    """429 with Retry-After: the page again, saying how long to wait, or (no page) the
    JSON error."""
    if template is None:
        return error_json(locked)
    error = f"{locked.message}: try again in {locked.headers['Retry-After']} s."
    response = render(request, template,
                      {"error": error, "next": _next(request), "sign_up_bits": sign_up_bits()},
                      status=locked.status_code)
    for name, value in locked.headers.items():
        response[name] = value
    return response


def lockout_answered(view: Callable[..., HttpResponseBase], *,
                     template: str | None = None) -> Callable[..., HttpResponseBase]:
    """``view``, with a sign-in lockout (``buyers.forms``) answered 429."""
    @functools.wraps(view)
    def answered(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponseBase:
        try:
            return view(request, *args, **kwargs)
        except SignInLocked as locked:
            return _locked_out(request, locked, template)
    return answered


@require_POST
def buyer_new(request: HttpRequest) -> HttpResponseBase:
    """A throwaway buyer, signed in: the demo stays one click away."""
    if refused := _throttled(request):
        return refused
    try:
        user, _ = buyer_create(solution=request.POST.get(SOLUTION_FIELD))
    except ChallengeRefused as e:
        return error_json(e)
    login(request, user, backend=MODEL_BACKEND)
    return redirect(_next(request))


def sign_up(request: HttpRequest) -> HttpResponseBase:
    """A buyer with a username and password, signed in."""
    error, status = None, 200
    if request.method == "POST":
        if refused := _throttled(request):
            return refused
        try:
            user, _ = buyer_create(username=request.POST.get("username", ""),
                                   password=request.POST.get("password", ""), client=client_bucket(request),
                                   solution=request.POST.get(SOLUTION_FIELD))
        except SignInLocked as locked:
            return _locked_out(request, locked, "buyers/sign_up.html")
        except ApplicationError as e:
            fields = e.extra.get("fields", {})
            error = "; ".join(f"{name}: {' '.join(why)}" for name, why in fields.items()) or e.message
            status = e.status_code
        else:
            login(request, user, backend=MODEL_BACKEND)
            return redirect(_next(request))
    return render(request, "buyers/sign_up.html",
                  {"error": error, "next": _next(request), "sign_up_bits": sign_up_bits()},
                  status=status if error else 200)


SIGN_IN_PAGE = "buyers/sign_in.html"
sign_in = lockout_answered(LoginView.as_view(template_name=SIGN_IN_PAGE, authentication_form=SignInForm,
                                             redirect_authenticated_user=True), template=SIGN_IN_PAGE)
sign_out = LogoutView.as_view()
# The admin's login, its lockout answered (its form is buyers.forms.AdminSignInForm,
# set in buyers.admin).
admin_sign_in = lockout_answered(admin.site.login)
