"""The race page's route, apart from the API's (``races.urls``, under ``api/``)."""

from django.urls import path

from . import views

urlpatterns = [
    path("race", views.race, name="race"),
]
