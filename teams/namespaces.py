"""Which Kubernetes namespace is which team's: the one rule that provisioning
(which creates it), batch (which runs Jobs in it), billing, idle and the
inventory (which read pods and quotas back by it) share.

And which namespaces the portal never takes as a team's (`refusal`): a
Kubernetes system namespace (`kube-*`, `default`), the portal's own
(PORTAL_OWN_NAMESPACE), and any namespace that exists without the labels the
portal puts on the namespaces it makes for a team (`owned`). Team creation
(form, admin, `teams.actions.create_team`: `check_slug`), the sync before its
first write (provisioning.actions) and the deletion of an archived team's
namespace all ask this one rule; the client refuses any write into a reserved
namespace (`reserved`, cluster.kube), and deploy/'s ValidatingAdmissionPolicy
has the API server refuse the portal's ServiceAccount the rest.
"""

import re

from django.conf import settings
from django.core.exceptions import ValidationError

from teams import hooks

# A namespace name is an RFC 1123 label.
MAX_LENGTH = 63
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")

# The labels on every namespace the portal made for a team (and every object in it).
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "gpu-portal"
TEAM_LABEL = "gpu-portal.io/team"

# Kubernetes' own: `default`, and `kube-system`, `kube-public`, `kube-node-lease`
# and whatever else the project adds under the prefix it reserves.
SYSTEM_NAMESPACES = frozenset({"default"})
SYSTEM_PREFIX = "kube-"


def namespace_of(slug, prefix=None):
    """The namespace of the team with this slug: `prefix` (PORTAL_NAMESPACE_PREFIX
    unless given, as the pure manifest builders give it) and the slug. A slug is
    at most 63 characters, but with the prefix the name may not fit: ValueError."""
    name = f"{settings.PORTAL_NAMESPACE_PREFIX if prefix is None else prefix}{slug}"
    if len(name) > MAX_LENGTH:
        raise ValueError(f"The namespace {name} would be longer than {MAX_LENGTH} characters.")
    return name


def reserved(name):
    """Why namespace `name` is never a team's whatever its labels say ("" if it may
    be): pure, no API call, so the client asks it before every write."""
    if name in SYSTEM_NAMESPACES or name.startswith(SYSTEM_PREFIX):
        return f"{name} is a Kubernetes system namespace"
    if name == settings.PORTAL_OWN_NAMESPACE:
        return f"{name} is the portal's own namespace"
    return ""


def owned(live, slug):
    """True if the live Namespace `live` carries the labels the portal gives the
    namespace it makes for team `slug`. Members cannot set them: the `edit` role
    they hold in their namespace grants nothing on the Namespace object."""
    labels = (live.get("metadata") or {}).get("labels") or {}
    return labels.get(MANAGED_BY_LABEL) == MANAGED_BY and labels.get(TEAM_LABEL) == slug


def refusal(slug, live, *, name=None):
    """Why the portal may not take namespace `name` (the team's, by default) as team
    `slug`'s, "" if it may. `live`: the Namespace as the API server has it, or None
    when there is none (the portal will create it)."""
    name = name or namespace_of(slug)
    if why := reserved(name):
        return f"The portal never uses namespace {name}: {why}."
    if live is not None and not owned(live, slug):
        return (
            f"Namespace {name} already exists and the portal did not make it for this team "
            f"(it lacks the labels {MANAGED_BY_LABEL}={MANAGED_BY} and {TEAM_LABEL}={slug}): "
            "the portal does not take over a namespace it did not make. Choose another short "
            "name, or have a cluster admin delete the namespace or label it so."
        )
    return ""


def check_slug(slug):
    """The slug of a new team (or a team's new slug), checked against the rule: its
    namespace fits in 63 characters, is not reserved, and is not a namespace that
    exists without being the portal's for it (asked of the apps above through
    `hooks.namespace_refusals`: one API call). ValidationError naming `slug`."""
    if not DNS1123_LABEL.match(slug):
        return  # the field's own validator says what is wrong with it
    try:
        name = namespace_of(slug)
    except ValueError as exc:  # the slug fits, but not with the prefix before it
        raise ValidationError({"slug": [str(exc)]}) from None
    problem = refusal(slug, None, name=name) or next(
        (why for why in hooks.namespace_refusals(slug, name) if why), ""
    )
    if problem:
        raise ValidationError({"slug": [problem]})
