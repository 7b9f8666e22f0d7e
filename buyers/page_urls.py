"""The shop page's buyer routes, apart from the API's (``buyers.urls``, under ``api/``)."""

from django.urls import path

from . import views

urlpatterns = [
    path("buyers/new", views.buyer_new, name="buyer-new"),
    path("buyers/sign-up", views.sign_up, name="sign-up"),
    path("buyers/sign-in", views.sign_in, name="sign-in"),
    path("buyers/sign-out", views.sign_out, name="sign-out"),
    # Ahead of admin.site.urls (flashsale.urls includes this first): the admin's own
    # login, with its sign-in lockout answered 429.
    path("admin/login/", views.admin_sign_in),
]
