"""/healthz answers while the process does; /readyz only while the database,
the broker and the cluster answer, naming the one that does not."""

import pytest
from django.test import Client


def test_healthz_needs_nothing_but_the_process():
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_is_ready_when_everything_answers(transactional_db, backend):
    response = Client().get("/readyz")
    assert response.status_code == 200, response.json()
    assert response.json()["checks"] == {"database": "ok", "broker": "ok", "cluster": "ok"}


@pytest.mark.kubesim_only("it stops the cluster, which the real backend shares across tests")
def test_readyz_names_the_cluster_when_it_is_gone(transactional_db, backend, settings):
    backend.sim.stop()
    response = Client().get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["cluster"] != "ok"
