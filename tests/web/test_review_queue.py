from datetime import timedelta

import pytest
from django.core import mail
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from gpu_requests import actions, capacity
from gpu_requests.models import QuotaRequest
from tests.factories import TeamFactory, UserFactory, add_member, next_week, peak_by_hand, submit

URL = reverse("review_queue")
Status = QuotaRequest.Status


def test_it_redirects_anonymous_to_login(client, db):
    response = client.get(URL)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("who", ["alice", "carol", "bob", "charlie"])
def test_it_is_forbidden_to_non_reviewers(login, request, who):
    response = login(request.getfixturevalue(who)).get(URL)
    assert response.status_code == 403
    assert b"Only platform admins can review" in response.content


def test_it_lists_pending_requests_oldest_first(login, admin_user, vision, alice, h100):
    first = submit(vision, h100, alice, gpus=1, reason="first in line")
    second = submit(vision, h100, alice, gpus=3, reason="second in line")
    decided = submit(vision, h100, alice, gpus=5)
    actions.reject(decided, by=admin_user)
    page = login(admin_user).get(URL).content.decode()
    assert page.index(f'id="req-{first.pk}"') < page.index(f'id="req-{second.pk}"')
    assert f'id="req-{decided.pk}"' not in page
    assert "first in line" in page and "Vision" in page and "alice" in page
    assert "<strong>2</strong> pending requests" in page


def test_it_shows_capacity_without_and_with_each_request(login, admin_user, vision, alice, h100):
    held = submit(vision, h100, alice, gpus=10)
    actions.approve(held, by=admin_user)
    fits = submit(vision, h100, alice, gpus=6)
    too_big = submit(vision, h100, alice, gpus=7)
    page = login(admin_user).get(URL).content.decode()
    row = page.split(f'id="req-{fits.pk}"')[1].split("</tr>")[0]
    assert '10</span> → <strong class="num">16</strong> of 16 GPUs' in row
    assert "exceeds capacity" not in row
    row = page.split(f'id="req-{too_big.pk}"')[1].split("</tr>")[0]
    assert '<div class="capacity over">' in row
    assert "17</strong> of 16 GPUs" in row and "exceeds capacity" in row


def test_bulk_capacity_agrees_with_the_peak_counted_by_hand(admin_user, vision, alice, h100, a100):
    a100.refresh_from_db()
    start = next_week()
    for offset, hours, gpus in [(0, 24, 3), (12, 48, 4), (30, None, 2), (-48, 24, 5)]:
        req = submit(
            vision, h100, alice, gpus=gpus, starts_at=start + timedelta(hours=offset), hours=hours
        )
        actions.approve(req, by=admin_user)
    actions.approve(submit(vision, a100, alice, gpus=9, starts_at=start), by=admin_user)
    probes = [
        submit(vision, h100, alice, gpus=1, starts_at=start + timedelta(hours=h), hours=d)
        for h, d in [(0, 1), (0, 100), (13, 5), (-100, 60), (40, None), (-72, None), (200, 3)]
    ]
    views = capacity.capacity_views(QuotaRequest.objects.filter(pk__in=[p.pk for p in probes]))
    for probe in probes:
        expected = peak_by_hand(h100, probe.starts_at, probe.ends_at, exclude=probe)
        assert views[probe.pk].peak == expected, probe


def test_it_approves_inline_with_htmx_and_returns_the_row_and_the_counts(
    login, admin_user, pending, django_capture_on_commit_callbacks, eager
):
    # eager: the decision email is a task; it runs here as a worker would run it.
    client = login(admin_user)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("request_approve", args=[pending.pk]),
            {"reason": "ok", "next": URL, "shown": str(pending.pk)},
            HTTP_HX_REQUEST="true",
            HTTP_HX_TARGET=f"req-{pending.pk}",
        )
    page = response.content.decode().strip()
    assert response.status_code == 200
    assert page.startswith(f'<tr id="req-{pending.pk}"')
    assert f"Request #{pending.pk} approved." in page
    assert '<span class="badge status-approved">Approved</span>' in page
    # Out of band: the count, and the upcoming capacity now holding the approval.
    summary = page.split('id="queue-summary"')[1].split("</p>")[0]
    assert 'hx-swap-oob="outerHTML"' in summary and "<strong>0</strong> pending requests" in summary
    upcoming = page.split('id="upcoming-capacity"')[1]
    assert 'hx-swap-oob="outerHTML"' in upcoming.split(">")[0]
    assert '<td class="num">2</td>' in upcoming
    assert QuotaRequest.objects.get().status == Status.APPROVED
    assert mail.outbox[-1].to == ["alice@example.com"]
    # The message went into the row, not into the next full page.
    assert b"approved." not in client.get(URL).content


def test_an_approval_re_renders_only_the_capacity_cells_it_changed(
    login, admin_user, vision, alice, h100, a100
):
    a100.refresh_from_db()
    start = next_week()
    approving = submit(vision, h100, alice, gpus=4, starts_at=start, hours=24)
    overlapping = submit(vision, h100, alice, gpus=1, starts_at=start + timedelta(hours=12))
    later = submit(vision, h100, alice, gpus=1, starts_at=start + timedelta(days=3))
    other_flavor = submit(vision, a100, alice, gpus=1, starts_at=start)
    not_shown = submit(vision, h100, alice, gpus=1, starts_at=start)
    shown = [approving, overlapping, later, other_flavor]
    response = login(admin_user).post(
        reverse("request_approve", args=[approving.pk]),
        {"shown": ",".join(str(r.pk) for r in shown) + ",junk,-3,99999999999999"},
        HTTP_HX_REQUEST="true",
    )
    page = response.content.decode()
    cells = page.split('<td class="cap" id="cap-')[1:]
    # The decided row's own cell, and one out-of-band cell: the overlapping row's.
    assert [cell.split('"')[0] for cell in cells] == [str(approving.pk), str(overlapping.pk)]
    assert 'hx-swap-oob="outerHTML"' in cells[1].split(">")[0]
    assert '4</span> → <strong class="num">5</strong> of 16 GPUs' in cells[1]
    assert f"cap-{not_shown.pk}" not in page and f"cap-{later.pk}" not in page


def test_a_capacity_error_leaves_counts_and_cells_alone(login, admin_user, vision, alice, h100):
    actions.approve(submit(vision, h100, alice, gpus=10), by=admin_user)
    too_big = submit(vision, h100, alice, gpus=7)
    other = submit(vision, h100, alice, gpus=1)
    response = login(admin_user).post(
        reverse("request_approve", args=[too_big.pk]),
        {"shown": f"{too_big.pk},{other.pk}"},
        HTTP_HX_REQUEST="true",
    )
    page = response.content.decode()
    assert "<strong>2</strong> pending requests" in page
    assert f"cap-{other.pk}" not in page and "upcoming-capacity" not in page


def test_it_rejects_inline_with_htmx(login, admin_user, pending):
    response = login(admin_user).post(
        reverse("request_reject", args=[pending.pk]), {"reason": "no"}, HTTP_HX_REQUEST="true"
    )
    assert b'<span class="badge status-rejected">Rejected</span>' in response.content
    assert b"<strong>0</strong> pending requests" in response.content
    assert b"upcoming-capacity" not in response.content


def test_it_shows_capacity_errors_in_the_row(login, admin_user, vision, alice, h100):
    actions.approve(submit(vision, h100, alice, gpus=10), by=admin_user)
    too_big = submit(vision, h100, alice, gpus=7)
    response = login(admin_user).post(
        reverse("request_approve", args=[too_big.pk]), HTTP_HX_REQUEST="true"
    )
    page = response.content.decode()
    assert response.status_code == 200
    assert page.strip().startswith(f'<tr id="req-{too_big.pk}"')
    assert '<p class="message error" role="status">Not enough H100 80GB capacity' in page
    assert ">Approve</button>" in page  # still pending, still decidable


def test_it_shows_an_already_decided_request_in_the_row(login, admin_user, alice, pending):
    actions.cancel(pending, by=alice)
    response = login(admin_user).post(
        reverse("request_approve", args=[pending.pk]), HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    assert b"is cancelled; only pending requests can be approved" in response.content
    assert b"status-cancelled" in response.content


def test_without_javascript_it_redirects_back_to_the_queue(login, admin_user, pending):
    client = login(admin_user)
    response = client.post(reverse("request_approve", args=[pending.pk]), {"next": URL})
    assert response.status_code == 302
    assert response["Location"] == URL
    page = client.get(URL).content.decode()
    assert f"Request #{pending.pk} approved." in page
    assert "Nothing to review." in page


def test_upcoming_capacity_marks_overbooked_days(login, admin_user, vision, alice, h100):
    actions.approve(submit(vision, h100, alice, gpus=10), by=admin_user)
    h100.capacity = 8  # the cluster shrank after the approval
    h100.save()
    page = login(admin_user).get(URL).content.decode()
    assert '<span class="over"' in page


def _populate(admin, flavors, first, last):
    user = UserFactory(username="busy")
    teams = [TeamFactory(slug=f"team-{i}") for i in range(2)]
    for team in teams:
        add_member(team, user)
    for i in range(first, last):
        for team in teams:
            flavor = flavors[i % 2]
            submit(team, flavor, user, gpus=1, starts_at=next_week(days=1 + i % 20))
            approved = submit(team, flavor, user, gpus=1, starts_at=next_week(days=2 + i % 20))
            actions.approve(approved, by=admin)


def test_it_keeps_query_count_flat(login, admin_user, h100, a100):
    a100.refresh_from_db()  # the fixture holds its price as a str
    client = login(admin_user)
    counts = []
    for first, last in [(0, 1), (1, 8)]:
        _populate(admin_user, [h100, a100], first, last)
        with CaptureQueriesContext(connection) as queries:
            response = client.get(URL)
        assert response.content.decode().count('<tr id="req-') == min(2 * last, 25)
        counts.append(len(queries))
    # session, user, 2 x permissions, count, page, reservations, flavors, upcoming
    # reservations; the timeline's reservations, team names and pending requests;
    # and what the registered reservation source (batch windows) reads for them
    assert counts[0] == counts[1] == 15, counts


def test_it_pages_the_queue(login, admin_user, vision, alice, h100):
    requests = [submit(vision, h100, alice, gpus=1) for _ in range(27)]
    client = login(admin_user)
    first = client.get(URL).content.decode()
    assert first.count('<tr id="req-') == 25
    assert "<strong>27</strong> pending requests" in first and "page 1 of 2" in first
    second = client.get(URL, {"page": 2}).content.decode()
    assert [f'id="req-{r.pk}"' in second for r in requests[-3:]] == [False, True, True]
    assert client.get(URL, {"page": "nonsense"}).status_code == 200
    assert client.get(URL, {"page": "nonsense\x00"}).status_code == 400  # at the edge


def test_it_refuses_an_oversized_reason(login, admin_user, pending):
    response = login(admin_user).post(
        reverse("request_reject", args=[pending.pk]), {"reason": "x" * 2001}, follow=True
    )
    assert b"Keep the reason to 2,000 characters." in response.content
    assert QuotaRequest.objects.get().status == Status.PENDING


def test_a_reason_as_long_as_a_justification_is_taken(login, admin_user, pending):
    # One limit for what people type, here as in the API and the request form.
    page = login(admin_user).get(URL).content.decode()
    assert f'data-counter="count-reason-{pending.pk}"' in page
    assert "maxlength" not in page.split(f'id="req-{pending.pk}"')[1].split("</form>")[0]
    login(admin_user).post(reverse("request_reject", args=[pending.pk]), {"reason": "x" * 2000})
    assert QuotaRequest.objects.get().status == Status.REJECTED


def test_a_reason_too_long_is_refused_and_kept_in_the_row(login, admin_user, pending):
    typed = "because " * 300  # 2,400 characters
    response = login(admin_user).post(
        reverse("request_reject", args=[pending.pk]),
        {"reason": typed},
        HTTP_HX_REQUEST="true",
        HTTP_HX_TARGET=f"req-{pending.pk}",
    )
    row = response.content.decode().split("</tr>")[0]
    assert "Keep the reason to 2,000 characters." in row
    assert f'value="{typed}"' in row
    pending.refresh_from_db()
    assert pending.status == Status.PENDING


def test_a_reason_too_long_on_the_detail_page_is_kept_in_its_field(login, admin_user, pending):
    typed = "x" * 2001
    response = login(admin_user).post(
        reverse("request_approve", args=[pending.pk]), {"reason": typed}
    )
    assert response.status_code == 400
    page = response.content.decode()
    assert 'id="decision-error" role="alert">Keep the reason to 2,000 characters.' in page
    assert f'value="{typed}"' in page
    pending.refresh_from_db()
    assert pending.status == Status.PENDING
