"""``/dashboard``: a sale as Prometheus sees it, for a projector during ``make demo``,
``make race`` or a comparison. The page asks ``/dashboard/data/<panel>`` for each
panel's lines; the server asks Prometheus its own expressions (``dashboard.data``)."""

from django.shortcuts import render
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from .data import panel_data_get, panel_request
from .panels import PANELS


def dashboard(request):
    return render(request, "dashboard/dashboard.html", {"panels": [panel.as_dict() for panel in PANELS]})


class PanelDataApi(APIView):
    """One panel's lines over ``window`` seconds, ending at the last whole step."""

    # Public, polled by every open tab: no session looked up.
    authentication_classes: list = []

    # The page's own data, not the API's contract: kept out of the schema (nginx
    # limits it per address: docs/reference/http.md).
    @extend_schema(exclude=True)
    def get(self, request, panel: str):
        asked = panel_request(key=panel, window=request.query_params.get("window"))
        return Response(panel_data_get(request=asked))
