"""The shop page's buyers: continue as a new buyer in one click, sign up, sign in,
sign out. Each signs the browser in with Django's session; the page then buys with
it and its CSRF token (``buyers.authentication``)."""

from __future__ import annotations

from django.contrib.auth import login
from django.contrib.auth.views import LoginView, LogoutView
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from common.errors import ApplicationError

from .apis import SignUpThrottle
from .services import buyer_create

MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"


def _next(request) -> str:
    """Where to go back to: the page's own ``next``, or the shop."""
    target = request.POST.get("next") or request.GET.get("next") or "/"
    allowed = url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()},
                                              require_https=request.is_secure())
    return target if allowed else "/"


def _throttled(request) -> HttpResponse | None:
    throttle = SignUpThrottle()
    if throttle.allow_request(request, None):
        return None
    return HttpResponse("Too many new buyers from this address: wait a minute.", status=429,
                        headers={"Retry-After": str(int(throttle.wait() or 60))}, content_type="text/plain")


@require_POST
def buyer_new(request):
    """A throwaway buyer, signed in: the demo stays one click away."""
    if refused := _throttled(request):
        return refused
    user, _ = buyer_create()
    login(request, user, backend=MODEL_BACKEND)
    return redirect(_next(request))


def sign_up(request):
    """A buyer with a username and password, signed in."""
    error = None
    if request.method == "POST":
        if refused := _throttled(request):
            return refused
        try:
            user, _ = buyer_create(username=request.POST.get("username", ""),
                                   password=request.POST.get("password", ""))
        except ApplicationError as e:
            fields = e.extra.get("fields", {})
            error = "; ".join(f"{name}: {' '.join(why)}" for name, why in fields.items()) or e.message
        else:
            login(request, user, backend=MODEL_BACKEND)
            return redirect(_next(request))
    return render(request, "buyers/sign_up.html", {"error": error, "next": _next(request)},
                  status=400 if error else 200)


sign_in = LoginView.as_view(template_name="buyers/sign_in.html", redirect_authenticated_user=True)
sign_out = LogoutView.as_view()
