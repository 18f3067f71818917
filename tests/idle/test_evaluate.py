"""The evaluation on a real Prometheus holding a history of DCGM and
kube-state-metrics series (tests/billing/history.py), stepped minute by minute
through it as beat would: announced after the idle minutes, acted on (here:
report-only) after the grace, withdrawn when active again, exempt untouched,
two PromQL queries per evaluation whatever the number of pods."""

from datetime import timedelta

from django.utils import timezone

from idle import actions
from idle.models import IdleAction, IdleState
from tests.idle.conftest import at, log, queries_served, run


def test_report_only_announces_logs_what_it_would_do_and_acts_on_nothing(
    prometheus, policy, carol, vision
):
    actions.exempt(
        vision,
        namespace="vision",
        kind="StatefulSet",
        name="db",
        until=timezone.now() + timedelta(days=1),
        reason="the nightly load fills it",
        by=carol,
    )
    results = run(range(1, 21))
    assert results[1].workloads == 5
    assert log() == [
        ("Deployment", "infer", "announced", at(11)),
        ("Deployment", "notebook", "announced", at(11)),
        ("Pod", "scratch", "announced", at(11)),
        ("Deployment", "infer", "withdrawn", at(13)),
        ("Deployment", "notebook", "would_act", at(16)),
        ("Pod", "scratch", "would_act", at(16)),
    ]
    notebook = IdleState.objects.get(name="notebook")
    assert (notebook.idle_since, notebook.action_due_at, notebook.gpus) == (at(1), at(16), 2)
    assert not IdleState.objects.filter(name="infer").exists()  # busy: nothing kept
    assert not IdleAction.objects.filter(workload_name__in=["db", "train"]).exists()
    would = IdleAction.objects.get(workload_name="notebook", kind="would_act")
    assert would.gpu_hours(at(20)) == 2 * 4 / 60  # 2 GPUs idle 4 minutes past the grace


def test_each_evaluation_asks_prometheus_two_queries(prometheus, policy):
    before = queries_served(prometheus)
    run(range(1, 4))
    assert queries_served(prometheus) - before == 2 * 3


def test_an_evaluation_run_twice_in_a_minute_changes_nothing(prometheus, policy):
    run(range(1, 17))
    rows = log()
    run([16, 16])
    assert log() == rows


def test_a_team_policy_stricter_than_the_flavors_announces_sooner(
    prometheus, policy, carol, vision, h100
):
    actions.set_policy(h100, vision, by=carol, idle_minutes=5, grace_minutes=5, mode="report")
    run(range(1, 7))
    assert ("Deployment", "notebook", "announced", at(6)) in log()


def test_the_notice_reaches_the_teams_webhook_with_the_time_of_the_action(
    prometheus, policy, carol, vision, settings
):
    from notifications import actions as notification_actions
    from notifications.models import Delivery

    settings.PORTAL_WEBHOOK_ALLOW_HTTP_LOOPBACK = True
    notification_actions.set_webhook(vision, "http://127.0.0.1:9/idle", by=carol)
    run(range(1, 14))
    bodies = {d.event: [] for d in Delivery.objects.all()}
    for delivery in Delivery.objects.order_by("pk"):
        bodies[delivery.event].append(delivery.body)
    assert len(bodies["idle_announced"]) == 4  # notebook, infer, db (not exempt here), scratch
    notebook = next(b for b in bodies["idle_announced"] if "notebook" in b)
    assert "report only" in notebook and "2026-11-02 10:16 UTC" in notebook
    assert "infer" in bodies["idle_withdrawn"][0]


def test_a_bare_pod_is_never_deleted_its_team_is_reminded_with_the_cost(
    prometheus,
    admin_user,
    alice,
    carol,
    vision,
    h100,
    settings,
    mailoutbox,
    django_capture_on_commit_callbacks,
):
    from billing.models import Rate

    Rate.objects.create(
        flavor=h100, effective_from=at(0) - timedelta(days=30), price_per_gpu_hour=3
    )
    settings.PORTAL_IDLE_REMIND_MINUTES = 5
    actions.set_policy(h100, None, by=admin_user, idle_minutes=10, grace_minutes=5, mode="act")
    with django_capture_on_commit_callbacks(execute=True):
        run(range(1, 22))
    reminders = IdleAction.objects.filter(workload_name="scratch", kind="reminded").order_by("at")
    assert [row.at for row in reminders] == [at(16), at(21)]
    # 1 GPU idle since minute 1: 20 minutes at 3.00 an hour by the second reminder.
    assert reminders[1].detail == "Idle 0.3 GPU-hours so far, costing 1.00 USD."
    subjects = [m.subject for m in mailoutbox if "scratch" in m.subject]
    assert (
        subjects[-1]
        == "[GPU portal] Pod vision/scratch is still idle: 0.3 GPU-hours, 1.00 USD so far"
    )
    assert {address for m in mailoutbox for address in m.to} >= {alice.email, carol.email}
    assert "Action at: 2026-11-02 10:16 UTC" in next(
        m.body for m in mailoutbox if "notebook is idle" in m.subject
    )


def test_an_action_that_fails_is_logged_once_and_tried_again(prometheus, admin_user, vision, h100):
    # No cluster configured here: the scale-down of the notebook fails each minute.
    actions.set_policy(h100, None, by=admin_user, idle_minutes=10, grace_minutes=5, mode="act")
    run(range(1, 20))
    failed = IdleAction.objects.filter(workload_name="notebook", kind="failed")
    assert failed.count() == 1 and failed.get().at == at(16)
    state = IdleState.objects.get(name="notebook")
    assert state.acted_at is None and state.action_due_at == at(16)
