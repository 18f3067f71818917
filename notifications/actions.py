"""Webhooks: setting them (each change an audit event) and delivering notices.

A notice (teams.notices.Notice) becomes one `Delivery` per hook that should
hear it (its team's and the admins') in the transaction of the change; the
deliveries are queued when it commits. Each delivery is an outbox row
(cluster/outbox.py): a worker claims it with a lease, POSTs it, and either
finishes it (delivered), gives up on it (a permanent refusal, or the last
attempt) or schedules the next attempt after an exponential backoff. The
sweep (beat) requeues deliveries whose message was lost.
"""

import json
import logging
import secrets
import time
from datetime import timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Q, Value
from django.utils import timezone
from django.utils.module_loading import import_string

from cluster.outbox import Outbox
from notifications import outbound
from notifications.models import Delivery, NotificationAction, Webhook
from teams import access, errors, inputs
from teams.models import AuditEvent
from teams.notices import Notice, absolute

log = logging.getLogger(__name__)

Status = Delivery.Status
# Slack shows at most this much of a section's text.
MAX_EXCERPT = 1000


def _lease():
    # Long enough for one POST, however slow the receiver.
    return settings.PORTAL_WEBHOOK_TIMEOUT + 30


deliveries = Outbox(Delivery, key="pk", task="notifications.tasks.deliver", lease=_lease)


# --- setting hooks ---


def _require(user, team):
    # A team's managers (and admins) set its hook; only admins the admins' (team None).
    if not access.can_manage(user, team):
        whose = "platform admins" if team is None else f"{team.name}'s managers and admins"
        raise errors.NotAllowed(f"Only {whose} set this webhook.")
    if team is not None and team.is_archived:
        raise errors.IllegalTransition(f"{team.name} is archived.")


def new_secret():
    return "whsec_" + secrets.token_urlsafe(32)


def hook_of(team):
    """The team's hook, or with team None the admins'; None if there is none."""
    return Webhook.objects.filter(team=team).first()


@transaction.atomic
def set_webhook(team, url, *, by):
    """Point the team's (or with None, the admins') hook at `url`: (hook, secret) where
    secret is the new secret of a new hook (show it once), or None if it kept its own."""
    _require(by, team)
    outbound.check_url(url)
    hook = Webhook.objects.select_for_update().filter(team=team).first()
    secret = None
    if hook is None:
        secret = new_secret()
        try:
            with transaction.atomic():
                hook = Webhook.objects.create(team=team, url=url, secret=secret, created_by=by)
        except IntegrityError:
            # Two first saves at once: neither found a row to lock, and the unique
            # constraint refused this INSERT once the other's committed. Its row is
            # there now: this save changes it, as if it had come second.
            hook = Webhook.objects.select_for_update().get(team=team)
            secret = None
    if secret is None:
        Webhook.objects.filter(pk=hook.pk).update(url=url, updated_at=timezone.now())
        hook.url = url
    _record(team, NotificationAction.WEBHOOK_SET, by=by, hook=hook, url=url)
    return hook, secret


@transaction.atomic
def rotate_secret(team, *, by):
    """A new secret for the hook (the old one stops signing at once); the new one."""
    _require(by, team)
    hook = Webhook.objects.select_for_update().filter(team=team).first()
    if hook is None:
        raise errors.IllegalTransition("There is no webhook to change the secret of.")
    secret = new_secret()
    Webhook.objects.filter(pk=hook.pk).update(secret=secret, updated_at=timezone.now())
    _record(team, NotificationAction.WEBHOOK_SECRET, by=by, hook=hook, url=hook.url)
    return secret


@transaction.atomic
def remove_webhook(team, *, by):
    """Delete the hook and its delivery log (the audit trail keeps that it existed);
    the URL it had."""
    _require(by, team)
    hook = Webhook.objects.select_for_update().filter(team=team).first()
    if hook is None:
        raise errors.IllegalTransition("There is no webhook to remove.")
    _record(team, NotificationAction.WEBHOOK_REMOVE, by=by, hook=None, url=hook.url)
    hook.delete()
    return hook.url


def _record(team, action, *, by, hook, url):
    # Every member reads the team's history, and a hook's URL is often a credential
    # itself (Slack's are): the history names only its host.
    host = urlsplit(url).hostname or "?"
    AuditEvent.record(
        team_id=team.pk if team else None,
        action=action,
        actor=by,
        subject=hook,
        reason=f"to {host}",
    )


@transaction.atomic
def send_test(team, *, by):
    """A test notice to this one hook, to see it arrive (and its signature verify)."""
    _require(by, team)
    hook = hook_of(team)
    if hook is None:
        raise errors.IllegalTransition("Set the webhook's URL first.")
    where = team.name if team else "the platform admins"
    notice = Notice(
        event="webhook_test",
        team_id=team.pk if team else None,
        title=f"Test notification for {where}, sent by {by.username}",
        url=absolute(""),
        data={"by": by.username},
    )
    return _create([(hook, notice)])[0]


# --- notices to deliveries ---


def _mrkdwn(text):
    """Slack's escaping: only these three are special in its text. Invisible format
    characters (a direction override, a zero-width space) are written out as
    [U+XXXX] (`inputs.shown`): a message reads as what it is."""
    text = inputs.shown(text)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _excerpt(text):
    return text if len(text) <= MAX_EXCERPT else text[: MAX_EXCERPT - 1] + "…"


def payload(notice):
    """The Slack-compatible JSON body: `text` for notifications and plain receivers,
    `blocks` for the message, and `metadata` (Slack's message metadata) for machines."""
    link = f"<{notice.url}|{_mrkdwn(notice.title)}>"
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": f"*{link}*"}}]
    if notice.facts:
        fields = [
            {"type": "mrkdwn", "text": f"*{_mrkdwn(label)}*\n{_mrkdwn(str(value))}"}
            for label, value in notice.facts[:10]
        ]
        blocks.append({"type": "section", "fields": fields})
    if notice.text:
        quoted = "\n".join(f">{line}" for line in _mrkdwn(_excerpt(notice.text)).splitlines())
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": quoted}})
    when = f"{notice.at:%Y-%m-%d %H:%M} UTC"
    blocks.append(
        {"type": "context", "elements": [{"type": "mrkdwn", "text": f"{notice.event} · {when}"}]}
    )
    body = {
        # Slack reads `text` as mrkdwn too: a title's "<!channel>" would ping everyone.
        "text": f"{_mrkdwn(notice.title)}: {notice.url}",
        "blocks": blocks,
        "metadata": {
            "event_type": notice.event,
            # Slack's metadata takes strings, numbers and booleans: no nulls.
            "event_payload": {
                key: value
                for key, value in {
                    **notice.data,
                    "team_id": notice.team_id,
                    "url": notice.url,
                    "at": notice.at.isoformat(),
                }.items()
                if value is not None
            },
        },
    }
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def _create(pairs):
    """A pending delivery for each (hook, notice) (one INSERT), queued on commit."""
    if not pairs:
        return []
    now = timezone.now()
    bodies = {}  # one rendering per notice, however many hooks
    created = Delivery.objects.bulk_create(
        Delivery(
            webhook=hook,
            event=notice.event,
            body=bodies.setdefault(id(notice), payload(notice)),
            next_attempt_at=now,
        )
        for hook, notice in pairs
    )
    _send_on_commit([delivery.pk for delivery in created])
    return created


# The task that queues a change's deliveries, named by its path (tasks sits above).
ENQUEUE_TASK = "notifications.tasks.enqueue"


def _send_on_commit(keys):
    """After the commit, one message for all of them, which a worker queues a message
    each (`deliveries.enqueue`): the request that made them neither writes their
    `queued_at` nor sends a message per hook. Until then `queued_at` is empty, so a
    message lost (with the process, or a broker that is down: logged) leaves them to
    the next sweep; a sweep meanwhile sends them too, and the claim lets one message
    do the work."""
    if not keys:
        return
    send = import_string(ENQUEUE_TASK)  # now: a wrong path raises, not logged after commit
    transaction.on_commit(lambda: send.apply_async((keys,), retry=False), robust=True)


def _hearing(team_ids):
    """The hooks that hear notices of these teams: the admins', and each team's own
    unless the team is archived."""
    return Q(team__isnull=True) | Q(team_id__in=team_ids, team__archived_at__isnull=True)


def notice_posted(notice):
    """hooks.on_notice: a delivery to the team's hook and the admins', made by one
    INSERT ... SELECT over the hooks that hear it (one query, with hooks or none)."""
    now = timezone.now()
    template = Delivery(event=notice.event, body=payload(notice), next_attempt_at=now)
    fields = [
        field
        for field in Delivery._meta.concrete_fields
        if not field.primary_key and field.name != "webhook"
    ]
    # Every column of the new rows as the model would write it (defaults, auto_now_add),
    # beside each hook's id.
    hooks = (
        Webhook.objects.filter(_hearing([notice.team_id]))
        .annotate(
            **{
                f"new_{field.attname}": Value(field.pre_save(template, True), output_field=field)
                for field in fields
            }
        )
        .values_list("pk", *(f"new_{field.attname}" for field in fields))
        .order_by("pk")
    )
    select, params = hooks.query.sql_with_params()
    quote = connection.ops.quote_name
    columns = ", ".join(quote(name) for name in ["webhook_id", *(f.column for f in fields)])
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {quote(Delivery._meta.db_table)} ({columns}) {select} RETURNING "
            f"{quote(Delivery._meta.pk.column)}",
            params,
        )
        keys = [key for (key,) in cursor.fetchall()]
    _send_on_commit(keys)


def notices_posted(notices):
    """The same for many notices (the lifecycle sweep): one query for the hooks, one
    INSERT for every delivery."""
    team_ids = {notice.team_id for notice in notices} - {None}
    hooks = list(Webhook.objects.filter(_hearing(team_ids)))
    if not hooks:
        return
    for_admins = [hook for hook in hooks if hook.team_id is None]
    by_team = {hook.team_id: hook for hook in hooks if hook.team_id is not None}

    def hooks_for(notice):
        team_hook = by_team.get(notice.team_id)
        return [team_hook, *for_admins] if team_hook else for_admins

    _create([(hook, notice) for notice in notices for hook in hooks_for(notice)])


# --- delivering ---


# However many attempts are allowed, none waits longer than this.
MAX_BACKOFF = 3600


def backoff(attempt):
    """Seconds to wait after failed attempt number `attempt` (1, 2, ...): doubling."""
    return min(settings.PORTAL_WEBHOOK_BACKOFF * 2 ** (attempt - 1), MAX_BACKOFF)


def headers(delivery, secret, timestamp, body):
    return {
        "Content-Type": "application/json; charset=utf-8",
        "User-Agent": "gpu-portal-webhooks/1",
        "X-Portal-Event": delivery.event,
        "X-Portal-Delivery": str(delivery.pk),
        "X-Portal-Timestamp": str(timestamp),
        "X-Portal-Signature": outbound.sign(secret, timestamp, body),
    }


def deliver(delivery_id, now=None):
    """One attempt at a delivery, if it is due and nobody else holds it: the seconds
    until the next attempt, or None (delivered, given up, or not ours to try)."""
    now = now or timezone.now()
    due = (
        Outbox.newer_generation()
        & Q(generation__gt=F("refused_generation"))
        & Q(next_attempt_at__lte=now)
    )
    token = deliveries.claim(delivery_id, now, pending=due)
    if token is None:
        return None
    delivery = Delivery.objects.select_related("webhook").get(pk=delivery_id)
    body = delivery.body.encode()
    timestamp = int(time.time())
    try:
        outcome = outbound.post(
            delivery.webhook.url, body, headers(delivery, delivery.webhook.secret, timestamp, body)
        )
    except Exception as exc:
        # post() means never to raise; if it does, the attempt is still recorded (and
        # retried like any failure) rather than leaving the delivery claimed and pending.
        log.exception("Delivery %s: the attempt raised", delivery_id)
        outcome = outbound.Outcome(None, f"{type(exc).__name__}: {exc}"[: outbound.MAX_ERROR])
    attempt = delivery.attempts + 1
    logged = {"attempts": attempt, "response_code": outcome.status, "error": outcome.error}
    done_at = timezone.now()
    if outcome.delivered:
        deliveries.finish(
            delivery_id,
            token,
            delivery.generation,
            status=Status.DELIVERED,
            delivered_at=done_at,
            **logged,
        )
        return None
    if outcome.permanent or attempt >= settings.PORTAL_WEBHOOK_MAX_ATTEMPTS:
        deliveries.release(
            delivery_id,
            token,
            status=Status.FAILED,
            refused_generation=delivery.generation,
            **logged,
        )
        return None
    delay = max(backoff(attempt), min(outcome.retry_after or 0, MAX_BACKOFF))
    next_at = done_at + timedelta(seconds=delay)
    # queued_at: the retry's message is on its way, due then (the sweep leaves it be).
    deliveries.release(delivery_id, token, next_attempt_at=next_at, queued_at=next_at, **logged)
    return delay


@transaction.atomic
def redeliver(delivery, *, by):
    """Send a failed delivery again, from its first attempt (the receiver is back)."""
    _require(by, delivery.webhook.team)
    # Compare-and-set; a new generation makes it due again (the failed one stays refused).
    again = Delivery.objects.filter(pk=delivery.pk, status=Status.FAILED).update(
        status=Status.PENDING,
        attempts=0,
        next_attempt_at=timezone.now(),
        generation=F("generation") + 1,
    )
    if not again:
        raise errors.IllegalTransition("Only a failed delivery is sent again.")
    transaction.on_commit(lambda: deliveries.enqueue([delivery.pk]), robust=True)
    return delivery


def due(now=None):
    """Deliveries due for an attempt whose message was lost (or whose worker died)."""
    now = now or timezone.now()
    return deliveries.due(Delivery.objects.filter(next_attempt_at__lte=now), now)


def sweep(now=None):
    """Requeue `due` deliveries (run from beat); the ids queued."""
    return deliveries.enqueue(due(now))


def for_team(team):
    """Deliveries to the team's hook, newest first (a queryset to paginate)."""
    return Delivery.objects.filter(webhook__team=team).order_by("-created_at", "-pk")


def prune(now=None):
    """Delete settled deliveries older than PORTAL_WEBHOOK_LOG_DAYS; how many."""
    now = now or timezone.now()
    cutoff = now - timedelta(days=settings.PORTAL_WEBHOOK_LOG_DAYS)
    settled = Delivery.objects.filter(created_at__lt=cutoff).exclude(status=Status.PENDING)
    return settled.delete()[0]
