"""The idle notice on a workload's report card, and its "Bring it back" button."""

from datetime import timedelta

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from cluster import clock
from idle import actions, workloads
from idle.models import MAX_EXEMPTION, IdleState, Mode
from teams import access, errors, inputs


def workload_panel(team, namespace, kind, name, user):
    """hooks.on_workload_panel: the banner of a workload announced idle or scaled to
    zero (two or three queries: its state, the policies, the viewer's role), else
    nothing."""
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
    return "idle/_banner.html", {
        "state": state,
        "scaled": scaled,
        "report_only": report_only,
        "can_exempt": access.can_manage(user, team),
    }


def team_panel(team):
    """hooks.on_team_panel: the team's workloads the portal scaled to zero and
    nobody has brought back, when and why (one query), else nothing."""
    states = list(
        IdleState.objects.filter(team=team, kind__in=workloads.SCALABLE)
        .exclude(acted_at=None)
        .select_related("flavor")
        .order_by("-acted_at", "name")
    )
    if not states:
        return None
    return "idle/_scaled_panel.html", {
        "team": team,
        "states": states,
        "threshold": settings.PORTAL_BILLING_IDLE_THRESHOLD * 100,
    }


def _state_and_card(user, pk):
    """The idle state among the user's teams' (else 404), and its report card's URL args."""
    teams = access.teams_for(user)
    state = IdleState.objects.filter(pk=pk, team__in=teams).select_related("team").first()
    if state is None:
        raise Http404("No such idle workload among your teams'.")
    return state, ("billing_workload", state.team.slug, state.namespace, state.kind, state.name)


@login_required
@require_POST
def bring_back(request, pk):
    """Without JavaScript: back to the report card with a message. With htmx: the
    banner (#idle-banner) replaced by what happened."""
    state, card = _state_and_card(request.user, pk)
    try:
        replicas = actions.bring_back(state, by=request.user)
    except errors.NotAllowed as exc:
        raise PermissionDenied(str(exc)) from None
    except errors.ActionError as exc:  # the cluster's errors too (actions.bring_back)
        level, text = messages.ERROR, f"Not brought back: {exc}"
    else:
        level = messages.SUCCESS
        if replicas is None:
            text = f"{state.kind} {state.name} had been scaled up by its owner."
        else:
            text = f"{state.kind} {state.name} is back: {replicas} replica(s)."
    if request.htmx:
        context = {"error": level == messages.ERROR, "text": text}
        return render(request, "idle/_brought_back.html", context)
    messages.add_message(request, level, text)
    return redirect(*card)


# The form asks whole hours, up to the one cap (idle.models.MAX_EXEMPTION).
MAX_EXEMPT_HOURS = int(MAX_EXEMPTION.total_seconds()) // 3600


@login_required
@require_POST
def exempt(request, pk):
    """A team manager exempts the workload of an idle state for N hours, with a reason."""
    state, card = _state_and_card(request.user, pk)
    hours = inputs.whole_number(request.POST.get("hours", ""), minimum=1, maximum=MAX_EXEMPT_HOURS)
    reason = request.POST.get("reason", "")
    if hours is None:
        messages.error(request, f"Not exempted: give whole hours from 1 to {MAX_EXEMPT_HOURS}.")
        return redirect(*card)
    try:
        actions.exempt(
            state.team,
            namespace=state.namespace,
            kind=state.kind,
            name=state.name,
            until=clock.now() + timedelta(hours=hours),
            reason=reason,
            by=request.user,
        )
    except errors.NotAllowed as exc:
        raise PermissionDenied(str(exc)) from None
    except ValidationError as exc:
        messages.error(request, "Not exempted: " + " ".join(exc.messages))
        return redirect(*card)
    messages.success(request, f"{state.kind} {state.name} is exempt for {hours} hour(s).")
    return redirect(*card)
