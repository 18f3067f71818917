"""The idle notice on a workload's report card, and its "Bring it back" button."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from cluster import kube
from gpu_requests import actions as quota_actions
from idle import actions, workloads
from idle.models import IdleState, Mode


def workload_panel(team, namespace, kind, name):
    """hooks.on_workload_panel: the banner of a workload announced idle or scaled to
    zero (two queries: its state, the policies), else nothing."""
    state = (
        IdleState.objects.filter(team=team, namespace=namespace, kind=kind, name=name)
        .exclude(announced_at=None, acted_at=None)
        .select_related("flavor")
        .first()
    )
    if state is None:
        return None
    scaled = state.acted_at is not None and kind in workloads.SCALABLE
    policy = actions.policy_for(state.flavor_id, state.team_id)
    report_only = policy is None or policy.mode == Mode.REPORT
    return "idle/_banner.html", {"state": state, "scaled": scaled, "report_only": report_only}


@login_required
@require_POST
def bring_back(request, pk):
    teams = quota_actions.teams_for(request.user)
    state = IdleState.objects.filter(pk=pk, team__in=teams).select_related("team").first()
    if state is None:
        raise Http404("No such idle workload among your teams'.")
    card = ("billing_workload", state.team.slug, state.namespace, state.kind, state.name)
    try:
        replicas = actions.bring_back(state, by=request.user)
    except quota_actions.NotAllowed as exc:
        raise PermissionDenied(str(exc)) from None
    except (quota_actions.ActionError, kube.ClusterError, workloads.NotThere) as exc:
        messages.error(request, f"Not brought back: {exc}")
        return redirect(*card)
    if replicas is None:
        messages.success(request, f"{state.kind} {state.name} had been scaled up by its owner.")
    else:
        messages.success(request, f"{state.kind} {state.name} is back: {replicas} replica(s).")
    return redirect(*card)
