"""The webhook pages: a team's managers set its hook (Django client), admins set
theirs and see every delivery; bad input is a form error, never a 500."""

import pytest
from django.urls import reverse

from notifications import actions
from notifications.models import Delivery, Webhook
from teams.models import AuditEvent
from tests.factories import submit


@pytest.fixture
def login(client):
    def log_in(user):
        client.force_login(user)
        return client

    return log_in


def page(team):
    return reverse("team_webhook", args=[team.slug])


def test_a_manager_sets_the_hook_and_sees_the_secret_once(login, carol, vision, receiver):
    client = login(carol)
    response = client.post(page(vision), {"url": receiver.url})
    assert response.status_code == 200
    hook = Webhook.objects.get(team=vision)
    text = response.content.decode()
    assert hook.secret in text and "not shown again" in text
    event = AuditEvent.objects.get(action="webhook_set")
    # The history, which every member reads, names the host only (a Slack URL is a key).
    assert (event.team, event.actor, event.reason) == (vision, carol, "to 127.0.0.1")
    # Afterwards only a hint of it.
    text = client.get(page(vision)).content.decode()
    assert hook.secret not in text and hook.secret[-4:] in text
    # A new URL keeps the secret, and says so.
    other = receiver.url.replace("channel=gpu", "channel=ops")
    response = client.post(page(vision), {"url": other}, follow=True)
    assert "its secret stays the same" in response.content.decode()
    assert Webhook.objects.get(team=vision).secret == hook.secret


def test_a_new_secret_replaces_the_old_and_is_shown_once(login, carol, vision, team_hook):
    hook, old = team_hook
    response = login(carol).post(reverse("team_webhook_secret", args=[vision.slug]))
    new = Webhook.objects.get(pk=hook.pk).secret
    assert new != old and new in response.content.decode()
    assert AuditEvent.objects.filter(action="webhook_secret", actor=carol).count() == 1


def test_the_test_button_delivers_a_test_notice(
    login, carol, vision, team_hook, receiver, django_capture_on_commit_callbacks
):
    client = login(carol)
    with django_capture_on_commit_callbacks():
        response = client.post(reverse("team_webhook_test", args=[vision.slug]), follow=True)
    assert "Test notification queued" in response.content.decode()
    delivery = Delivery.objects.get()
    actions.deliver(delivery.pk)
    (sent,) = receiver.requests()
    assert sent.headers["X-Portal-Event"] == "webhook_test"
    assert "Test notification for Vision, sent by carol" in sent.json["text"]
    log = client.get(page(vision)).content.decode()
    assert f'id="delivery-{delivery.pk}"' in log and "Delivered" in log and "HTTP 200" in log
    # The body as sent, for whoever debugs the receiver (escaped on the page).
    assert (
        "Test notification for Vision, sent by carol"
        in log.split(f'id="delivery-{delivery.pk}"')[1]
    )


def test_remove_asks_first_then_deletes(login, carol, vision, team_hook):
    client = login(carol)
    url = reverse("team_webhook_remove", args=[vision.slug])
    assert "Remove the webhook?" in client.get(url).content.decode()
    assert Webhook.objects.filter(team=vision).exists()
    client.post(url)
    assert not Webhook.objects.filter(team=vision).exists()
    assert AuditEvent.objects.filter(action="webhook_remove", team=vision).count() == 1


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("", "This field is required."),
        ("https://exa\x00mple.com/hook", "Null characters are not allowed."),
        ("https://example.com/" + "x" * 100_000, "Keep the URL to 2,000 characters."),
        ("http://example.com/hook", "Use https"),
        ("https://10.0.0.7/hook", "10.0.0.7 is a private address"),
        ("https://169.254.169.254/", "169.254.169.254 is a link-local address"),
        ("javascript:alert(1)", "Give a full https:// URL."),
    ],
)
def test_bad_urls_are_form_errors(login, carol, vision, url, says, settings):
    settings.PORTAL_WEBHOOK_ALLOW_HTTP_LOOPBACK = False
    response = login(carol).post(page(vision), {"url": url})
    assert response.status_code == 400
    assert says in response.content.decode()
    assert not Webhook.objects.exists()


def test_http_to_loopback_is_refused_in_production(login, carol, vision, receiver, settings):
    settings.PORTAL_WEBHOOK_ALLOW_HTTP_LOOPBACK = False
    response = login(carol).post(page(vision), {"url": receiver.url})
    assert response.status_code == 400
    assert "Use https" in response.content.decode()
    response = login(carol).post(page(vision), {"url": receiver.url.replace("http:", "https:")})
    assert "127.0.0.1 is a loopback address" in response.content.decode()


def test_members_cannot_set_it_and_outsiders_do_not_see_it(login, alice, bob, vision, receiver):
    assert login(alice).get(page(vision)).status_code == 403
    assert login(alice).post(page(vision), {"url": receiver.url}).status_code == 403
    assert login(bob).get(page(vision)).status_code == 404
    assert login(alice).get(reverse("admin_webhooks")).status_code == 403
    assert not Webhook.objects.exists()


def test_the_team_page_links_managers_to_the_hook(login, carol, alice, vision):
    link = f'href="{page(vision)}"'
    assert link in login(carol).get(reverse("team_page", args=[vision.slug])).content.decode()
    assert link not in login(alice).get(reverse("team_page", args=[vision.slug])).content.decode()


def test_the_admin_page_sets_the_admins_hook_and_logs_every_delivery(
    login, admin_user, carol, vision, nlp, bob, alice, h100, team_hook, receiver, settings
):
    client = login(admin_user)
    response = client.post(reverse("admin_webhooks"), {"url": receiver.url + "&admins=1"})
    assert response.status_code == 200
    assert Webhook.objects.get(team=None).secret in response.content.decode()
    settings.PORTAL_WEBHOOK_MAX_ATTEMPTS = 1
    receiver.answer(500)
    submit(vision, h100, alice)  # to vision's hook and the admins'
    submit(nlp, h100, bob)  # to the admins' only
    for pk in Delivery.objects.order_by("pk").values_list("pk", flat=True):
        actions.deliver(pk)
    log = client.get(reverse("admin_webhooks")).content.decode()
    assert log.count('id="delivery-') == 3
    assert "HTTP 500: no_service" in log and "Failed" in log and "Delivered" in log
    # The team's managers see their own hook's deliveries only.
    team_log = login(carol).get(page(vision)).content.decode()
    assert team_log.count('id="delivery-') == 1


def test_an_archived_teams_hook_is_shown_but_not_changed(
    login, admin_user, carol, vision, team_hook, receiver
):
    from teams.actions import archive_team

    archive_team(vision, by=admin_user)
    client = login(carol)
    assert "is archived" in client.get(page(vision)).content.decode()
    response = client.post(page(vision), {"url": receiver.url + "&x=1"}, follow=True)
    assert "Vision is archived." in response.content.decode()
    assert Webhook.objects.get(team=vision).url == receiver.url


def test_members_cannot_test_rekey_or_remove(login, alice, vision, team_hook):
    client = login(alice)
    for name in ("team_webhook_test", "team_webhook_secret", "team_webhook_remove"):
        assert client.post(reverse(name, args=[vision.slug])).status_code == 403
    assert Webhook.objects.get(team=vision).secret == team_hook[1]
    assert not Delivery.objects.exists()


def test_acting_on_no_hook_says_so(login, admin_user):
    client = login(admin_user)
    response = client.post(reverse("admin_webhook_secret"), follow=True)
    assert "There is no webhook to change the secret of." in response.content.decode()
    response = client.post(reverse("admin_webhook_test"), follow=True)
    assert "Set the webhook&#x27;s URL first." in response.content.decode()


def test_a_get_does_not_change_anything(login, carol, vision, team_hook):
    client = login(carol)
    assert client.get(reverse("team_webhook_test", args=[vision.slug])).status_code == 405
    assert client.get(reverse("team_webhook_secret", args=[vision.slug])).status_code == 405
    assert Webhook.objects.get(team=vision).secret == team_hook[1]


def test_a_failed_delivery_is_sent_again_from_the_log(
    login, carol, bob, vision, team_hook, receiver, django_capture_on_commit_callbacks, settings
):
    settings.PORTAL_WEBHOOK_MAX_ATTEMPTS = 2
    receiver.answer(500, 500)  # then 200
    delivery = actions.send_test(vision, by=carol)
    actions.deliver(delivery.pk)
    delivery.refresh_from_db()
    actions.deliver(delivery.pk, delivery.next_attempt_at)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("failed", 2)
    resend = reverse("delivery_resend", args=[delivery.pk])
    assert login(bob).post(resend).status_code == 404  # not his team's
    client = login(carol)
    assert "Send again" in client.get(page(vision)).content.decode()
    with django_capture_on_commit_callbacks() as queued:
        response = client.post(resend, {"next": "https://evil.example/"})
    assert response.url == page(vision) and len(queued) == 1
    actions.deliver(delivery.pk)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_code) == ("delivered", 1, 200)
    assert len(receiver.requests()) == 3
    # Only a failed one: a second click is refused, and says so.
    response = client.post(resend, follow=True)
    assert "Only a failed delivery is sent again." in response.content.decode()


@pytest.mark.parametrize("target", ["x", "a:b", "//evil.example/", "/a\r\nb"])
def test_a_resend_with_a_next_that_is_no_path_here_goes_to_the_hook_page(
    login, carol, vision, team_hook, target
):
    delivery = actions.send_test(vision, by=carol)
    response = login(carol).post(reverse("delivery_resend", args=[delivery.pk]), {"next": target})
    assert response.status_code == 302
    assert response.url == page(vision)


def test_the_django_admin_lists_deliveries_read_only(
    login, admin_user, vision, carol, team_hook, django_assert_max_num_queries
):
    from django.contrib.auth.models import Permission

    admin_user.user_permissions.add(Permission.objects.get(codename="view_delivery"))
    for _ in range(5):
        actions.send_test(vision, by=carol)
    client = login(admin_user)
    with django_assert_max_num_queries(12):  # not a query per row
        listing = client.get("/admin/notifications/delivery/")
    assert listing.status_code == 200 and listing.content.decode().count("webhook_test") >= 5
    detail = client.get(f"/admin/notifications/delivery/{Delivery.objects.first().pk}/change/")
    assert detail.status_code == 200 and 'name="_save"' not in detail.content.decode()
    assert client.get("/admin/notifications/delivery/add/").status_code == 403
