"""Issue 35's story: an idle notebook scaled to zero, and brought back from the
page its notice links to.

A workload is named by what its owner knows, the same everywhere: the ledger,
the report cards, the idle notices and the last 24 hours name a Deployment's pod
by its Deployment (not its ReplicaSet), a CronJob's by its CronJob (not the Job
of one night). The history in Prometheus ends at the last whole hour, so the
ledger meters it and the 24-hour view shows it at the real time."""

from datetime import timedelta
from urllib.parse import urlparse

import pytest
from django.utils import timezone

from billing import actions as billing
from billing.models import WorkloadUsage
from idle import actions
from idle.models import IdleState
from tests.billing.history import Device, Pod, openmetrics
from tests.billing.promserver import load_openmetrics, require_prometheus, running_prometheus
from tests.idle.conftest import idle_then
from tests.idle.test_scale_to_zero import deployments, live_pods  # noqa: F401 (fixture)
from tests.waiting import wait_for

T0 = billing.hour_floor(timezone.now()) - timedelta(hours=1)
END = T0 + timedelta(hours=1)
CARD = "/billing/teams/vision/workloads/vision/Deployment/notebook/"


def at(minute):
    return T0 + timedelta(minutes=minute)


def pod(name, owner, activity, gpus=1):
    devices = [Device(g, activity) for g in range(gpus)]
    return Pod("vision", name, "gpu-h100-0", "nvidia_com_gpu", gpus, T0, END, devices, owner)


PODS = [
    # The notebook Deployment's pod, through its ReplicaSet: idle, 2 GPUs.
    pod("notebook-5f7c9-x2x4q", ("ReplicaSet", "notebook-5f7c9"), idle_then(), gpus=2),
    pod("db-0", ("StatefulSet", "db"), idle_then(active_from=0)),
    # Tonight's run of a CronJob, through its Job.
    pod("nightly-29410-k2j4d", ("Job", "nightly-29410"), idle_then(active_from=0)),
]
# kube-state-metrics' owners of the ReplicaSet and the Job (label, name, owner).
OWNERS = [
    ("kube_replicaset_owner", "replicaset", "notebook-5f7c9", "Deployment", "notebook"),
    ("kube_job_owner", "job_name", "nightly-29410", "CronJob", "nightly"),
]


def owner_series():
    lines = []
    for family, label, name, kind, owner in OWNERS:
        lines.append(f"# TYPE {family} gauge")
        labels = (
            f'{{namespace="vision",{label}="{name}",owner_kind="{kind}",'
            f'owner_name="{owner}",owner_is_controller="true"}}'
        )
        moment = T0 - timedelta(minutes=2)
        while moment < END:
            lines.append(f"{family}{labels} 1 {int(moment.timestamp())}")
            moment += timedelta(minutes=1)
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def prometheus_url(tmp_path_factory):
    require_prometheus()
    directory = tmp_path_factory.mktemp("idle-story-prometheus")
    text = openmetrics([], PODS, T0 - timedelta(minutes=2), END)
    load_openmetrics(text.replace("# EOF\n", owner_series() + "# EOF\n"), str(directory))
    with running_prometheus(str(directory)) as url:
        yield url


@pytest.fixture
def prometheus(settings, prometheus_url):
    settings.PORTAL_PROMETHEUS_URL = prometheus_url
    settings.PORTAL_BILLING_STEP = 60
    return prometheus_url


def run(minutes):
    for minute in minutes:
        actions.evaluate(at(minute))


def test_the_ledger_the_cards_the_idle_states_and_the_last_24_hours_agree_on_names(
    prometheus, admin_user, alice, client, h100, vision
):
    billing.ingest_hour(T0)
    named = set(WorkloadUsage.objects.values_list("kind", "name"))
    assert named == {("Deployment", "notebook"), ("StatefulSet", "db"), ("CronJob", "nightly")}

    actions.set_policy(h100, None, by=admin_user, idle_minutes=10, grace_minutes=5, mode="report")
    run(range(1, 12))
    state = IdleState.objects.get()
    assert (state.kind, state.name, state.gpus) == ("Deployment", "notebook", 2)

    client.force_login(alice)
    page = client.get(CARD).content.decode()
    assert 'id="idle-banner"' in page and "Idle since" in page
    assert 'id="recent-picture"' in page and "Deployment notebook" in page
    assert "mean 1 %" in page  # the ledger's figures, on the card the notice links
    day = client.get("/billing/teams/vision/?view=24h").content.decode()
    for label in ("Deployment notebook", "StatefulSet db", "CronJob nightly"):
        assert label in day
    assert "ReplicaSet" not in day and "nightly-29410" not in day
    # Named as the ledger does not know it: there is no such card.
    assert (
        client.get(CARD.replace("Deployment/notebook", "ReplicaSet/notebook-5f7c9")).status_code
        == 404
    )


def test_the_notice_leads_to_the_card_before_the_ledger_has_an_hour(
    prometheus,
    deployments,  # noqa: F811
    admin_user,
    alice,
    client,
    h100,
    vision,
    mailoutbox,
    django_capture_on_commit_callbacks,
):
    """Scaled to zero minutes after it started: the ledger has metered nothing of
    it, and the notice's link still opens its card, with the banner and the button
    (a plain form POST) that brings it back on the cluster."""
    actions.set_policy(h100, None, by=admin_user, idle_minutes=10, grace_minutes=5, mode="act")
    wait_for(lambda: len(live_pods(deployments, "notebook")) == 2, timeout=60)
    with django_capture_on_commit_callbacks(execute=True):
        run(range(1, 17))
    assert deployments.get("Deployment", "notebook", "vision")["spec"]["replicas"] == 0
    assert not WorkloadUsage.objects.exists()
    (notice,) = [m for m in mailoutbox if "scaled to zero" in m.subject]
    assert "Deployment vision/notebook was scaled to zero" in notice.subject
    link = next(word for word in notice.body.split() if "/billing/teams/" in word)
    assert urlparse(link).path == CARD

    client.force_login(alice)
    card = client.get(CARD)
    assert card.status_code == 200
    page = card.content.decode()
    assert "Scaled to zero for being idle" in page and "Not in the ledger yet" in page
    assert "Bring it back restores the 2 replicas it ran." in page

    home = client.get("/teams/vision/").content.decode()
    assert 'id="idle-scaled"' in home
    assert "Deployment notebook</strong> was scaled to zero at" in home
    assert "had been idle (engine activity under 5 %) since" in home
    assert f'href="{CARD}"' in home

    state = IdleState.objects.get(name="notebook")
    back = client.post(f"/idle/states/{state.pk}/bring-back/", follow=True)
    assert back.redirect_chain == [(CARD, 302)]
    assert "Deployment notebook is back: 2 replica(s)." in back.content.decode()
    assert deployments.get("Deployment", "notebook", "vision")["spec"]["replicas"] == 2
    assert 'id="idle-scaled"' not in client.get("/teams/vision/").content.decode()
