"""Admin pages for the cluster side: sync status, inventory, GPU nodes, and the
two team-level actions (archive, delete namespace), each behind a confirm page."""

from collections import defaultdict
from datetime import timedelta

import yaml
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone

from cluster import kube
from cluster.models import Cluster, Flavor, GpuNode, NamespaceQuota, shared_resource_names
from gpu_requests import capacity
from gpu_requests.models import QuotaRequest
from provisioning import actions, manifests
from provisioning.desired import desired_state
from provisioning.models import TeamSync
from teams import access, errors, hooks
from teams import actions as team_actions
from teams.forms import ReasonForm
from teams.models import SyncStatus, Team
from teams.namespaces import namespace_of


def _require_reviewer(user):
    if not access.can_review(user):
        raise PermissionDenied("Only platform admins can see the cluster.")


@login_required
def cluster_overview(request):
    """Every cluster's state, every team's sync status and quota, per flavor the three
    numbers easy to confuse (capacity, reserved by quota now, allocated by running
    pods), and the GPU nodes. Seven queries (and one per registered reservation source), and what
    the registered panels cost (billing's node pools: three queries and three
    Prometheus queries)."""
    _require_reviewer(request.user)
    now = timezone.now()
    teams = list(Team.objects.select_related("sync").order_by("name"))
    flavors = list(Flavor.objects.select_related("inventory", "cluster").order_by("name"))
    clusters = list(Cluster.objects.all())
    reserved = defaultdict(int)
    team_reserved = defaultdict(lambda: defaultdict(int))
    held = capacity.all_reservations([f.pk for f in flavors], now, now + timedelta(seconds=1))
    for reservation in held:
        if reservation.covers(now):
            reserved[reservation.flavor_id] += reservation.gpus
            if reservation.team_id is not None:
                team_reserved[reservation.team_id][reservation.flavor_id] += reservation.gpus
    cluster_quota = defaultdict(list)
    for row in NamespaceQuota.objects.all():
        cluster_quota[row.team_id].append(row)
    names = {flavor.pk: flavor.name for flavor in flavors}
    for flavor in flavors:
        flavor.reserved_now = reserved[flavor.pk]
    for team in teams:
        team.reserved_now = sorted(
            (names[flavor_id], gpus) for flavor_id, gpus in team_reserved[team.pk].items()
        )
        team.cluster_quota = cluster_quota[team.pk]
    context = {
        "teams": teams,
        "failing": [t for t in teams if t.sync_status == SyncStatus.FAILING],
        "flavors": flavors,
        "clusters": clusters,
        "several_clusters": len(clusters) > 1,
        "nodes": GpuNode.objects.select_related("cluster"),
        "shared": shared_resource_names([f for f in flavors if f.is_active]),
        "now": now,
        "panels": hooks.cluster_panels(now),
    }
    return render(request, "provisioning/cluster.html", context)


@login_required
def team_archive(request, slug):
    _require_reviewer(request.user)
    team = get_object_or_404(Team, slug=slug)
    form = ReasonForm(request.POST or {"reason": "Team archived"})
    if request.method == "POST" and form.is_valid():
        try:
            team_actions.archive_team(
                team, by=request.user, reason=form.cleaned_data["reason"] or ""
            )
        except errors.ActionError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, f"{team.name} is archived; its quota is now zero.")
        return redirect("cluster_overview")
    context = {"team": team, "namespace": desired_state(team.pk).namespace, "form": form}
    status = 400 if request.method == "POST" else 200
    return render(request, "provisioning/confirm_archive.html", context, status=status)


@login_required
def team_delete_namespace(request, slug):
    _require_reviewer(request.user)
    team = get_object_or_404(Team, slug=slug)
    namespace = desired_state(team.pk).namespace
    sync = TeamSync.objects.filter(team=team).first()
    error = None
    if request.method == "POST":
        if request.POST.get("confirm") != namespace:
            error = f"Type {namespace} to confirm."
        else:
            try:
                actions.delete_namespace(team, by=request.user)
            except (errors.ActionError, kube.ClusterError) as exc:
                error = str(exc)
            else:
                messages.success(request, f"Namespace {namespace} is being deleted.")
                return redirect("cluster_overview")
    context = {"team": team, "namespace": namespace, "sync": sync, "error": error}
    status = 400 if error else 200
    return render(request, "provisioning/confirm_delete_namespace.html", context, status=status)


def _yaml(obj):
    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False)


def _example(namespace, flavor):
    """The example's YAML: a Job, or for a DRA flavor its claim template and a Job."""
    if flavor.is_dra:
        objects = manifests.example_dra_job(
            namespace=namespace,
            flavor_slug=flavor.slug,
            device_class=flavor.device_class,
            device_selector=flavor.device_selector,
            tolerations=flavor.tolerations,
        )
        return yaml.safe_dump_all(objects, sort_keys=False, default_flow_style=False)
    return _yaml(
        manifests.example_job(
            namespace=namespace,
            flavor_slug=flavor.slug,
            resource_name=flavor.resource_name,
            node_selector=flavor.node_selector,
            tolerations=flavor.tolerations,
        )
    )


def namespace_panel(team):
    """The team page's "How to use your namespace": its name, a kubeconfig for the
    cluster's OIDC setup, and an example Job for each flavor the team holds now.
    One query (the flavors of its active quota)."""
    namespace = namespace_of(team.slug)
    flavors = (
        Flavor.objects.filter(
            quota_requests__team=team, quota_requests__status=QuotaRequest.Status.ACTIVE
        )
        .distinct()
        .order_by("name")
    )
    examples = [(flavor, _example(namespace, flavor)) for flavor in flavors]
    kubeconfig = None
    if settings.PORTAL_CLUSTER_API_URL:
        kubeconfig = _yaml(
            manifests.user_kubeconfig(
                cluster_name=settings.PORTAL_CLUSTER_NAME,
                server=settings.PORTAL_CLUSTER_API_URL,
                ca_data=settings.PORTAL_CLUSTER_CA_DATA,
                issuer=settings.PORTAL_CLUSTER_OIDC_ISSUER,
                client_id=settings.PORTAL_CLUSTER_OIDC_CLIENT_ID,
                scopes=settings.PORTAL_CLUSTER_OIDC_SCOPES,
                namespace=namespace,
            )
        )
    context = {"team": team, "namespace": namespace, "kubeconfig": kubeconfig, "examples": examples}
    return "provisioning/_namespace_panel.html", context
