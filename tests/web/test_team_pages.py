"""Team self-service: managers add and remove members and change roles; admins create teams."""

import pytest
from django.urls import reverse

from provisioning.models import TeamSync
from teams import hooks
from teams.models import AuditEvent, Membership, Team
from tests.factories import UserFactory, add_member


@pytest.fixture
def manager(vision):
    return add_member(vision, UserFactory(username="maria"), Membership.Role.MANAGER)


@pytest.fixture
def dave(db):
    return UserFactory(username="dave", email="Dave@Example.com")


def page_of(team):
    return reverse("team_page", args=[team.slug])


def test_members_see_the_team_but_cannot_manage_it(login, alice, vision, manager):
    page = login(alice).get(page_of(vision)).content.decode()
    assert "maria" in page and "Add a member" not in page
    response = login(alice).post(reverse("member_add", args=[vision.slug]), {"who": "bob"})
    assert response.status_code == 403


def test_outsiders_get_a_404(login, bob, vision):
    assert login(bob).get(page_of(vision)).status_code == 404


def test_a_manager_adds_a_member_by_email_with_an_audit_event(
    login, manager, vision, dave, django_capture_on_commit_callbacks
):
    TeamSync.objects.create(team=vision, generation=1, synced_generation=1)
    client = login(manager)
    with django_capture_on_commit_callbacks():
        response = client.post(
            reverse("member_add", args=[vision.slug]), {"who": "dave@example.com", "role": "member"}
        )
    assert response.status_code == 302
    assert Membership.objects.get(team=vision, user=dave).role == "member"
    event = AuditEvent.objects.get(action=AuditEvent.Action.MEMBER_ADD)
    assert (event.actor, event.reason, event.subject) == (manager, "dave as member", dave)
    # The team's RoleBinding is re-synced: its sync row was marked.
    assert TeamSync.objects.get(team=vision).generation == 2
    assert "dave added to Vision as member." in client.get(page_of(vision)).content.decode()


def test_an_unknown_user_is_a_form_error(login, manager, vision):
    response = login(manager).post(
        reverse("member_add", args=[vision.slug]), {"who": "nobody\x00", "role": "member"}
    )
    assert response.status_code == 400
    assert "appear after their first login" in response.content.decode()


def test_a_manager_changes_a_role_and_cannot_demote_the_last_manager(login, manager, alice, vision):
    client = login(manager)
    client.post(reverse("member_role", args=[vision.slug, alice.pk]), {"role": "manager"})
    assert Membership.objects.get(team=vision, user=alice).role == "manager"
    client.post(reverse("member_role", args=[vision.slug, alice.pk]), {"role": "member"})
    response = client.post(
        reverse("member_role", args=[vision.slug, manager.pk]), {"role": "member"}, follow=True
    )
    assert "last manager" in response.content.decode()
    assert Membership.objects.get(team=vision, user=manager).role == "manager"
    actions_logged = list(
        AuditEvent.objects.filter(team=vision).values_list("action", flat=True).order_by("pk")
    )
    assert actions_logged == ["role_change", "role_change"]


def test_removing_asks_for_confirmation_first(login, manager, carol, vision):
    client = login(manager)
    url = reverse("member_remove", args=[vision.slug, carol.pk])
    page = client.get(url).content.decode()
    assert "Remove carol from Vision?" in page and 'method="post"' in page
    assert Membership.objects.filter(team=vision, user=carol).exists()
    client.post(url)
    assert not Membership.objects.filter(team=vision, user=carol).exists()
    assert AuditEvent.objects.get(action="member_remove").reason == "carol"


def test_admins_create_a_team_after_seeing_its_namespace(login, admin_user, settings):
    settings.PORTAL_NAMESPACE_PREFIX = "gpu-"
    client = login(admin_user)
    url = reverse("team_new")
    page = client.post(url, {"name": "Speech", "slug": "speech"}).content.decode()
    assert '<code class="namespace">gpu-speech</code>' in page
    assert not Team.objects.filter(slug="speech").exists()
    response = client.post(url, {"name": "Speech", "slug": "speech", "confirmed": "yes"})
    team = Team.objects.get(slug="speech")
    assert response["Location"] == page_of(team)
    assert AuditEvent.objects.get(team=team).action == "team_create"


@pytest.mark.parametrize(
    "data",
    [
        {"name": "Speech", "slug": "Speech Team"},
        {"name": "Vision", "slug": "other"},
        {"name": "X", "slug": "vision"},
    ],
)
def test_bad_teams_are_form_errors(login, admin_user, vision, data):
    response = login(admin_user).post(reverse("team_new"), {**data, "confirmed": "yes"})
    assert response.status_code == 200
    assert 'class="field has-error"' in response.content.decode()


def test_a_slug_too_long_for_a_namespace_with_the_prefix_is_a_form_error(
    login, admin_user, settings
):
    settings.PORTAL_NAMESPACE_PREFIX = "gpu-"
    slug = "s" * 60  # a valid slug, but gpu- and it are 64 characters
    page = login(admin_user).post(reverse("team_new"), {"name": "Speech", "slug": slug})
    assert f"The namespace gpu-{slug} would be longer than 63 characters." in page.content.decode()
    assert not Team.objects.filter(slug=slug).exists()


def test_only_admins_create_teams(login, alice):
    assert login(alice).get(reverse("team_new")).status_code == 403


@pytest.mark.parametrize("slug", ["kube-system", "default", "portal"])
def test_a_namespace_the_portal_never_uses_is_a_form_error_before_the_confirmation(
    login, admin_user, settings, slug
):
    settings.PORTAL_OWN_NAMESPACE = "portal"
    page = login(admin_user).post(reverse("team_new"), {"name": "Sys", "slug": slug})
    text = page.content.decode()
    assert page.status_code == 200
    assert 'class="field has-error"' in text
    assert f"The portal never uses namespace {slug}:" in text
    assert 'name="confirmed"' not in text  # not offered to confirm
    assert not Team.objects.filter(slug=slug).exists()


def test_the_form_refuses_a_namespace_taken_on_the_cluster(login, admin_user, monkeypatch):
    """The hook provisioning registers reads the live namespace (tests/provisioning/
    test_foreign_namespaces.py); here a stand-in says it is someone else's."""
    monkeypatch.setattr(hooks, "_namespace_refusals", [lambda slug, name: f"{name} is taken"])
    page = login(admin_user).post(
        reverse("team_new"), {"name": "ML", "slug": "ml", "confirmed": "yes"}
    )
    assert "ml is taken" in page.content.decode()
    assert not Team.objects.filter(slug="ml").exists()
