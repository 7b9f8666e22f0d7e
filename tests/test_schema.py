"""The OpenAPI schema: generated and validated with every drf-spectacular warning
counted as a failure (a name collision there documents one API's body under
another's), each request body under a name of its own, the admin token described."""

import yaml
from django.conf import settings
from django.core.management import call_command


def test_the_schema_validates_without_a_warning(tmp_path):
    out = tmp_path / "schema.yml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    schema = yaml.safe_load(out.read_text())

    def body(path: str) -> str:
        return schema["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]

    # The buyer is the credentials' (FLASHSALE_BUYER_AUTH, the default): no user_id.
    purchase = "BuyerPurchaseRequest" if settings.FLASHSALE_BUYER_AUTH else "PurchaseRequest"
    assert body("/api/orders") == f"#/components/schemas/{purchase}"
    assert ("user_id" in schema["components"]["schemas"][purchase]["properties"]) is not (
        settings.FLASHSALE_BUYER_AUTH)
    reset = next(p for p in schema["paths"] if p.endswith("/reset"))
    assert body(reset) == "#/components/schemas/SaleResetRequest"
    assert body("/api/admin/races") == "#/components/schemas/RaceRequest"
    for closed in (purchase, "SaleResetRequest", "RaceRequest"):  # an unknown key is refused
        assert schema["components"]["schemas"][closed]["additionalProperties"] is False
    # The gate takes no segments: a body the reset refuses is one the schema refuses.
    assert {"required": ["strategy", "segments"],
            "properties": {"strategy": {"enum": ["gate"]}, "segments": {"minimum": 2}}} in (
        schema["components"]["schemas"]["SaleResetRequest"]["not"]["anyOf"])
    assert schema["components"]["schemas"]["Product"]["properties"]["strategy"] == {"type": "string"}
    assert schema["components"]["securitySchemes"]["adminToken"] == {
        "type": "apiKey", "in": "header", "name": "Authorization",
        "description": "`Token <FLASHSALE_ADMIN_TOKEN>`: the stack writes it to .run/admin-token"}
    for admin in (reset, "/api/admin/races"):
        assert {"adminToken": []} in schema["paths"][admin]["post"]["security"]


def test_every_error_a_purchase_may_answer_is_in_its_schema_with_an_example(tmp_path):
    out = tmp_path / "schema.yml"
    call_command("spectacular", "--file", str(out))
    responses = yaml.safe_load(out.read_text())["paths"]["/api/orders"]["post"]["responses"]
    documented = {
        (int(status), example["value"]["error"])
        for status, response in responses.items() if not status.startswith("2")
        for example in response["content"]["application/json"]["examples"].values()
    }
    assert documented == {
        (400, "invalid"), (401, "not_authenticated"), (403, "permission_denied"), (403, "admission_refused"),
        (404, "not_found"),
        (409, "not_started"), (409, "ended"),
        (409, "sold_out"), (409, "limit_reached"),
        (409, "idempotency_conflict"), (413, "too_large"), (415, "unsupported_media_type"),
        (429, "throttled"), (502, "unavailable"), (503, "busy"), (503, "stale_lock"),
        (503, "unavailable"), (503, "outcome_unknown"), (504, "timeout"),
    }
    assert "`sold_out`" in responses["409"]["description"]
