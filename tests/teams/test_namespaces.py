"""Which namespace is which team's, and which ones the portal never takes as a
team's: Kubernetes' own, the portal's own, and any that exist without the
portal's labels for the team (teams/namespaces.py)."""

import pytest
from django.core.exceptions import ValidationError

from teams import hooks, namespaces
from teams.namespaces import namespace_of, owned, refusal, reserved


def test_it_puts_the_configured_prefix_before_the_slug(settings):
    settings.PORTAL_NAMESPACE_PREFIX = "gpu-"
    assert namespace_of("vision") == "gpu-vision"
    assert namespace_of("vision", prefix="team-") == "team-vision"


def test_it_refuses_a_namespace_name_over_63_characters():
    assert namespace_of("a" * 58, prefix="team-") == "team-" + "a" * 58
    with pytest.raises(ValueError, match="longer than 63"):
        namespace_of("a" * 59, prefix="team-")


# --- the namespaces the portal never takes as a team's ---


def live(labels=None):
    return {"metadata": {"name": "x", "labels": labels or {}}}


OURS = {"app.kubernetes.io/managed-by": "gpu-portal", "gpu-portal.io/team": "vision"}


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("default", "a Kubernetes system namespace"),
        ("kube-system", "a Kubernetes system namespace"),
        ("kube-public", "a Kubernetes system namespace"),
        ("kube-node-lease", "a Kubernetes system namespace"),
        ("kube-anything-new", "a Kubernetes system namespace"),
        ("portal", "the portal's own namespace"),
    ],
)
def test_system_namespaces_and_the_portals_own_are_reserved(settings, name, why):
    settings.PORTAL_OWN_NAMESPACE = "portal"
    assert why in reserved(name)


@pytest.mark.parametrize("name", ["vision", "kube", "kubeflow", "team-default", "defaults"])
def test_other_names_are_not_reserved(settings, name):
    settings.PORTAL_OWN_NAMESPACE = "portal"
    assert reserved(name) == ""


def test_the_portals_own_namespace_is_the_one_it_runs_in(settings):
    settings.PORTAL_OWN_NAMESPACE = "gpu-system"
    assert "the portal's own" in reserved("gpu-system")
    assert reserved("portal") == ""


def test_a_namespace_is_the_teams_only_with_both_of_the_portals_labels():
    assert owned(live(OURS), "vision")
    assert not owned(live(), "vision")
    assert not owned(live({"app.kubernetes.io/managed-by": "gpu-portal"}), "vision")
    assert not owned(live({**OURS, "gpu-portal.io/team": "nlp"}), "vision")
    assert not owned(live({**OURS, "app.kubernetes.io/managed-by": "helm"}), "vision")
    assert not owned({"metadata": {"name": "vision"}}, "vision")  # no labels at all


def test_the_refusal_names_the_namespace_and_says_what_to_do():
    assert refusal("vision", None) == ""  # none yet: the portal makes it
    assert refusal("vision", live(OURS)) == ""  # the portal's for the team
    why = refusal("vision", live({"owner": "someone-else"}))
    assert why.startswith("Namespace vision already exists and the portal did not make it")
    assert "app.kubernetes.io/managed-by=gpu-portal and gpu-portal.io/team=vision" in why
    # A system namespace is refused whatever its labels say.
    assert "never uses namespace default" in refusal("default", live(OURS))


@pytest.mark.parametrize(
    ("prefix", "slug", "namespace"),
    [
        ("", "default", "default"),
        ("", "kube-system", "kube-system"),
        ("kub", "e-public", "kube-public"),  # the rule is on the namespace, not the slug
        ("k", "ube-flannel", "kube-flannel"),
        ("", "portal", "portal"),
    ],
)
def test_a_slug_whose_namespace_is_reserved_is_refused_naming_the_slug(
    settings, prefix, slug, namespace
):
    settings.PORTAL_NAMESPACE_PREFIX = prefix
    settings.PORTAL_OWN_NAMESPACE = "portal"
    with pytest.raises(ValidationError) as raised:
        namespaces.check_slug(slug)
    (message,) = raised.value.message_dict["slug"]
    assert message.startswith(f"The portal never uses namespace {namespace}:")


@pytest.mark.parametrize("slug", ["default", "kube-system", "portal"])
def test_with_a_prefix_those_slugs_are_ordinary_namespaces(settings, slug):
    settings.PORTAL_NAMESPACE_PREFIX = "team-"
    settings.PORTAL_OWN_NAMESPACE = "portal"
    namespaces.check_slug(slug)  # team-default, team-kube-system, team-portal


def test_the_apps_above_are_asked_about_the_live_namespace(monkeypatch):
    asked = []

    def check(slug, name):
        asked.append((slug, name))
        return "it is someone else's" if slug == "taken" else ""

    monkeypatch.setattr(hooks, "_namespace_refusals", [check])
    namespaces.check_slug("free")
    with pytest.raises(ValidationError) as raised:
        namespaces.check_slug("taken")
    assert raised.value.message_dict == {"slug": ["it is someone else's"]}
    assert asked == [("free", "free"), ("taken", "taken")]
    # A reserved one is refused without asking (no API call).
    with pytest.raises(ValidationError):
        namespaces.check_slug("kube-system")
    assert len(asked) == 2
