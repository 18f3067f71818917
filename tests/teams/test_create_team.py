"""`teams.actions.create_team` refuses a team whose namespace the portal may
not take as its own, naming the field: the rule of teams/namespaces.py."""

import pytest
from django.core.exceptions import ValidationError

from teams import actions, hooks
from teams.models import AuditEvent, Team


@pytest.mark.parametrize(
    ("slug", "why"),
    [
        ("default", "default is a Kubernetes system namespace"),
        ("kube-system", "kube-system is a Kubernetes system namespace"),
        ("kube-gpu", "kube-gpu is a Kubernetes system namespace"),
        ("portal", "portal is the portal's own namespace"),
    ],
)
def test_it_refuses_a_reserved_namespace_naming_the_slug(admin_user, settings, slug, why):
    settings.PORTAL_OWN_NAMESPACE = "portal"
    with pytest.raises(ValidationError) as raised:
        actions.create_team(name="Someone", slug=slug, by=admin_user)
    assert raised.value.message_dict == {
        "slug": [f"The portal never uses namespace {slug}: {why}."]
    }
    assert not Team.objects.exists()
    assert not AuditEvent.objects.exists()


def test_the_prefix_is_part_of_the_rule(admin_user, settings):
    settings.PORTAL_NAMESPACE_PREFIX = "kub"
    with pytest.raises(ValidationError, match="never uses namespace kube-system"):
        actions.create_team(name="Sys", slug="e-system", by=admin_user)
    settings.PORTAL_NAMESPACE_PREFIX = "team-"
    assert actions.create_team(name="Default", slug="default", by=admin_user).namespace == (
        "team-default"
    )


def test_it_refuses_a_namespace_that_exists_without_being_the_portals(admin_user, monkeypatch):
    """What the cluster says comes through the hook provisioning registers (its
    test against both backends: tests/provisioning/test_foreign_namespaces.py)."""
    monkeypatch.setattr(
        hooks,
        "_namespace_refusals",
        [lambda slug, name: f"{name} is taken" if slug == "ml" else ""],
    )
    with pytest.raises(ValidationError) as raised:
        actions.create_team(name="ML", slug="ml", by=admin_user)
    assert raised.value.message_dict == {"slug": ["ml is taken"]}
    assert actions.create_team(name="Speech", slug="speech", by=admin_user).slug == "speech"
