"""{% idle_hint form %} on the quota request form: when a team asks for more of
a flavor it leaves idle, say how much it left idle lately (one query)."""

from django import template

from billing import reports

register = template.Library()


@register.inclusion_tag("billing/_idle_hint.html")
def idle_hint(form):
    data = getattr(form, "cleaned_data", None) or {}
    team, flavor = data.get("team"), data.get("flavor")
    hint = reports.idle_hint(team, flavor) if team and flavor else None
    return {"hint": hint, "team": team, "flavor": flavor}
