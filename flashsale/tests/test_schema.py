"""The OpenAPI schema: generated and validated with every drf-spectacular warning
counted as a failure (a name collision there documents one API's body under
another's), each request body under a name of its own, the admin token described."""

import yaml
from django.core.management import call_command


def test_the_schema_validates_without_a_warning(tmp_path):
    out = tmp_path / "schema.yml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    schema = yaml.safe_load(out.read_text())

    def body(path: str) -> str:
        return schema["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]

    assert body("/api/orders") == "#/components/schemas/PurchaseRequest"
    reset = next(p for p in schema["paths"] if p.endswith("/reset"))
    assert body(reset) == "#/components/schemas/SaleResetRequest"
    for closed in ("PurchaseRequest", "SaleResetRequest"):  # an unknown key is refused
        assert schema["components"]["schemas"][closed]["additionalProperties"] is False
    assert schema["components"]["securitySchemes"]["adminToken"] == {
        "type": "apiKey", "in": "header", "name": "Authorization",
        "description": "`Token <FLASHSALE_ADMIN_TOKEN>`: the stack writes it to .run/admin-token"}
    assert {"adminToken": []} in schema["paths"][reset]["post"]["security"]
