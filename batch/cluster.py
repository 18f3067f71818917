"""Where a team's batch Jobs live on the cluster."""

from django.conf import settings

from provisioning.manifests import namespace_name


def job_namespace(team):
    return namespace_name(team.slug, settings.PORTAL_NAMESPACE_PREFIX)
