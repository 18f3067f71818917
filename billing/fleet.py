"""Where the GPU money went: the fleet's cost split into four parts that add up
to it to the cent, per cluster, flavor and team; and OpenCost's rule applied to
the same ledger, as a check (docs/billing.md, "The fleet's cost").

The ledger's sums are exact; pages and the API show cents. Rounding each part on
its own could leave the four a cent off their total, so each level is rounded
to its parent's cents by the largest remainder (`to_cents`): the fleet's cost
first, then each cluster's, each flavor's, and within a flavor each team's
share and the rest.
"""

from collections import defaultdict
from decimal import ROUND_FLOOR, ROUND_HALF_UP, Decimal

from django.conf import settings

from billing import charts, queries
from teams import formats

CENT = Decimal("0.01")
NO_CENTS = Decimal("0.00")  # a sum's start: nothing still reads "0.00"
PARTS = ("used", "idle_reserved", "outside_teams", "unreserved")
TEAM_PARTS = ("used", "idle_reserved")
FIGURES = ("fleet_cost", *PARTS)
# What the pages call each part (the API's keys are PARTS).
LABELS = {
    "used": "Reserved by teams, used",
    "idle_reserved": "Reserved by teams, idle",
    "outside_teams": "Outside any team",
    "unreserved": "Unreserved, idle",
}
# How many months the chart shows, the month asked for last.
CHART_MONTHS = 6
CHART_WIDTH = 420  # six bars fit a phone at this width, labels readable
OUTSIDE = "outside_teams"  # OpenCost's party for the pods of no team's namespace


def to_cents(exact, total):
    """`exact` amounts rounded to the cent so that they add up to `total` (whole
    cents, the rounded sum of `exact`): each rounded down, and the cents left
    over given one each to the largest remainders (the first of equal ones)."""
    floors = [(value / CENT).to_integral_value(ROUND_FLOOR) for value in exact]
    left = int(total / CENT - sum(floors))
    remainders = sorted(range(len(exact)), key=lambda i: floors[i] - exact[i] / CENT)
    for index in remainders[:left]:
        floors[index] += 1
    return [(floor * CENT).quantize(CENT) for floor in floors]


def _rounded(value):
    return Decimal(value).quantize(CENT, ROUND_HALF_UP)


def split(start, end):
    """The fleet's cost over [start, end) in four parts, per cluster and flavor,
    with each team's share of the first two (two queries)."""
    return _split(queries.fleet_cost(start, end), queries.fleet_cost_of_teams(start, end))


def _rows_by_month(start, end):
    """The ledger's exact rows per month of [start, end): ({month: flavor rows},
    {month: team rows}) (two queries). Each month's `_split` rounds it as `split`
    rounds that month alone."""
    flavors, teams = defaultdict(list), defaultdict(list)
    for row in queries.fleet_cost(start, end, by_month=True):
        flavors[row["month"]].append(row)
    for row in queries.fleet_cost_of_teams(start, end, by_month=True):
        teams[row["month"]].append(row)
    return flavors, teams


def _split(flavor_rows, team_rows):
    """The split of exact ledger sums (`queries.fleet_cost` rows per flavor,
    `queries.fleet_cost_of_teams` rows per flavor and team), in cents."""
    shares = defaultdict(list)
    for row in team_rows:
        shares[row["flavor_id"]].append(row)
    flavors = []
    for row in flavor_rows:
        teams = shares[row["flavor_id"]]
        exact_used = sum((team["used"] for team in teams), Decimal(0))
        exact_idle = sum((team["idle_reserved"] for team in teams), Decimal(0))
        # What is left after the teams' shares and the other pods: the ledger's
        # unreserved (and unused batch set-aside), up to its last digits.
        exact_rest = row["fleet_cost"] - exact_used - exact_idle - row["outside_teams"]
        flavors.append(
            {
                "flavor": row["flavor__slug"],
                "name": row["flavor__name"],
                "exact": row["fleet_cost"],
                "exact_parts": [
                    *(team["used"] for team in teams),
                    *(team["idle_reserved"] for team in teams),
                    row["outside_teams"],
                    exact_rest,
                ],
                "teams": [
                    {
                        "team": team["team__slug"],
                        "name": team["team__name"],
                        "used_gpu_hours": team["used_gpu_hours"],
                        "idle_reserved_gpu_hours": team["idle_reserved_gpu_hours"],
                    }
                    for team in teams
                ],
                **{f"{key}_gpu_hours": row[f"{key}_gpu_hours"] for key in FIGURES},
            }
        )
    total = _rounded(sum((flavor["exact"] for flavor in flavors), Decimal(0)))
    # The portal serves one cluster today, by its kubeconfig name: its cost is the
    # fleet's. (Several clusters: theirs rounded to the total, as flavors are here.)
    cluster = {"cluster": settings.PORTAL_CLUSTER_NAME, "fleet_cost": total, "flavors": flavors}
    for flavor, cost in zip(flavors, to_cents([f["exact"] for f in flavors], total), strict=True):
        _flavor_in_cents(flavor, cost)
    _add_up(cluster, flavors)
    clusters = [cluster]
    result = {"fleet_cost": total, "clusters": clusters}
    _add_up(result, clusters)
    result["teams"] = _teams(flavors)
    return result


def _flavor_in_cents(flavor, cost):
    cents = to_cents(flavor.pop("exact_parts"), cost)
    count = len(flavor["teams"])
    for index, team in enumerate(flavor["teams"]):
        team["used"], team["idle_reserved"] = cents[index], cents[count + index]
    flavor["fleet_cost"] = cost
    flavor["used"] = sum(cents[:count], NO_CENTS)
    flavor["idle_reserved"] = sum(cents[count : 2 * count], NO_CENTS)
    flavor["outside_teams"], flavor["unreserved"] = cents[-2], cents[-1]
    del flavor["exact"]


def _add_up(whole, parts):
    """`whole`'s parts and GPU-hours: the sums of its `parts`' (its fleet cost set)."""
    for key in PARTS:
        whole[key] = sum((part[key] for part in parts), NO_CENTS)
    for key in FIGURES:
        whole[f"{key}_gpu_hours"] = sum((part[f"{key}_gpu_hours"] for part in parts), Decimal(0))


def _teams(flavors):
    """Each team's shares over every flavor, the largest first."""
    teams = {}
    for flavor in flavors:
        for share in flavor["teams"]:
            team = teams.setdefault(
                share["team"],
                {"team": share["team"], "name": share["name"]}
                | {key: NO_CENTS for key in TEAM_PARTS}
                | {f"{key}_gpu_hours": Decimal(0) for key in TEAM_PARTS},
            )
            for key in (*TEAM_PARTS, *(f"{key}_gpu_hours" for key in TEAM_PARTS)):
                team[key] += share[key]
    for team in teams.values():
        team["total"] = team["used"] + team["idle_reserved"]
    return sorted(teams.values(), key=lambda team: (-team["total"], team["name"]))


# --- OpenCost's rule, as a check ---


def opencost_shares(fleet_cost, allocated):
    """OpenCost's rule over one cluster and period, from exact amounts: each party
    (a team, or the pods of no team) pays its allocated cost (requested GPUs x
    hours x price) and a share of the idle cost (the fleet's cost less everything
    allocated) by weight, its share of the allocated cost. In cents adding up to
    the fleet's: {party: {"allocated", "idle", "total"}}, and "unshared": the idle
    cost nobody's allocation carries (all of it when nothing was allocated)."""
    parties = sorted(allocated)
    allocated_total = sum(allocated.values(), Decimal(0))
    idle = fleet_cost - allocated_total
    shares = [idle * allocated[p] / allocated_total if allocated_total else 0 for p in parties]
    unshared = idle - sum(shares, Decimal(0))
    cents = to_cents([*(allocated[p] for p in parties), *shares, unshared], _rounded(fleet_cost))
    result = {
        party: {
            "allocated": cents[index],
            "idle": cents[len(parties) + index],
            "total": cents[index] + cents[len(parties) + index],
        }
        for index, party in enumerate(parties)
    }
    return result, cents[-1]


def opencost(start, end):
    """OpenCost's rule over the same ledger rows as `split`: per cluster, each
    team's and the other pods' cost with their share of idle (two queries)."""
    return _opencost(list(queries.fleet_cost(start, end)), queries.fleet_cost_of_teams(start, end))


def _opencost(flavors, team_rows):
    allocated = defaultdict(Decimal)
    for row in team_rows:
        allocated[row["team__slug"]] += row["used"]
    allocated[OUTSIDE] = sum((row["outside_teams"] for row in flavors), Decimal(0))
    fleet_cost = sum((row["fleet_cost"] for row in flavors), Decimal(0))
    # A team that ran nothing is no allocation of OpenCost's, whatever it reserved.
    allocated = {party: cost for party, cost in allocated.items() if cost}
    parties, unshared = opencost_shares(fleet_cost, allocated)
    return {settings.PORTAL_CLUSTER_NAME: {"parties": parties, "unshared": unshared}}


# --- the page ---


def page(month, months_before):
    """What "Where the GPU money went" shows for `month`: its split, OpenCost's
    view of it beside each team, and a stacked bar per month for the chart
    (`months_before`: the Month objects of the months before it, oldest first).
    Two queries: the months' ledger rows, the shown month's among them."""
    first = months_before[0] if months_before else month
    flavors, teams = _rows_by_month(first.start, month.end)
    by_month = {start: _split(rows, teams[start]) for start, rows in sorted(flavors.items())}
    shown = by_month.get(month.start) or _split([], [])
    opencost_view = _opencost(flavors[month.start], teams[month.start])[
        settings.PORTAL_CLUSTER_NAME
    ]
    for team in shown["teams"]:
        team["opencost"] = opencost_view["parties"].get(team["team"], {}).get("total")
    # From the first month metered: months before it would be empty bars.
    shown_months = [
        each for each in months_before if each.start >= min(by_month, default=month.start)
    ]
    bars = []
    for each in [*shown_months, month]:
        figures = by_month.get(each.start, {"fleet_cost": 0, **dict.fromkeys(PARTS, 0)})
        bars.append({"month": f"{each.start:%b %Y}", **figures})
    series = [
        ("used", LABELS["used"], "solid", "#2f6f4f"),
        ("idle_reserved", LABELS["idle_reserved"], "hatch", "#c0392b"),
        ("outside_teams", LABELS["outside_teams"], "dots", "#7f8c8d"),
        ("unreserved", LABELS["unreserved"], "cross", "#2c5aa0"),
    ]
    chart = charts.stacked_bars(
        bars,
        "month",
        series=series,
        unit=settings.PORTAL_CURRENCY,
        x_name="Month (UTC)",
        show=formats.money,
        width=CHART_WIDTH,
    )
    cost = shown["fleet_cost"]
    return {
        "split": shown,
        # Of the fleet's cost, in whole per cent (blank before anything was metered).
        "shares": {
            part: (shown[part] * 100 / cost).quantize(Decimal(1), ROUND_HALF_UP) if cost else ""
            for part in PARTS
        },
        "teams_total": shown["used"] + shown["idle_reserved"],
        "opencost": opencost_view,
        "outside_opencost": opencost_view["parties"].get(OUTSIDE),
        "chart": chart,
        "labels": LABELS,
    }


def months_before(month, count=CHART_MONTHS - 1):
    """The `count` months before `month`, oldest first (Month objects)."""
    found, current = [], month
    for _ in range(count):
        current = type(month).parse(current.previous)
        found.append(current)
    return found[::-1]
