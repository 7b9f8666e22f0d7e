from django.urls import path

from . import apis

urlpatterns = [
    path("admin/races", apis.RaceCreateApi.as_view(), name="race-create"),
    path("races/latest", apis.RaceLatestApi.as_view(), name="race-latest"),
    path("races/<int:race_id>", apis.RaceDetailApi.as_view(), name="race-detail"),
]
