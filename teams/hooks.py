"""What other apps do when a team changes: an explicit registry, no signals.

`teams` is the bottom layer and imports no app above it; the features that
change a team's quota, members or notices (gpu_requests' actions, batch) call
these hooks, and an app that must react (the team namespace sync, batch,
billing, idle, notifications) registers a callback in its `AppConfig.ready()`:

    from teams import hooks
    hooks.on_quota_changed(my_callback)     # my_callback(team_id)

The actions call `hooks.quota_changed(team_id)` inside the transaction
of the change, and each callback runs right there, in that transaction: it
records its own follow-up work in the database (an outbox `mark`, one or two
queries), so the change and the note of what must follow commit or roll back
together. Anything outside the database (a Celery message, an API call) the
callback defers with `transaction.on_commit`, as `Outbox.changed` does, so it
happens only after the commit and never for a rollback. A callback that
raises rolls the change back: keep them to small database writes.

A callback may come with a set-based twin for several teams at once, which
the lifecycle sweep uses (it moves hundreds of requests of as many teams in
one transaction):

    hooks.on_quota_changed(my_callback, many=my_callback_for_teams)  # (team_ids)

Without one, the sweep calls the callback once per team.

Events:
- quota changed: the team's reserved quota changed (approved, activated,
  revoked, expired, or the team archived);
- members changed: who belongs to the team changed (the Django admin);
- team archived: `teams.actions.archive_team` asks the apps that hold something
  of the team to give it up (gpu_requests revokes its reserved quota), in its
  transaction, before it records the archiving (batch cancels the team's jobs,
  running ones too, and plans the capacity they held again);
- notice: people are told something (a request submitted, decided or commented
  on): `gpu_requests.notices` sends the email after commit and hands the same
  `Notice` to each callback here, in the transaction (the webhooks record
  their deliveries there).

Namespaces: `on_namespace_refusal(check)` says why a new team's namespace may
not be its own (provisioning reads the live namespace: one that exists without
the portal's labels is refused), for `teams.namespaces.check_slug`.

Budgets: `on_budget_left(provider)` says what teams may still spend this
month (billing's hard budgets), for batch to hold work past it;
`on_budget_spent(callback)` is what an app does when a team's hard budget says
stop its running work (batch stops its running jobs); `on_quota_cap(provider)`
caps what a team's namespace may hold below its quota (billing's spent hard
budget: what is running), as `on_extra_quota` adds to it.

Pages: `on_team_panel(provider)` adds a panel to the team page, drawn by an
app above this one (provisioning's "How to use your namespace");
`on_cluster_panel(provider)` one to the cluster page (billing's node pools);
`on_workload_panel(provider)` one to a workload's report card (idle's notice
and "Bring it back"), `on_spend_panel(provider)` one to a team's Spend page,
`on_dashboard_note(provider)` one to teams' panels on the dashboard (billing's
quota nobody uses, with its "give it back").
"""

_quota_changed = []
_extra_quota = []
_members_changed = []
_team_archived = []
_notice = []
_notice_many = {}  # callback -> its set-based twin
_team_panels = []
_cluster_panels = []
_workload_panels = []
_spend_panels = []
_dashboard_notes = []
_budget_left = []
_budget_spent = []
_quota_caps = []
_namespace_refusals = []
_quota_changed_many = {}  # callback -> its set-based twin


def _register(callbacks, callback):
    if callback not in callbacks:  # ready() may run twice (tests, reloads)
        callbacks.append(callback)
    return callback


def on_quota_changed(callback, *, many=None):
    """Call `callback(team_id)` in the transaction of every change of a team's reserved quota
    (`many(team_ids)` instead, if given, when several teams changed at once)."""
    if many is not None:
        _quota_changed_many[callback] = many
    return _register(_quota_changed, callback)


def on_members_changed(callback):
    """Call `callback(team_id)` in the transaction of every change of a team's members."""
    return _register(_members_changed, callback)


def on_team_archived(callback):
    """Call `callback(team, by=user, reason=text)` in the transaction that archives
    `team`, before the archiving's own audit event."""
    return _register(_team_archived, callback)


def team_archived(team, *, by, reason):
    for callback in _team_archived:
        callback(team, by=by, reason=reason)


def quota_changed(team_id):
    for callback in _quota_changed:
        callback(team_id)


def quota_changed_many(team_ids):
    """Several teams' reserved quota changed in this transaction: each callback once."""
    team_ids = sorted(set(team_ids))
    if not team_ids:
        return
    for callback in _quota_changed:
        many = _quota_changed_many.get(callback)
        if many is not None:
            many(team_ids)
        else:
            for team_id in team_ids:
                callback(team_id)


def on_extra_quota(provider):
    """Quota a team's namespace holds beyond its active requests (batch jobs while they
    run): `provider(team_ids)` yields (team_id, flavor slug, resource_name, gpus). Who
    changes what a provider yields calls `quota_changed(team_id)`, as for any change of
    quota."""
    return _register(_extra_quota, provider)


def extra_holdings(team_ids):
    """{team_id: {(flavor slug, resource_name): gpus}} summed over the providers (a
    query or so each)."""
    extra = {}
    for provider in _extra_quota:
        for team_id, flavor, resource, gpus in provider(team_ids):
            held = extra.setdefault(team_id, {})
            held[flavor, resource] = held.get((flavor, resource), 0) + gpus
    return extra


def extra_quota(team_ids):
    """{team_id: {resource_name: gpus}} summed over the providers."""
    extra = {}
    for team_id, held in extra_holdings(team_ids).items():
        by_resource = extra.setdefault(team_id, {})
        for (_, resource), gpus in held.items():
            by_resource[resource] = by_resource.get(resource, 0) + gpus
    return extra


def on_quota_cap(provider):
    """Cap what a team's namespace may hold below its quota (billing, while a hard
    budget is spent): `provider(team_ids)` returns {team_id: {resource_name: gpus}}
    for the teams it caps; a resource it does not name is capped at none. Who changes
    what a provider returns calls `quota_changed(team_id)`, as for any change of quota."""
    return _register(_quota_caps, provider)


def quota_caps(team_ids):
    """{team_id: {resource_name: gpus}} of the capped teams: the least of the providers'
    caps per resource (a query or so each)."""
    caps = {}
    for provider in _quota_caps:
        for team_id, by_resource in provider(team_ids).items():
            if team_id not in caps:
                caps[team_id] = dict(by_resource)
                continue
            mine = caps[team_id]
            caps[team_id] = {
                resource: min(mine.get(resource, 0), by_resource.get(resource, 0))
                for resource in mine.keys() & by_resource.keys()
            }
    return caps


def members_changed(team_id):
    for callback in _members_changed:
        callback(team_id)


def on_notice(callback, *, many=None):
    """Call `callback(notice)` (a `teams.notices.Notice`) in the transaction of
    everything people are told about (`many(notices)` instead, if given, when the
    lifecycle sweep tells of many at once)."""
    if many is not None:
        _notice_many[callback] = many
    return _register(_notice, callback)


def notice(notice):
    for callback in _notice:
        callback(notice)


def notices(notices):
    """Several notices from one transaction: each callback's set-based twin once."""
    if not notices:
        return
    for callback in _notice:
        many = _notice_many.get(callback)
        if many is not None:
            many(notices)
        else:
            for one in notices:
                callback(one)


def on_team_panel(provider):
    """Add a panel to the team page: `provider(team)` returns (template name, context)
    or None for no panel. Keep it to a query or two."""
    return _register(_team_panels, provider)


def team_panels(team):
    """[(template name, context)] of the registered panels for `team`, in order."""
    return [panel for panel in (provider(team) for provider in _team_panels) if panel]


def on_cluster_panel(provider):
    """Add a panel to the admins' cluster page: `provider(now)` returns (template name,
    context) or None. Keep it to a few queries."""
    return _register(_cluster_panels, provider)


def cluster_panels(now):
    """[(template name, context)] of the registered cluster page panels, in order."""
    return [panel for panel in (provider(now) for provider in _cluster_panels) if panel]


def on_workload_panel(provider):
    """Add a panel to a workload's report card: `provider(team, namespace, kind, name,
    user)` (the viewer) returns (template name, context) or None. Keep it to a query
    or two. Panels are included with `panel` and `csrf_token` alone: a form in one
    posts without JavaScript too."""
    return _register(_workload_panels, provider)


def workload_panels(team, namespace, kind, name, user):
    """[(template name, context)] of the registered panels for the workload, in order."""
    panels = (provider(team, namespace, kind, name, user) for provider in _workload_panels)
    return [panel for panel in panels if panel]


def on_spend_panel(provider):
    """Add a panel to a team's Spend page: `provider(team, month)` (month: its
    `start` and `end`) returns (template name, context) or None."""
    return _register(_spend_panels, provider)


def spend_panels(team, month):
    return [panel for panel in (provider(team, month) for provider in _spend_panels) if panel]


def on_dashboard_note(provider):
    """Add a note to teams' panels on the dashboard: `provider(team_ids, user)` (the
    viewer) returns {team_id: (template name, context)} for the teams it has one for.
    Set-based: a query or two for every team of the page."""
    return _register(_dashboard_notes, provider)


def dashboard_notes(team_ids, user):
    """{team_id: [(template name, context)]} of the registered notes, in order."""
    notes = {}
    for provider in _dashboard_notes:
        for team_id, note in provider(team_ids, user).items():
            notes.setdefault(team_id, []).append(note)
    return notes


def on_budget_left(provider):
    """What teams may still spend this month where that holds work back (billing's hard
    budgets): `provider(team_ids, now)` returns {team_id: amount left}."""
    return _register(_budget_left, provider)


def on_budget_spent(callback):
    """Stop a team's running work when its hard budget says so (billing, once spent):
    `callback(team_id, reason=text, now=instant)` runs in the transaction that records
    the budget spent and returns what it stopped, as short phrases for the owner's
    notice."""
    return _register(_budget_spent, callback)


def budget_spent(team_id, *, reason, now):
    """[what was stopped] over the callbacks."""
    stopped = []
    for callback in _budget_spent:
        stopped.extend(callback(team_id, reason=reason, now=now))
    return stopped


def budget_left(team_ids, now):
    """{team_id: amount left} of the teams some provider limits (the least, if several)."""
    left = {}
    for provider in _budget_left:
        for team_id, amount in provider(team_ids, now).items():
            left[team_id] = min(amount, left.get(team_id, amount))
    return left


def on_namespace_refusal(check):
    """Have a new team's namespace checked by an app above this one: `check(slug,
    name)` returns why team `slug` may not have namespace `name` ("" if it may).
    One API call at most: it runs when a team is created, in the request."""
    return _register(_namespace_refusals, check)


def namespace_refusals(slug, name):
    """Each registered check's answer for team `slug`'s namespace `name`, lazily."""
    return (check(slug, name) for check in _namespace_refusals)
