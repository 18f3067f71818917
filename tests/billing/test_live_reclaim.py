"""Live, end to end, on both cluster backends: a batch Job on spot L4s released, its node
reclaimed, batch's watch records the lost pod, Prometheus scraped it all, and
billing credits the run."""

import pytest
from django.utils import timezone

from batch import actions as batch_actions
from batch import launch, watch
from batch.models import BatchJob
from billing.models import TeamUsage
from tests.batch.conftest import (  # noqa: F401 (fixtures)
    demo_flavors,
    eager,
    open_now,
    setup,
)
from tests.billing.promserver import require_prometheus, running_prometheus
from tests.billing.test_live_metering import ingest_since
from tests.waiting import wait_for

pytestmark = pytest.mark.prometheus


def test_a_batch_pod_lost_to_a_spot_reclaim_is_credited(
    setup,  # noqa: F811
    demo_flavors,  # noqa: F811
    cluster,
    backend,
    settings,
    tmp_path,
):
    require_prometheus()
    settings.PORTAL_BILLING_STEP = 1
    settings.PORTAL_BILLING_LABEL_NAMESPACE = "exported_namespace"
    settings.PORTAL_BILLING_LABEL_POD = "exported_pod"
    team = setup["team"]
    job = batch_actions.submit(
        by=setup["alice"],
        team=team,
        flavor=demo_flavors["l4"],
        name="sweep",
        image="docker.io/library/python:3.12-slim",
        command=["python"],
        args=[],
        env=[],
        gpus=1,
        parallelism=1,
        completions=1,
        expected_runtime_minutes=30,
        max_runtime_minutes=60,
        spot_allowed=True,
        priority=0,
        annotations={"kubesim.io/duration": "1h"},
    )
    batch_actions.replan(reason="test")
    launch.release_due()
    started = timezone.now()
    with running_prometheus(str(tmp_path), scrape=backend.scrape_configs(str(tmp_path))) as url:
        settings.PORTAL_PROMETHEUS_URL = url

        def l4_row():
            ingest_since(started)
            rows = TeamUsage.objects.filter(team=team, flavor__slug="l4")
            return rows.order_by("-hour").first()

        held = wait_for(
            lambda: (row := l4_row()) and row.allocated_seconds >= 3 and row, timeout=60
        )
        assert held.lost_seconds == 0
        (pod,) = [p for p in cluster.list("Pod", namespace="vision") if p["spec"].get("nodeName")]
        backend.reclaim(pod["spec"]["nodeName"], grace_seconds=3)

        def recorded():
            live = cluster.get("Job", f"batch-{job.pk}", "vision")
            if live is not None:
                watch.record(live, cluster=cluster)
            return BatchJob.objects.values_list("disrupted_pods", flat=True).get(pk=job.pk)

        assert wait_for(recorded, timeout=30) == [pod["metadata"]["uid"]]
        # Credited once the pod's last samples are scraped: at least what it held.
        wait_for(lambda: l4_row().lost_seconds >= held.allocated_seconds, timeout=60)
