"""Team pages: members and roles for the team's managers, team creation for admins.

Each change is an action (`actions.add_member`, `remove_member`, `set_role`,
`create_team`) with an audit event; member changes re-sync the team's
RoleBinding through `hooks.members_changed`.
"""

from zoneinfo import available_timezones

from django import forms
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.db.models import Q
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from gpu_requests import timezones
from gpu_requests.models import QuotaRequest
from teams import access, actions, errors, hooks, namespaces
from teams.inputs import validate_one_line
from teams.models import AuditEvent, Membership, Team, dns1123_label
from teams.namespaces import namespace_of

HISTORY_PAGE_SIZE = 25


class MemberForm(forms.Form):
    who = forms.CharField(
        label="User name or e-mail",
        max_length=254,
        help_text="People who sign in with single sign-on appear after their first login.",
    )
    role = forms.ChoiceField(label="Role", choices=Membership.Role.choices)

    def clean_who(self):
        who = self.cleaned_data["who"].strip()
        if "\x00" in who:
            raise ValidationError("Contains a NUL character.")
        users = get_user_model().objects.filter(
            Q(username=who) | Q(email__iexact=who), is_active=True
        )[:2]
        if len(users) != 1:
            raise ValidationError(
                f"No single active user is called or mailed “{who}”; people who sign in with "
                "single sign-on appear after their first login."
            )
        return users[0]


class RoleForm(forms.Form):
    role = forms.ChoiceField(label="Role", choices=Membership.Role.choices)


class TeamForm(forms.Form):
    name = forms.CharField(label="Name", max_length=100, validators=[validate_one_line])
    slug = forms.CharField(
        label="Short name",
        max_length=63,
        validators=[dns1123_label],
        help_text="Lowercase letters, digits and '-': it names the team's Kubernetes namespace.",
    )

    def clean(self):
        cleaned = super().clean()
        slug, name = cleaned.get("slug"), cleaned.get("name")
        if slug and Team.objects.filter(slug=slug).exists():
            self.add_error("slug", "Another team has this short name.")
        elif slug:
            # Said before the confirmation: a namespace the portal may not take (too
            # long with the prefix, a system one, one it did not make). An API call.
            try:
                namespaces.check_slug(slug)
            except ValidationError as exc:
                self.add_error(None, exc)
        if name and Team.objects.filter(name=name).exists():
            self.add_error("name", "Another team has this name.")
        return cleaned


def _team_for(user, slug):
    """The team if `user` is in it or reviews, else 404."""
    teams = access.teams_for(user)
    return get_object_or_404(teams, slug=slug)


@login_required
def team_page(request, slug):
    team = _team_for(request.user, slug)
    return render(request, "gpu_requests/team.html", _team_context(request, team, MemberForm()))


def _team_context(request, team, form):
    """Members, the add form and a page of the team's audit history. Five queries."""
    can_manage = access.can_manage(request.user, team)
    history = Paginator(
        AuditEvent.objects.filter(team=team).select_related("actor").order_by("-created_at", "-pk"),
        HISTORY_PAGE_SIZE,
    ).get_page(request.GET.get("page"))
    return {
        "team": team,
        "members": team.memberships.select_related("user").order_by("user__username"),
        "manage": can_manage and not team.is_archived,
        "can_manage": can_manage,
        "form": form,
        "roles": Membership.Role.choices,
        "page": history,
        # An event about a request links to it (the type is cached after the first read).
        "request_type": ContentType.objects.get_for_model(QuotaRequest),
        "panels": hooks.team_panels(team),
    }


def _manage(request, slug):
    team = _team_for(request.user, slug)
    if not access.can_manage(request.user, team):
        raise PermissionDenied(f"Only {team.name}'s managers and platform admins manage it.")
    return team


def _run(request, team, change, done):
    try:
        change()
    except errors.NotAllowed as exc:
        raise PermissionDenied(str(exc)) from None
    except errors.ActionError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, done)
    return redirect("team_page", slug=team.slug)


@require_POST
@login_required
def member_add(request, slug):
    team = _manage(request, slug)
    form = MemberForm(request.POST)
    if not form.is_valid():
        context = _team_context(request, team, form)
        return render(request, "gpu_requests/team.html", context, status=400)
    user, role = form.cleaned_data["who"], Membership.Role(form.cleaned_data["role"])
    return _run(
        request,
        team,
        lambda: actions.add_member(team, user, role=role, by=request.user),
        f"{user.username} added to {team.name} as {role.label.lower()}.",
    )


@require_POST
@login_required
def member_role(request, slug, user_id):
    team = _manage(request, slug)
    member = get_object_or_404(team.memberships.select_related("user"), user_id=user_id)
    form = RoleForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose a role.")
        return redirect("team_page", slug=team.slug)
    role = Membership.Role(form.cleaned_data["role"])
    return _run(
        request,
        team,
        lambda: actions.set_role(team, member.user, role, by=request.user),
        f"{member.user.username} is now {role.label.lower()}.",
    )


@login_required
def member_remove(request, slug, user_id):
    """GET: the confirmation page (the same for every destructive action); POST: remove."""
    team = _manage(request, slug)
    member = get_object_or_404(team.memberships.select_related("user"), user_id=user_id)
    if request.method != "POST":
        return render(
            request,
            "confirm.html",
            {
                "title": f"Remove {member.user.username} from {team.name}?",
                "explanation": f"They lose access to the team's requests and its namespace "
                f"{team.namespace} (the RoleBinding is re-synced).",
                "button": "Remove member",
                "back": reverse("team_page", args=[team.slug]),
            },
        )
    return _run(
        request,
        team,
        lambda: actions.remove_member(team, member.user, by=request.user),
        f"{member.user.username} removed from {team.name}.",
    )


@login_required
def team_new(request):
    """Admins create a team: the form, then the namespace it gets, then confirm."""
    if not access.can_review(request.user):
        raise PermissionDenied("Only platform admins can create teams.")
    form = TeamForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        if request.POST.get("confirmed") != "yes":
            context = {"form": form, "namespace": namespace_of(data["slug"]), "confirm": True}
            return render(request, "gpu_requests/team_new.html", context)
        try:
            team = actions.create_team(name=data["name"], slug=data["slug"], by=request.user)
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(request, f"{team.name} created; add its members below.")
            return redirect("team_page", slug=team.slug)
    return render(request, "gpu_requests/team_new.html", {"form": form})


def _zone_choices():
    return [(name, name) for name in sorted(available_timezones()) if "/" in name or name == "UTC"]


class PreferencesForm(forms.Form):
    time_zone = forms.ChoiceField(label="Time zone", choices=_zone_choices)


@login_required
def preferences(request):
    """The user's time zone. The browser's is posted here on the first visit (no reply
    needed); the form sets another."""
    form = PreferencesForm(
        request.POST or None, initial={"time_zone": timezone.get_current_timezone_name()}
    )
    if request.method == "POST" and form.is_valid():
        timezones.remember(request, form.cleaned_data["time_zone"])
        if request.headers.get("X-Requested-With") == "fetch":
            return HttpResponse(status=204)
        messages.success(request, f"Times are now shown in {form.cleaned_data['time_zone']}.")
        return redirect("preferences")
    status = 400 if form.errors else 200
    return render(request, "gpu_requests/preferences.html", {"form": form}, status=status)
