"""Which Kubernetes namespace is which team's: the one rule that provisioning
(which creates it), batch (which runs Jobs in it), billing, idle and the
inventory (which read pods and quotas back by it) share."""

from django.conf import settings

# A namespace name is an RFC 1123 label.
MAX_LENGTH = 63


def namespace_of(slug, prefix=None):
    """The namespace of the team with this slug: `prefix` (PORTAL_NAMESPACE_PREFIX
    unless given, as the pure manifest builders give it) and the slug. A slug is
    at most 63 characters, but with the prefix the name may not fit: ValueError."""
    name = f"{settings.PORTAL_NAMESPACE_PREFIX if prefix is None else prefix}{slug}"
    if len(name) > MAX_LENGTH:
        raise ValueError(f"The namespace {name} would be longer than {MAX_LENGTH} characters.")
    return name
