import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from gpu_requests import actions, views
from gpu_requests.models import QuotaAction
from provisioning import actions as provisioning_actions
from provisioning.models import TeamSync
from teams import actions as team_actions
from teams.models import AuditEvent
from tests.factories import FlavorFactory, TeamFactory, UserFactory, add_member, next_week, submit

URL = reverse("dashboard")


def test_it_redirects_anonymous_to_login(client, db):
    response = client.get(URL)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_it_tells_charlie_he_has_no_team(login, charlie, vision):
    response = login(charlie).get(URL)
    assert response.status_code == 200
    assert b"You are not in any team yet" in response.content
    assert b"Vision" not in response.content


def test_it_shows_alice_her_team_only(login, alice, bob, pending, nlp, h100):
    submit(nlp, h100, bob, reason="bob's secret")
    response = login(alice).get(URL)
    assert response.status_code == 200
    assert b"Vision" in response.content
    assert b"NLP" not in response.content
    assert reverse("request_detail", args=[pending.pk]).encode() in response.content


def test_it_shows_carol_the_same_team(login, carol, pending):
    response = login(carol).get(URL)
    assert f"#{pending.pk}".encode() in response.content


def test_it_shows_approved_quota_as_upcoming(login, alice, admin_user, pending):
    actions.approve(pending, by=admin_user)
    response = login(alice).get(URL)
    page = response.content.decode()
    assert "Nothing waiting for review." in page
    quota_row = page.split("<tbody>")[1].split("</tbody>")[0]
    assert "H100 80GB" in quota_row
    assert '<td class="num">0</td>' in quota_row  # nothing now
    assert '<td class="num">2</td>' in quota_row  # 2 GPUs within 30 days
    assert "approved" in page  # the decision is listed
    assert f'href="/requests/{pending.pk}/"' in quota_row


def test_it_shows_active_quota_and_its_daily_spend(login, alice, admin_user, vision, h100):
    start = timezone.now()
    req = submit(vision, h100, alice, gpus=3, starts_at=start, hours=48)
    actions.approve(req, by=admin_user)
    response = login(alice).get(URL)
    # 3 GPUs x 4.00 per GPU-hour x 24 hours
    assert b"288.00 USD" in response.content
    assert b'<td class="num">3</td>' in response.content


def test_it_says_when_flavors_share_a_resource_name(login, alice, admin_user, pending, a100):
    actions.approve(pending, by=admin_user)
    response = login(alice).get(URL)
    assert b"caps their sum" in response.content
    assert b"A100 80GB" in response.content


def test_dra_flavors_of_one_class_share_its_cap_and_are_kept_apart_by_device_selector(
    login, alice, admin_user, vision
):
    key = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
    h100, _ = (
        FlavorFactory(
            slug=slug,
            name=name,
            device_class="gpu.nvidia.com",
            device_selector=f'device.attributes["gpu.nvidia.com"].productName == "{product}"',
            resource_name=key,
            node_selector={},
        )
        for slug, name, product in (
            ("h100-dra", "H100 DRA", "NVIDIA H100 80GB HBM3"),
            ("l4-dra", "L4 DRA", "NVIDIA L4"),
        )
    )
    actions.approve(submit(vision, h100, alice, gpus=2), by=admin_user)
    page = login(alice).get(URL).content.decode()
    assert f"Shares the Kubernetes resource <code>{key}</code> with L4 DRA" in page
    assert "keeps your jobs on H100 DRA by device selector." in page


def test_it_does_not_warn_about_sharing_for_distinct_resources(login, alice, admin_user, pending):
    FlavorFactory(slug="mig", name="MIG 1g", resource_name="nvidia.com/mig-1g.10gb")
    actions.approve(pending, by=admin_user)
    response = login(alice).get(URL)
    assert b"caps their sum" not in response.content


def test_it_shows_admin_all_teams_with_a_filter(login, admin_user, vision, nlp):
    response = login(admin_user).get(URL)
    assert b"Vision" in response.content
    assert b'id="team-nlp"' in response.content
    response = login(admin_user).get(URL, {"team": "nlp"})
    assert b'id="team-nlp"' in response.content
    assert b'id="team-vision"' not in response.content


def test_it_ignores_a_team_filter_for_someone_elses_team(login, alice, nlp):
    response = login(alice).get(URL, {"team": "nlp"})
    assert b'id="team-nlp"' not in response.content
    assert b"No such team." in response.content


def test_it_lists_at_most_ten_recent_decisions_per_team(login, alice, carol, vision, h100):
    for _ in range(12):
        actions.cancel(submit(vision, h100, alice, gpus=1), by=carol)
    response = login(alice).get(URL)
    assert response.content.decode().count('class="badge status-cancelled"') == 10


def _set_sync(team, **fields):
    """A TeamSync row as a sync left it (tests/provisioning drives real ones)."""
    provisioning_actions.mark_dirty(team.pk)
    TeamSync.objects.filter(team=team).update(**fields)


def test_it_says_a_team_without_a_sync_is_not_provisioned_yet(login, alice):
    page = login(alice).get(URL).content.decode()
    assert "Not provisioned yet" in page


def test_it_shows_a_pending_sync(login, alice, vision):
    provisioning_actions.mark_dirty(vision.pk)
    page = login(alice).get(URL).content.decode()
    assert "Pending" in page
    assert "waiting to be applied to the cluster" in page


def test_it_shows_a_team_in_sync(login, alice, vision):
    _set_sync(
        vision,
        status=TeamSync.Status.IN_SYNC,
        synced_generation=1,
        last_synced_at=timezone.now() - timedelta(minutes=5),
    )
    page = login(alice).get(URL).content.decode()
    assert "In sync" in page
    assert "cluster updated 5\xa0minutes ago" in page
    assert "Not provisioned yet" not in page


def test_it_shows_a_failing_sync_with_the_servers_error_and_when(login, alice, vision):
    _set_sync(
        vision,
        status=TeamSync.Status.FAILING,
        last_error='namespaces "vision" is forbidden: <quota> exceeded',
        last_error_status=403,
        last_error_at=timezone.now() - timedelta(hours=2),
    )
    page = login(alice).get(URL).content.decode()
    assert "Failing" in page
    assert "namespaces &quot;vision&quot; is forbidden: &lt;quota&gt; exceeded" in page
    assert "HTTP 403, 2\xa0hours ago" in page


def test_it_shows_an_archived_team(login, alice, admin_user, vision):
    team_actions.archive_team(vision, by=admin_user)
    response = login(alice).get(URL)
    assert response.status_code == 200  # the archive event has no request to link to
    assert "Archived" in response.content.decode()


def test_it_links_reviewers_to_the_cluster_page(login, admin_user, alice, vision):
    assert b'href="/cluster/#sync-vision"' in login(admin_user).get(URL).content
    assert b"/cluster/" not in login(alice).get(URL).content


def _populate(teams, flavors, user, admin, first, last):
    for i in range(first, last):
        for team in teams:
            req = submit(team, flavors[i % 2], user, gpus=1, starts_at=next_week(days=1 + i))
            if i % 2:
                actions.approve(req, by=admin)


def test_it_keeps_query_count_flat(login, admin_user, h100, a100):
    a100.refresh_from_db()  # the fixture holds its price as a str
    teams = [TeamFactory(slug=f"t{i}") for i in range(3)]
    user = UserFactory(username="member")
    for team in teams:
        add_member(team, user)
    client = login(admin_user)
    counts = []
    # Each round approves some: the page has decisions, whose requests are one more query.
    for first, last in [(0, 2), (2, 8)]:
        _populate(teams, [h100, a100], user, admin_user, first, last)
        _set_sync(teams[first % 3], status=TeamSync.Status.FAILING, last_error="refused")
        with CaptureQueriesContext(connection) as queries:
            response = client.get(URL)
        assert response.status_code == 200
        counts.append(len(queries))
    # session, user, 2 x permissions, team count, team page, namespace quota
    # (prefetched), team names (the filter), flavors, reservations, pending, events
    # and their requests (the events' subjects, prefetched), and billing's note on quota
    # nobody uses (the ledger's figure; the active requests only when there is one)
    assert counts[0] == counts[1] == 15, counts


def test_it_pages_the_teams_for_admins(login, admin_user):
    for i in range(23):
        TeamFactory(slug=f"team-{i:02d}")
    client = login(admin_user)
    first = client.get(URL).content.decode()
    assert first.count('<section class="team card"') == 20 and "Page 1 of 2" in first
    second = client.get(URL, {"page": 2}).content.decode()
    assert second.count('<section class="team card"') == 3
    assert 'id="team-team-22"' in second


def test_it_lists_the_first_five_pending_requests_and_counts_them(login, alice, vision, h100):
    for days in range(7, 0, -1):
        submit(vision, h100, alice, gpus=1, starts_at=next_week(days=days))
    page = login(alice).get(URL).content.decode()
    assert 'Pending requests <span class="muted">(7)</span>' in page
    assert page.count('class="badge status-pending"') == 5
    assert "The first 5 of 7." in page


def test_recent_decisions_are_peoples_with_the_current_status(
    login, alice, admin_user, vision, h100
):
    started = submit(vision, h100, alice, gpus=1, starts_at=timezone.now(), hours=2)
    actions.approve(started, by=admin_user, reason="go")  # approved, then activated by the system
    page = login(alice).get(URL).content.decode()
    recent = page.split("<h3>Recent decisions</h3>")[1]
    assert recent.count("<li>") == 1
    assert 'status-approved">approved</span>' in recent and "now active" in recent
    assert "system" not in recent


def test_it_counts_open_ended_quota_until_ended(login, alice, admin_user, vision, h100):
    req = submit(
        vision, h100, alice, gpus=1, starts_at=timezone.now() + timedelta(days=2), hours=None
    )
    actions.approve(req, by=admin_user)
    response = login(alice).get(URL)
    assert b"open-ended" in response.content


def test_two_requests_of_a_flavor_with_a_gap_are_two_rows(login, alice, admin_user, vision, h100):
    now = timezone.now()
    first = submit(vision, h100, alice, gpus=2, starts_at=now + timedelta(days=1), hours=24)
    later = submit(vision, h100, alice, gpus=3, starts_at=now + timedelta(days=5), hours=24)
    follows = submit(vision, h100, alice, gpus=1, starts_at=now + timedelta(days=6), hours=24)
    for quota_request in (first, later, follows):
        actions.approve(quota_request, by=admin_user)
    page = login(alice).get(URL).content.decode()
    quota = page.split("<h3>Quota</h3>")[1].split("</table>")[0]
    rows = quota.split("<tbody>")[1].split("</tr>")[:-1]
    assert len(rows) == 2  # the gap splits them; the request that follows without one joins
    assert f"#{first.pk}" in rows[0] and f"#{later.pk}" not in rows[0]
    assert f"#{later.pk}" in rows[1] and f"#{follows.pk}" in rows[1]


def test_the_daily_cost_of_quota_is_explained_by_the_charging_mode(
    login, alice, admin_user, vision, h100, settings
):
    actions.approve(submit(vision, h100, alice, gpus=3, starts_at=timezone.now()), by=admin_user)
    page = login(alice).get(URL).content.decode()
    assert "would cost <strong>288.00 USD</strong> per day if held all day" in page
    assert "charged by allocation: you pay for the GPU-hours your pods hold" in page
    settings.PORTAL_BILLING_CHARGE = "reservation"
    page = login(alice).get(URL).content.decode()
    assert "Active quota costs <strong>288.00 USD</strong> per day" in page
    assert "the quota is paid whether pods use it or not" in page


@pytest.mark.postgres
def test_it_reads_a_few_decisions_a_team_from_an_index(db, vision, nlp):
    # However long the history: each team's newest, from the partial index, LIMITed.
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # a plan for a big table
    plan = views._recent_events([vision.pk, nlp.pk]).explain()
    # Which index (the partial one, the team's newest-first one, the team's foreign
    # key): the planner's pick on tables this small depends on their statistics;
    # whichever, a LIMITed read per team, never a scan of the whole history.
    assert "Limit" in plan
    # (A bitmap heap scan reads from an index too: CI's planner picked one.)
    read = r"(Index (Only )?Scan using \w+|Bitmap Heap Scan) on gpu_requests_auditevent event"
    assert re.search(read, plan), plan
    assert "Seq Scan on gpu_requests_auditevent" not in plan


def test_recent_events_are_each_teams_newest_decisions(db, alice, carol, bob, vision, nlp, h100):
    # Either query (LATERAL on PostgreSQL, a window function elsewhere): per team, its
    # newest ten decisions; no submissions; all of them newest first.
    for _ in range(12):
        actions.cancel(submit(vision, h100, alice, gpus=1), by=carol)
    for _ in range(3):
        actions.cancel(submit(nlp, h100, bob, gpus=1), by=bob)
    cancels = AuditEvent.objects.filter(action=QuotaAction.CANCEL)
    cancels = cancels.order_by("-created_at", "-pk")
    expected = [*cancels.filter(team=vision)[:10], *cancels.filter(team=nlp)]
    found = list(views._recent_events([vision.pk, nlp.pk]))
    assert found == list(cancels.filter(pk__in=[e.pk for e in expected]))
    assert len(found) == 13
