"""Every JSON POST of the API refuses a deeply nested body and an oversized
one with a JSON error, whatever the endpoint (taken from the OpenAPI schema,
so a new endpoint is covered without touching this test)."""

import pytest

from tests.api.conftest import client_for
from tests.factories import next_week, submit

DEEP = "[" * 1000 + "]" * 1000  # 2 KB


def post_paths(client, pk):
    schema = client.get("/api/schema/", {"format": "json"}).json()
    paths = [path for path, operations in schema["paths"].items() if "post" in operations]
    assert len(paths) >= 5  # create and the four decisions at least
    return [path.replace("{id}", str(pk)) for path in paths]


@pytest.fixture
def quota_request(vision, alice, h100):
    return submit(vision, h100, alice, gpus=2, starts_at=next_week())


def test_every_json_post_refuses_deep_nesting(admin_user, quota_request):
    client = client_for(admin_user)
    for path in post_paths(client, quota_request.pk):
        response = client.post(path, DEEP, content_type="application/json")
        assert response.status_code == 400, (path, response.content)
        assert response.json() == {"detail": "JSON parse error - nested too deeply."}
    quota_request.refresh_from_db()
    assert quota_request.status == "pending"


def test_every_json_post_refuses_an_oversized_body_with_json(admin_user, quota_request, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    client = client_for(admin_user)
    body = '{"reason": "' + "x" * 1000 + '"}'
    for path in post_paths(client, quota_request.pk):
        response = client.post(path, body, content_type="application/json")
        assert response.status_code == 413, (path, response.content)
        assert response.json() == {"detail": "The request body is larger than 1000 bytes."}
    # Just under the cap is parsed as usual.
    response = client.post(
        f"/api/v1/quota-requests/{quota_request.pk}/approve/",
        '{"reason": "ok"}',
        content_type="application/json",
    )
    assert response.status_code == 200
