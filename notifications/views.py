"""The webhook pages: a team's (its managers) and the admins' (with every delivery).

One set of views serves both; `slug` None is the admins' hook. The secret is
shown in full once, in the response to the change that made it (never in a
message or session), and only as a hint after that.
"""

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpResponseRedirect
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from notifications import actions
from notifications.models import Delivery
from teams import access, errors, inputs

PAGE_SIZE = 25


class WebhookForm(forms.Form):
    # The URL's checks are the action's (outbound.check_url, one DNS lookup): its
    # ValidationError comes back as this field's error.
    url = forms.CharField(
        label="Webhook URL",
        strip=True,
        help_text="An https URL that takes a JSON POST, e.g. a Slack incoming webhook. "
        "Requests are signed: see “Verifying requests” below.",
        # A text input (not type=url): the server's checks speak, not the browser's.
        widget=forms.TextInput(
            attrs={
                "placeholder": "https://hooks.slack.com/services/…",
                "inputmode": "url",
                "spellcheck": "false",
                "autocomplete": "off",
            }
        ),
    )


def _scope(request, slug):
    """The team (None: the admins' hook) if the user may set its hook; 404 for other
    teams' pages, 403 for members who are not managers."""
    if slug is None:
        if not access.can_review(request.user):
            raise PermissionDenied("Only platform admins see the admins' webhook.")
        return None
    team = get_object_or_404(access.teams_for(request.user), slug=slug)
    if not access.can_manage(request.user, team):
        raise PermissionDenied(f"Only {team.name}'s managers and platform admins set its webhook.")
    return team


def _page_url(team):
    return reverse("team_webhook", args=[team.slug]) if team else reverse("admin_webhooks")


def _urls(team):
    prefix, args = ("team", [team.slug]) if team else ("admin", [])
    urls = {name: reverse(f"{prefix}_webhook_{name}", args=args) for name in ACTIONS}
    return urls | {"page": _page_url(team)}


ACTIONS = ("test", "secret", "remove")


def _render(request, team, form, *, secret=None, status=200):
    hook = actions.hook_of(team)
    if team is None:
        log = Delivery.objects.order_by("-created_at", "-pk")
    else:
        log = actions.for_team(team)
    page = Paginator(log.select_related("webhook__team"), PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    context = {
        "team": team,
        "hook": hook,
        "form": form,
        "secret": secret,
        "page": page,
        "urls": _urls(team),
        "archived": team is not None and team.is_archived,
        "max_attempts": settings.PORTAL_WEBHOOK_MAX_ATTEMPTS,
    }
    return render(request, "notifications/webhook.html", context, status=status)


@login_required
def webhook_page(request, slug=None):
    team = _scope(request, slug)
    if request.method != "POST":
        hook = actions.hook_of(team)
        return _render(request, team, WebhookForm(initial={"url": hook.url if hook else ""}))
    form = WebhookForm(request.POST)
    if not form.is_valid():
        return _render(request, team, form, status=400)
    try:
        hook, secret = actions.set_webhook(team, form.cleaned_data["url"], by=request.user)
    except ValidationError as exc:
        form.add_error("url", exc)
        return _render(request, team, form, status=400)
    except errors.NotAllowed as exc:
        raise PermissionDenied(str(exc)) from None
    except errors.ActionError as exc:
        messages.error(request, str(exc))
        return redirect(_page_url(team))
    if secret is None:
        messages.success(request, "Webhook URL saved; its secret stays the same.")
        return redirect(_page_url(team))
    messages.success(request, "Webhook saved. Copy its secret now: it is not shown again.")
    return _render(request, team, WebhookForm(initial={"url": hook.url}), secret=secret)


def _attempt(request, change):
    """The action's result, or None when it is refused as things stand (said in a message)."""
    try:
        return change()
    except errors.NotAllowed as exc:
        raise PermissionDenied(str(exc)) from None
    except errors.ActionError as exc:
        messages.error(request, str(exc))
        return None


@require_POST
@login_required
def webhook_test(request, slug=None):
    team = _scope(request, slug)
    if _attempt(request, lambda: actions.send_test(team, by=request.user)):
        messages.success(request, "Test notification queued; its delivery shows below.")
    return redirect(_page_url(team))


@require_POST
@login_required
def webhook_secret(request, slug=None):
    team = _scope(request, slug)
    secret = _attempt(request, lambda: actions.rotate_secret(team, by=request.user))
    if secret is None:
        return redirect(_page_url(team))
    messages.success(request, "New secret made; the old one no longer signs. Copy it now.")
    hook = actions.hook_of(team)
    return _render(request, team, WebhookForm(initial={"url": hook.url}), secret=secret)


@login_required
def webhook_remove(request, slug=None):
    """GET: the confirmation page; POST: remove the hook and its log."""
    team = _scope(request, slug)
    if request.method != "POST":
        return render(
            request,
            "confirm.html",
            {
                "title": "Remove the webhook?",
                "explanation": "Notices stop going to it, and its delivery log is deleted "
                "(the audit history keeps that it was removed).",
                "button": "Remove webhook",
                "back": _page_url(team),
            },
        )
    if _attempt(request, lambda: actions.remove_webhook(team, by=request.user)):
        messages.success(request, "Webhook removed.")
    return redirect(_page_url(team))


@require_POST
@login_required
def delivery_resend(request, pk):
    """Send a failed delivery again; back to the page it was asked from."""
    delivery = get_object_or_404(Delivery.objects.select_related("webhook__team"), pk=pk)
    team = delivery.webhook.team
    if team is not None and not access.can_see(request.user, team):
        raise Http404("No such delivery.")
    if _attempt(request, lambda: actions.redeliver(delivery, by=request.user)):
        messages.success(request, f"Delivery #{delivery.pk} queued again.")
    return HttpResponseRedirect(
        inputs.same_site_path(request, request.POST.get("next"), _page_url(team))
    )
