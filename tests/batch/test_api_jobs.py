"""batch-jobs/: create, bad input as field errors, visibility, cancel, planning."""

from datetime import time
from decimal import Decimal

import pytest

from batch import actions
from batch.models import BatchJob
from cluster import actions as cluster_actions
from tests.api.conftest import client_for
from tests.batch.conftest import job_data

URL = "/api/v1/batch-jobs/"


@pytest.fixture
def ready(allowlist, nightly, alice):
    return alice


def test_it_queues_then_plans_a_job_with_its_cost(ready, alice):
    response = client_for(alice).post(URL, job_data(), format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status"] == "queued"
    # 2 GPUs x 2 h x 4.00 on demand = 16.00; off-peak 0.5 -> 8.00
    assert (Decimal(body["estimated_cost"]), Decimal(body["on_demand_cost"])) == (
        Decimal("8.00"),
        Decimal("16.00"),
    )
    assert body["kubernetes_job"] == {"namespace": "vision", "name": f"batch-{body['id']}"}
    actions.replan(reason="test")
    planned = client_for(alice).get(f"{URL}{body['id']}/").json()
    assert planned["status"] == "planned"
    assert "Planned for Nights, " in planned["explanation"]
    assert planned["occurrence"]["window_name"] == "Nights"
    assert [e["action"] for e in planned["events"]] == ["submit", "plan"]


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"image": "evil.example.com/miner:latest"}, "image"),
        ({"image": "not an image"}, "image"),
        ({"command": "python train.py"}, "command"),
        ({"args": [1, 2]}, "args"),
        ({"max_runtime_minutes": 9 * 60}, "max_runtime_minutes"),
        ({"gpus": 9}, "gpus"),
        ({"gpus": 10**30}, "gpus"),
        ({"gpus": "2"}, "gpus"),
        ({"flavor": "nope"}, "flavor"),
        ({"window": 999}, "window"),
        ({"env": [{"name": "1BAD", "value": "x"}]}, "env"),
        ({"env": [{"name": "HF_TOKEN", "value": "hf_abcdefghijklmnopqrstuvwxyz"}]}, "env"),
        ({"env": [{"name": "X", "value": "ghp_abcdefghijklmnopqrstuvwxyz0123"}]}, "env"),
        ({"env": [{"name": "T", "secret": {"name": "Bad Name", "key": "k"}}]}, "env"),
        ({"parallelism": 3, "completions": 2}, "parallelism"),
        ({"name": "a\x00b"}, "name"),
        ({"name": "a\r\nBcc: all@example.com"}, "name"),
        ({"name": "tab\there"}, "name"),
        ({"command": ["a\x00b"]}, "command"),
        ({"team": "nlp"}, "team"),
        ({"max_runtime_minutes": 60}, "max_runtime_minutes"),
    ],
)
def test_bad_input_is_a_field_error_and_nothing_is_created(ready, alice, nlp, overrides, field):
    response = client_for(alice).post(URL, job_data(**overrides), format="json")
    assert response.status_code == 400, response.content
    assert field in response.json(), response.json()
    assert not BatchJob.objects.exists()


def test_the_image_error_lists_the_allowed_registries(ready, alice):
    response = client_for(alice).post(URL, job_data(image="quay.io/x/y:1"), format="json")
    assert response.json()["image"] == [
        "quay.io/x/y:1 is not from an allowed registry. Allowed: docker.io/library/, "
        "nvcr.io/nvidia/."
    ]


def test_docker_hub_official_images_are_read_in_full(ready, alice):
    response = client_for(alice).post(URL, job_data(image="python:3.12"), format="json")
    assert response.status_code == 201


def test_secrets_as_references_are_accepted(ready, alice):
    env = [{"name": "HF_TOKEN", "secret": {"name": "hf", "key": "token"}}]
    response = client_for(alice).post(URL, job_data(env=env), format="json")
    assert response.status_code == 201
    assert response.json()["env"] == env


def test_a_given_occurrence_is_kept(ready, alice, nightly):
    from django.utils import timezone

    second = nightly.occurrences(timezone.now(), timezone.now() + actions.horizon())[2]
    data = job_data(window=nightly.pk, occurrence=second.opens_at.isoformat())
    response = client_for(alice).post(URL, data, format="json")
    assert response.status_code == 201, response.content
    actions.replan()
    job = BatchJob.objects.get()
    assert job.opens_at == second.opens_at


def test_an_occurrence_the_window_does_not_have_is_refused(ready, alice, nightly):
    data = job_data(window=nightly.pk, occurrence="2030-01-01T00:00:00Z")
    response = client_for(alice).post(URL, data, format="json")
    assert response.status_code == 400
    assert "occurrence" in response.json()


def test_another_teams_job_is_a_404(ready, alice, bob):
    job_id = client_for(alice).post(URL, job_data(), format="json").json()["id"]
    assert client_for(bob).get(f"{URL}{job_id}/").status_code == 404
    assert client_for(bob).post(f"{URL}{job_id}/cancel/").status_code == 404
    assert client_for(bob).get(URL).json()["count"] == 0


def test_cancel_a_planned_job_and_not_twice(ready, alice):
    job_id = client_for(alice).post(URL, job_data(), format="json").json()["id"]
    actions.replan()
    response = client_for(alice).post(f"{URL}{job_id}/cancel/", {"reason": "typo"}, format="json")
    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"
    again = client_for(alice).post(f"{URL}{job_id}/cancel/", format="json")
    assert again.status_code == 409
    assert "cancelled" in again.json()["detail"]


def test_list_filters(ready, alice):
    client_for(alice).post(URL, job_data(), format="json")
    assert client_for(alice).get(URL, {"status": "queued"}).json()["count"] == 1
    assert client_for(alice).get(URL, {"status": "running"}).json()["count"] == 0
    assert client_for(alice).get(URL, {"status": "bogus"}).status_code == 400
    assert client_for(alice).get(URL, {"window": "x"}).status_code == 400
    assert client_for(alice).get(URL, {"team": "vision"}).json()["count"] == 1


def test_a_job_without_spot_on_an_all_spot_flavor_is_a_field_error(
    allowlist, vision, alice, admin_user, demo_flavors, backend, client
):
    # The demo cluster's L4 nodes are all spot: a job kept off spot never starts there.
    cluster_actions.record_inventory()
    actions.save_window(
        None,
        by=admin_user,
        capacity={demo_flavors["l4"]: 8},
        name="Nights",
        timezone="UTC",
        days=["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
        start_time=time(22),
        end_time=time(6),
        exceptions=[],
        price_factor="0.5",
        spot_allowed=True,
    )
    response = client_for(alice).post(URL, job_data(flavor="l4"), format="json")
    assert response.status_code == 400, response.content
    assert response.json()["spot_allowed"] == [
        "L4's nodes are all spot: a job that may not run on spot would never start. Allow "
        "spot, or pick another flavor."
    ]
    # The page's form says the same, beside the box.
    client.force_login(alice)
    page = client.post(
        "/batch/jobs/new/",
        {
            "team": vision.pk,
            "name": "train",
            "flavor": demo_flavors["l4"].pk,
            "image": "nvcr.io/nvidia/pytorch:24.05-py3",
            "command": "python\ntrain.py",
            "gpus": 2,
            "parallelism": 1,
            "completions": 1,
            "expected_runtime_minutes": 60,
            "priority": 0,
        },
    )
    assert page.status_code == 200
    assert "L4&#x27;s nodes are all spot" in page.content.decode()
    assert not BatchJob.objects.exists()

    allowed = client_for(alice).post(URL, job_data(flavor="l4", spot_allowed=True), format="json")
    assert allowed.status_code == 201, allowed.content
