"""Hints on the quota request form. {% idle_hint form %}: when a team asks for more
of a flavor it leaves idle, how much it left idle lately (one query).
{% budget_hint form %}: the request's cost this month against the team's budget."""

from django import template

from billing import reports

register = template.Library()


@register.inclusion_tag("billing/_idle_hint.html")
def idle_hint(form):
    data = getattr(form, "cleaned_data", None) or {}
    team, flavor = data.get("team"), data.get("flavor")
    hint = reports.idle_hint(team, flavor) if team and flavor else None
    return {"hint": hint, "team": team, "flavor": flavor}


@register.inclusion_tag("billing/_budget_hint.html")
def budget_hint(form):
    data = getattr(form, "cleaned_data", None) or {}
    team, flavor, gpus = data.get("team"), data.get("flavor"), data.get("gpus")
    starts_at = data.get("starts_at")
    if not (team and flavor and gpus and starts_at):
        return {"hint": None}
    hint = reports.budget_hint(team, flavor, gpus, starts_at, data.get("ends_at"))
    return {"hint": hint, "team": team}
