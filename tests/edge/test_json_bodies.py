"""Every JSON POST of the API refuses a deeply nested body and an oversized
one with a JSON error, whatever the endpoint (taken from the OpenAPI schema,
so a new endpoint is covered without touching this test)."""

import pytest
from django.utils import timezone

from idle.models import IdleState
from tests.api.conftest import client_for
from tests.batch.conftest import allowlist, job_data, nightly  # noqa: F401 - fixtures
from tests.factories import add_member, next_week, submit

DEEP = "[" * 1000 + "]" * 1000  # 2 KB


def post_paths(client):
    """Every POST of the API, `{id}` filled with the first object its list shows."""
    schema = client.get("/api/schema/", {"format": "json"}).json()
    paths = []
    for path, operations in schema["paths"].items():
        if "post" not in operations:
            continue
        if "{id}" in path:
            listing = client.get(path.split("{id}")[0]).json()["results"]
            path = path.replace("{id}", str(listing[0]["id"]))
        paths.append(path)
    assert len(paths) >= 7  # quota requests: create and four decisions; batch jobs
    return paths


@pytest.fixture
def quota_request(vision, alice, admin_user, h100, allowlist, nightly):  # noqa: F811
    # A manager of the team too, so every POST is one the admin may make: someone
    # who may not is refused (403) before the body is read.
    add_member(vision, admin_user, role="manager")
    response = client_for(alice).post("/api/v1/batch-jobs/", job_data(), format="json")
    assert response.status_code == 201, response.content
    # A notebook the idle policy scaled to zero: "bring it back" is a POST too.
    IdleState.objects.create(
        team=vision, flavor=h100, namespace="vision", kind="Deployment", name="notebook",
        gpus=1, seen_at=timezone.now(), acted_at=timezone.now(),
    )  # fmt: skip
    return submit(vision, h100, alice, gpus=2, starts_at=next_week())


def test_every_json_post_refuses_deep_nesting(admin_user, quota_request):
    client = client_for(admin_user)
    for path in post_paths(client):
        response = client.post(path, DEEP, content_type="application/json")
        assert response.status_code == 400, (path, response.content)
        assert response.json() == {"detail": "JSON parse error - nested too deeply."}
    quota_request.refresh_from_db()
    assert quota_request.status == "pending"


def test_every_json_post_refuses_an_oversized_body_with_json(admin_user, quota_request, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    client = client_for(admin_user)
    body = '{"reason": "' + "x" * 1000 + '"}'
    for path in post_paths(client):
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


@pytest.mark.parametrize(
    ("body", "answer"),
    [
        (
            '{"flavor": "h1\\u000000", "effective_from": "2026-12-01T00:00:00Z"}',
            {"flavor": ["Null characters are not allowed."]},
        ),
        ('{"capacity": {"h1\\u000000": 8}}', {"capacity": ["Null characters are not allowed."]}),
        ('{"reason": ["a", {"b": "c\\u0000"}]}', {"reason": ["Null characters are not allowed."]}),
        ('{"a\\u0000": 1}', {"detail": "The body contains a NUL character."}),
        ('["\\u0000"]', {"detail": "The body contains a NUL character."}),
    ],
)
def test_every_json_post_refuses_a_nul_anywhere_in_the_body(
    admin_user, quota_request, body, answer
):
    # An admin's NUL in a rate's flavor or a window's capacity key reached PostgreSQL.
    client = client_for(admin_user)
    for path in post_paths(client):
        response = client.post(path, body, content_type="application/json")
        assert response.status_code == 400, (path, response.content)
        assert response.json() == answer
    quota_request.refresh_from_db()
    assert quota_request.status == "pending"
