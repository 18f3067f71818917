import re

import yaml
from django.contrib.staticfiles import finders
from django.core.management import call_command

from tests.api.conftest import client_for


def test_the_schema_generates_without_warnings(db, tmp_path):
    # --fail-on-warn raises on any warning; --validate checks it against OpenAPI 3.
    path = tmp_path / "schema.yaml"
    call_command("spectacular", "--fail-on-warn", "--validate", "--file", str(path))
    schema = yaml.safe_load(path.read_text())
    assert "/api/v1/quota-requests/{id}/approve/" in schema["paths"]
    assert set(schema["components"]["securitySchemes"]) == {"cookieAuth", "tokenAuth"}


def test_the_schema_documents_conflicts_and_time_zones(db):
    response = client_for(None).get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    schema = response.json()
    approve = schema["paths"]["/api/v1/quota-requests/{id}/approve/"]["post"]
    assert set(approve["responses"]) >= {"200", "400", "403", "404", "409"}
    capacity_error = schema["components"]["schemas"]["CapacityError"]
    assert set(capacity_error["properties"]) == {
        "detail",
        "flavor",
        "peak",
        "capacity",
        "requested",
    }
    fields = schema["components"]["schemas"]["QuotaRequestCreateRequest"]["properties"]
    assert "timestamps without one are refused" in fields["starts_at"]["description"]
    assert fields["justification"]["maxLength"] == 2000


def test_the_docs_are_served_offline(db):
    response = client_for(None).get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert not re.search(r"https?:|//[a-z]", html, re.IGNORECASE)
    assets = re.findall(r'(?:src|href)="([^"]+)"', html)
    # The setup script is served apart (no inline script under the CSP).
    assert "<script>" not in html
    assets.remove("/api/docs/?script=")
    # The site's header (signed out: the brand and the docs), its icon and stylesheets.
    portal = [
        "/",
        "/api/docs/",
        "/static/favicon.svg",
        "/static/css/api-docs.css",
        "/static/css/header.css",
    ]
    for link in portal:
        assets.remove(link)
    assert len(assets) == 3  # Swagger's stylesheet and two scripts
    for asset in assets:
        assert asset.startswith("/static/drf_spectacular_sidecar/")
    for asset in assets + portal[2:]:
        assert finders.find(asset.removeprefix("/static/")), asset
    script = client_for(None).get("/api/docs/", {"script": ""}).content.decode()
    assert '"/api/schema/"' in script


def test_the_schema_says_what_can_be_null_and_that_text_holds_no_nul(db):
    schema = client_for(None).get("/api/schema/", {"format": "json"}).json()
    components = schema["components"]["schemas"]
    assert components["JobDetail"]["properties"]["window"]["nullable"] is True
    assert components["JobEvent"]["properties"]["actor"]["nullable"] is True
    # Free text holds no NUL; a justification no invisible character either (its
    # pattern says both: tests/edge/test_hidden_characters.py).
    assert components["ReasonRequest"]["properties"]["reason"]["pattern"].startswith(r"^[^\u0000")
    image = components["JobCreateRequest"]["properties"]["image"]["pattern"]
    assert image == r"^[^\x00]*$"
    usage = schema["paths"]["/api/v1/billing/usage/"]["get"]["parameters"]
    [to] = [p for p in usage if p["name"] == "to"]
    assert "after `from`" in to["description"]
