from django.urls import path

from . import views

urlpatterns = [
    path("dashboard", views.dashboard, name="dashboard"),
    path("dashboard/data/<str:panel>", views.PanelDataApi.as_view(), name="dashboard-data"),
]
