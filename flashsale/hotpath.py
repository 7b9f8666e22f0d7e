"""A DRF view for a hot path: the purchase, which a sale calls more than everything
else together.

DRF's dispatch wraps every request in a ``Request``, instantiates its parsers,
authenticators and negotiator, negotiates, and parses the body through a chosen
parser and a stream. For a plain JSON body that was a tenth of the gate's accepted
purchase and a fifth of its sold-out answer (CPU per request in-process,
``python -m benchmarks.purchase_cpu``; ``docs/profile/hotpath/``). ``DirectJSONApi``
reads such a body with one ``json.loads`` and runs the rest as DRF does: the view's
throttles, its handler and its response. A refusal (answered as the project's
exception handler answers it, ``flashsale.errors``) and the handler's own answer
(``DirectJSONApi.answer``) are rendered at once by the view's renderer: DRF's
``Response``, finalized and rendered later, was a sixth of the sold-out answer that
most of a flash sale's requests get. Anything else
(another method or content type, a charset other than UTF-8, a body that does not
decode) goes through DRF's dispatch unchanged, so its answers (415, 400
``invalid``, 405) are DRF's own. ``orders/tests/test_hotpath.py`` holds the two
paths to the same answers.
"""

from __future__ import annotations

from django.http import HttpResponse, HttpResponseBase
from rest_framework.response import Response
from rest_framework.utils import json
from rest_framework.views import APIView, set_rollback

from .errors import error_answer, exception_handler

# Charsets the plain path decodes itself; DRF decodes any other a client names.
_UTF8 = {"utf-8", "utf8"}


def _plain_json(request) -> tuple[bool, object]:
    """``(True, the body's value)`` for a POST of a UTF-8 JSON body that decodes
    (as DRF's parser does: no NaN or Infinity), else ``(False, None)``."""
    if request.method != "POST" or request.content_type != "application/json":
        return False, None
    if request.content_params.get("charset", "utf-8").lower() not in _UTF8:
        return False, None
    try:
        return True, json.loads(request.body.decode("utf-8"))
    except (ValueError, RecursionError):
        return False, None  # DRF's parser says what is wrong, in its words


class DirectJSONApi(APIView):
    """An ``APIView`` whose plain JSON POSTs skip DRF's request wrapping and parsing
    (see the module). The handler gets Django's request with the decoded body as
    ``request.data``, as a DRF request would have it, and its throttles run as DRF
    runs them. Only for a view that needs nothing more of DRF's ``Request``: no
    authentication and no permission classes (who the user is, is the ``Request``'s
    to say), one renderer (nothing to negotiate), the project's exception handler;
    any other view goes through DRF."""

    _renderer = None  # the view's one renderer, on the direct path only

    def dispatch(self, request, *args, **kwargs):
        direct = (not self.authentication_classes and not self.permission_classes
                  and len(self.renderer_classes) == 1 and hasattr(self, "post")
                  and self.get_exception_handler() is exception_handler)
        plain, data = _plain_json(request) if direct else (False, None)
        if not plain:
            return super().dispatch(request, *args, **kwargs)
        self.args, self.kwargs, self.request = args, kwargs, request
        self.headers = self.default_response_headers
        request.data = data
        [self._renderer] = self.get_renderers()
        request.accepted_renderer = self._renderer
        request.accepted_media_type = self._renderer.media_type
        try:
            self.check_throttles(request)
            response = self.post(request, *args, **kwargs)
        except Exception as exc:
            # flashsale.errors.exception_handler's answer, less what only an
            # authenticated view or DEBUG's plain-text tracebacks need of a DRF Request.
            answer = error_answer(exc)
            if answer is None:
                raise
            set_rollback()
            response = self._rendered(answer.body, answer.status, answer.headers)
        if not isinstance(response, _Rendered):
            response = self.finalize_response(request, response, *args, **kwargs)
        self.response = response
        return response

    def answer(self, body, *, status: int, headers: dict[str, str] | None = None) -> HttpResponseBase:
        """The handler's answer: DRF's ``Response`` on DRF's path; on the direct path,
        rendered at once by the view's one renderer, as ``finalize_response`` and the
        renderer would make it. A ``Response``, finalized and rendered later, cost
        the gate's accepted purchase ~13 of its ~210 µs in-process
        (``python -m benchmarks.purchase_cpu``)."""
        if self._renderer is None:
            return Response(body, status=status, headers=headers)
        return self._rendered(body, status, headers or {})

    def _rendered(self, body, status: int, headers: dict[str, str]) -> HttpResponse:
        renderer = self._renderer
        response = _Rendered(renderer.render(body, renderer.media_type), status=status,
                             content_type=renderer.media_type)
        for name, value in {**headers, **self.headers}.items():
            response[name] = value
        return response


class _Rendered(HttpResponse):
    """An answer the direct path rendered and finished: ``dispatch`` returns it as it is."""
