"""The browser page's route, apart from the API's (``orders.urls``, under ``api/``)."""

from django.urls import path

from . import views

urlpatterns = [
    path("", views.index, name="index"),
]
