"""The idle notice on a workload's report card, and its "Bring it back" button; the
idle policies page (admins set any, a team's managers their team's, stricter
only) and the team page's panel of the policies that apply to the team."""

from datetime import timedelta

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from cluster import clock
from idle import actions, workloads
from idle.forms import PolicyForm, manageable_teams
from idle.models import MAX_EXEMPTION, IdleState, Mode, applying_to, visible_policies
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


def scaled_panel(team):
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


def policies_panel(team):
    """hooks.on_team_panel: the idle policies that apply to the team, per flavor, and
    what is in force of them. One query."""
    return "idle/_team_policies.html", {"team": team, "applying": applying_to(team)}


@login_required
def policies(request):
    """Every idle policy the viewer reads; with `?team=`, those that apply to that
    team and what is in force. POST sets one (the form), a bad value or one looser
    than the flavor's is a form error (400)."""
    team = None
    if slug := request.GET.get("team"):
        team = get_object_or_404(access.teams_for(request.user), slug=slug)
    bound = request.POST if request.method == "POST" else None
    form = PolicyForm(request.user, bound, team=team)
    status = 200
    if request.method == "POST":
        if not form.fields["team"].choices:
            raise PermissionDenied("Only platform admins and team managers set idle policies.")
        if form.is_valid() and _set_policy(request, form):
            chosen = form.cleaned_data["team"]
            url = reverse("idle_policies")
            return redirect(f"{url}?team={chosen.slug}" if chosen else url)
        status = 400
    context = {
        "team": team,
        "policies": visible_policies(request.user)
        .select_related("updated_by")
        .order_by("flavor__name", "team__name"),
        "applying": applying_to(team) if team is not None else None,
        "form": form if form.fields["team"].choices else None,
        "managed": {t.pk for t in manageable_teams(request.user)},
        "admin": access.can_review(request.user),
    }
    return render(request, "idle/policies.html", context, status=status)


def _set_policy(request, form):
    """Set the form's policy; False with the form's errors when it is refused."""
    data = form.cleaned_data
    try:
        policy = actions.set_policy(
            data["flavor"],
            data["team"],
            by=request.user,
            **{field: data[field] for field in actions.FIELDS},
        )
    except errors.NotAllowed as exc:
        form.add_error("team", str(exc))
        return False
    except ValidationError as exc:
        for field, problems in exc.message_dict.items():
            form.add_error(field if field in form.fields else None, problems)
        return False
    messages.success(request, f"Idle policy set: {policy}.")
    return True


@login_required
@require_POST
def remove_policy(request, pk):
    policy = get_object_or_404(visible_policies(request.user), pk=pk)
    try:
        actions.remove_policy(policy, by=request.user)
    except errors.NotAllowed as exc:
        raise PermissionDenied(str(exc)) from None
    except errors.IllegalTransition as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Idle policy removed: {policy}.")
    url = reverse("idle_policies")
    return redirect(f"{url}?team={policy.team.slug}" if policy.team_id else url)
