"""Admin pages for the cluster side: sync status, inventory, GPU nodes, and the
two team-level actions (archive, delete namespace), each behind a confirm page."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone

from cluster import kube
from cluster.models import GpuNode
from gpu_requests import actions as quota_actions
from gpu_requests.models import Flavor, SyncStatus, Team, shared_resource_names
from provisioning import actions
from provisioning.desired import desired_state
from provisioning.models import TeamSync


def _require_reviewer(user):
    if not quota_actions.can_review(user):
        raise PermissionDenied("Only platform admins can see the cluster.")


@login_required
def cluster_overview(request):
    """Every team's sync status, the inventory per flavor and the GPU nodes. Four queries."""
    _require_reviewer(request.user)
    teams = Team.objects.select_related("sync").order_by("name")
    flavors = Flavor.objects.select_related("inventory").order_by("name")
    nodes = GpuNode.objects.all()
    shared = shared_resource_names([f for f in flavors if f.is_active])
    context = {
        "teams": teams,
        "failing": [t for t in teams if t.sync_status == SyncStatus.FAILING],
        "flavors": flavors,
        "nodes": nodes,
        "shared": shared,
        "now": timezone.now(),
    }
    return render(request, "provisioning/cluster.html", context)


@login_required
def team_archive(request, slug):
    _require_reviewer(request.user)
    team = get_object_or_404(Team, slug=slug)
    if request.method == "POST":
        try:
            quota_actions.archive_team(
                team, by=request.user, reason=request.POST.get("reason") or ""
            )
        except quota_actions.ActionError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, f"{team.name} is archived; its quota is now zero.")
        return redirect("cluster_overview")
    return render(
        request,
        "provisioning/confirm_archive.html",
        {"team": team, "namespace": desired_state(team.pk).namespace},
    )


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
            except (quota_actions.ActionError, kube.ClusterError) as exc:
                error = str(exc)
            else:
                messages.success(request, f"Namespace {namespace} is being deleted.")
                return redirect("cluster_overview")
    context = {"team": team, "namespace": namespace, "sync": sync, "error": error}
    status = 400 if error else 200
    return render(request, "provisioning/confirm_delete_namespace.html", context, status=status)
