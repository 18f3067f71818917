"""REST API under /api/v1/billing/: usage, the rate card, budgets.

Members see their own teams only (another team is a 404); writes go through
billing.actions.
"""

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from billing import actions, exports, fleet, focus, queries, reports
from billing.models import BUDGET_VALIDATORS, Budget, Rate, TeamUsage, WorkloadUsage
from cluster.models import Flavor
from teams import access
from teams.api import Reviewers, ReviewersWrite, refuse_unknown_parameters
from teams.models import Membership, Team
from teams.schema import ERROR_400
from teams.serializers import ErrorSerializer

GROUPS = ("team", "flavor", "day", "workload")


NOT_YOURS = OpenApiResponse(ErrorSerializer, description="No such team among yours.")


class PeriodQuery(serializers.Serializer):
    """A period: `month=YYYY-MM` (the pages' calendar month in UTC) or `from` and
    `to`; any parameter not in PARAMETERS is a 400 naming it."""

    # "from" is a Python keyword: the field is renamed below.
    start = serializers.DateTimeField(required=False)
    to = serializers.DateTimeField(required=False)
    month = serializers.CharField(required=False, max_length=7)

    PARAMETERS = ("from", "to", "month")

    def to_internal_value(self, data):
        refuse_unknown_parameters(data, self.PARAMETERS)
        # A plain dict: DRF reads an empty query value as "not given", but
        # `?to=` is a mistake to point out, not a range without an end.
        data = {key: data.get(key) for key in data}
        if "from" in data:
            data["start"] = data.pop("from")
        try:
            return super().to_internal_value(data)
        except serializers.ValidationError as exc:
            detail = exc.detail
            if isinstance(detail, dict) and "start" in detail:
                detail["from"] = detail.pop("start")
            raise serializers.ValidationError(detail) from None

    def validate_month(self, value):
        try:
            return reports.Month.parse(value)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from None

    def validate(self, attrs):
        if attrs.get("start") and attrs.get("to") and attrs["to"] <= attrs["start"]:
            raise serializers.ValidationError({"to": "Must be after from."})
        if attrs.get("month") and (attrs.get("start") or attrs.get("to")):
            raise serializers.ValidationError({"month": "Give a month or from and to, not both."})
        if attrs.get("month"):
            attrs["start"], attrs["to"] = attrs["month"].start, attrs["month"].end
        return attrs


class UsageQuery(PeriodQuery):
    # Plain strings: an unknown flavor selects nothing, an unknown team is a 404,
    # an empty one filters nothing.
    team = serializers.CharField(required=False, allow_blank=True, max_length=63)
    flavor = serializers.CharField(required=False, allow_blank=True, max_length=50)
    group_by = serializers.ChoiceField(GROUPS, default="team")

    PARAMETERS = ("team", "flavor", "from", "to", "month", "group_by")


class UsageView(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("team", str, description="team slug"),
            OpenApiParameter("flavor", str, description="flavor slug"),
            OpenApiParameter("from", OpenApiTypes.DATETIME, description="inclusive"),
            OpenApiParameter(
                "to", OpenApiTypes.DATETIME, description="exclusive; must be after `from`"
            ),
            OpenApiParameter(
                "month",
                str,
                pattern=r"^\d{4}-\d{2}$",
                description="a calendar month in UTC, `YYYY-MM` (instead of `from` and `to`)",
            ),
            OpenApiParameter("group_by", str, enum=list(GROUPS)),
        ],
        responses={200: OpenApiTypes.OBJECT, 404: NOT_YOURS},
    )
    def get(self, request):
        """GPU-hours and cost from the ledger, grouped by team, flavor, day or workload.
        A query parameter not listed here is a 400 naming it."""
        query = UsageQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        teams = access.teams_for(request.user)
        if params.get("team"):
            teams = teams.filter(slug=params["team"])
            if not teams.exists():
                raise Http404("No such team among yours.")
        group_by = params["group_by"]
        model = WorkloadUsage if group_by == "workload" else TeamUsage
        rows = model.objects.filter(team__in=teams)
        if params.get("flavor"):
            rows = rows.filter(flavor__slug=params["flavor"])
        if params.get("start"):
            rows = rows.filter(hour__gte=params["start"])
        if params.get("to"):
            rows = rows.filter(hour__lt=params["to"])
        if group_by == "workload":
            # A workload holds no reservation: its team's row does.
            results = [
                {**row, "reserved_unallocated_gpu_hours": 0}
                for row in queries.workload_usage(rows, extra=("team__slug",))
            ]
        else:
            results = list(queries.team_usage(rows, group_by))
        currency = settings.PORTAL_CURRENCY
        return Response(
            {
                "group_by": group_by,
                "charge": settings.PORTAL_BILLING_CHARGE,
                "currency": currency,
                "results": [_usage_row(row, currency) for row in results],
            }
        )


def _usage_row(row, currency):
    out = {}
    for key, value in row.items():
        if key == "day":
            out["day"] = exports.figure(key, value)
        elif key.endswith("__slug"):
            out[key.removesuffix("__slug")] = value
        elif key.endswith("__name") or key in ("gpus",):
            continue
        elif key.endswith(("_gpu_hours", "cost", "credit")):
            out[key] = str(exports.figure(key, value))
        else:
            out[key] = value
    out["currency"] = currency
    return out


class FocusQuery(PeriodQuery):
    """A period (a month, or `from` and `to` on the hour), a team, and the rows' span."""

    team = serializers.CharField(required=False, allow_blank=True, max_length=63)
    granularity = serializers.ChoiceField(list(focus.GRANULARITIES), default="day")
    PARAMETERS = ("team", "from", "to", "month", "granularity")

    def validate(self, attrs):
        attrs = super().validate(attrs)
        if not (attrs.get("start") and attrs.get("to")):
            raise serializers.ValidationError(
                {"month": "Give a month (YYYY-MM), or from and to: a FOCUS file covers a period."}
            )
        for name, key in (("from", "start"), ("to", "to")):
            if attrs[key].minute or attrs[key].second or attrs[key].microsecond:
                raise serializers.ValidationError(
                    {name: "Must be on the hour: the ledger is hourly."}
                )
        return attrs


class FocusExportView(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter(
                "month",
                str,
                pattern=r"^\d{4}-\d{2}$",
                description="a calendar month in UTC, `YYYY-MM` (or `from` and `to`)",
            ),
            OpenApiParameter("from", OpenApiTypes.DATETIME, description="inclusive, on the hour"),
            OpenApiParameter(
                "to", OpenApiTypes.DATETIME, description="exclusive, on the hour; after `from`"
            ),
            OpenApiParameter("team", str, description="team slug (a manager's own team)"),
            OpenApiParameter(
                "granularity",
                str,
                enum=list(focus.GRANULARITIES),
                description="rows per day or hour",
            ),
        ],
        responses={
            (200, "text/csv"): OpenApiTypes.STR,
            400: ERROR_400,
            403: ErrorSerializer,
            404: NOT_YOURS,
        },
    )
    def get(self, request):
        """The ledger of a period as a FOCUS 1.3 cost-and-usage dataset (CSV): a row per
        team, flavor, day (or hour), price and figure (in use, idle, reserved, credit).
        Platform admins get every team (or `team`), a team's managers their own team.
        A query parameter not listed here is a 400 naming it (docs/billing.md, FOCUS)."""
        query = FocusQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        teams = _focus_teams(request.user, params.get("team"))
        rows = focus.charges(teams, params["start"], params["to"], params["granularity"])
        span = (
            params["month"].label
            if params.get("month")
            else f"{params['start']:%Y%m%dT%H}-{params['to']:%Y%m%dT%H}"
        )
        name = f"focus-{params.get('team') or 'all-teams'}-{span}.csv"
        return exports.csv_stream(name, focus.HEADER, rows)


def _focus_teams(user, slug):
    """Every team (or the one named) for an admin; a manager's own teams; else 403."""
    if access.can_review(user):
        teams = Team.objects.all()
        if slug and not teams.filter(slug=slug).exists():
            raise Http404("No such team.")
        return teams.filter(slug=slug) if slug else teams
    managed = Team.objects.filter(memberships__user=user, memberships__role=Membership.Role.MANAGER)
    if slug:
        managed = managed.filter(slug=slug)
    if not managed.exists():
        raise PermissionDenied(
            "Only the team's managers and platform admins export its FOCUS data."
        )
    return managed


class FleetCostQuery(PeriodQuery):
    def validate(self, attrs):
        attrs = super().validate(attrs)
        for given, missing in (("start", "to"), ("to", "from")):
            if attrs.get(given) and not attrs.get(missing.replace("from", "start")):
                raise serializers.ValidationError({missing: "Give from and to together."})
        if not attrs.get("start"):
            month = reports.Month.parse(None)
            attrs["start"], attrs["to"] = month.start, month.end
        return attrs


class FleetCostView(APIView):
    permission_classes = [Reviewers]

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "month",
                str,
                pattern=r"^\d{4}-\d{2}$",
                description="a calendar month in UTC, `YYYY-MM` (default: the current one)",
            ),
            OpenApiParameter("from", OpenApiTypes.DATETIME, description="inclusive, with `to`"),
            OpenApiParameter("to", OpenApiTypes.DATETIME, description="exclusive, with `from`"),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request):
        """Platform admins: the fleet's cost over the period (every schedulable GPU or
        MIG slice x its rate) split into `used`, `idle_reserved`, `outside_teams` and
        `unreserved`, which add up to `fleet_cost` to the cent, per cluster and
        flavor, with each team's `used` and `idle_reserved` (docs/billing.md)."""
        query = FleetCostQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        start, end = query.validated_data["start"], query.validated_data["to"]
        split = fleet.split(start, end)
        return Response(
            {
                "from": exports.figure("from", start),
                "to": exports.figure("to", end),
                "currency": settings.PORTAL_CURRENCY,
                **_fleet_figures(split),
                "clusters": [
                    {
                        "cluster": cluster["cluster"],
                        **_fleet_figures(cluster),
                        "flavors": [
                            {
                                "flavor": flavor["flavor"],
                                **_fleet_figures(flavor),
                                "teams": [_team_shares(team) for team in flavor["teams"]],
                            }
                            for flavor in cluster["flavors"]
                        ],
                    }
                    for cluster in split["clusters"]
                ],
                "teams": [_team_shares(team) for team in split["teams"]],
            }
        )


def _fleet_figures(row):
    """The fleet's cost and its parts in money (2 places), and their GPU-hours."""
    return {
        **{key: str(row[key]) for key in fleet.FIGURES},
        "gpu_hours": {key: str(round(row[f"{key}_gpu_hours"], 4)) for key in fleet.FIGURES},
    }


def _team_shares(team):
    return {
        "team": team["team"],
        **{key: str(team[key]) for key in fleet.TEAM_PARTS},
        "gpu_hours": {key: str(round(team[f"{key}_gpu_hours"], 4)) for key in fleet.TEAM_PARTS},
    }


class RateSerializer(serializers.ModelSerializer):
    flavor = serializers.SlugRelatedField(slug_field="slug", queryset=Flavor.objects.all())
    mig_parent = serializers.SlugRelatedField(
        slug_field="slug", queryset=Flavor.objects.all(), required=False, allow_null=True
    )
    currency = serializers.SerializerMethodField()

    class Meta:
        model = Rate
        fields = [
            "flavor",
            "effective_from",
            "price_per_gpu_hour",
            "mig_parent",
            "mig_basis",
            "currency",
        ]
        validators = []  # the action's own message names effective_from

    def get_currency(self, rate) -> str:
        return settings.PORTAL_CURRENCY


class RatesView(APIView):
    permission_classes = [ReviewersWrite]
    write_denied = "Only platform admins can change prices."

    @extend_schema(responses=RateSerializer(many=True))
    def get(self, request):
        """The rate card, oldest first per flavor (append-only)."""
        refuse_unknown_parameters(request.query_params, ())
        rates = Rate.objects.select_related("flavor", "mig_parent").order_by(
            "flavor__slug", "effective_from"
        )
        return Response(RateSerializer(rates, many=True).data)

    @extend_schema(request=RateSerializer, responses=RateSerializer)
    def post(self, request):
        """Append a rate (platform admins)."""
        serializer = RateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        rate = actions.add_rate(
            data["flavor"],
            data["effective_from"],
            price=data.get("price_per_gpu_hour"),
            mig_parent=data.get("mig_parent"),
            mig_basis=data.get("mig_basis", ""),
            by=request.user,
        )
        return Response(RateSerializer(rate).data, status=201)


class BudgetSerializer(serializers.Serializer):
    team = serializers.SlugField(max_length=63)
    monthly_amount = serializers.DecimalField(
        max_digits=14, decimal_places=2, allow_null=True, validators=BUDGET_VALIDATORS
    )
    mode = serializers.ChoiceField(
        choices=Budget.Mode.choices,
        default=Budget.Mode.SOFT,
        help_text="soft: alerts at 50, 80 and 100 %; hard: also binds (docs/billing.md).",
    )
    when_spent = serializers.ChoiceField(
        choices=Budget.WhenSpent.choices,
        required=False,
        help_text="What a hard budget does once the team's running total reaches it, besides "
        "holding new GPU work: stop_running (the default for a new budget) or hold_new. "
        "Unchanged if left out.",
    )
    spent_at = serializers.DateTimeField(
        read_only=True,
        allow_null=True,
        help_text="When the hard budget was found spent this month: the team's GPU work is "
        "held until the month turns or the budget is raised. Null while it is not.",
    )
    currency = serializers.CharField(read_only=True)


class BudgetsView(APIView):
    @extend_schema(responses=BudgetSerializer(many=True))
    def get(self, request):
        """Budgets of your teams (every team's for platform admins)."""
        refuse_unknown_parameters(request.query_params, ())
        budgets = Budget.objects.filter(team__in=access.teams_for(request.user))
        rows = budgets.select_related("team").order_by("team__slug")
        return Response([_budget_body(budget.team, budget) for budget in rows])

    @extend_schema(request=BudgetSerializer, responses={200: BudgetSerializer, 404: NOT_YOURS})
    def post(self, request):
        """Set (or with null, remove) a team's monthly budget: its managers and admins."""
        serializer = BudgetSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        team = access.teams_for(request.user).filter(slug=data["team"]).first()
        if team is None:
            raise Http404("No such team among yours.")
        budget = actions.set_budget(
            team,
            data["monthly_amount"],
            by=request.user,
            mode=data["mode"],
            when_spent=data.get("when_spent"),
        )
        return Response(_budget_body(team, budget))


def _budget_body(team, budget):
    return {
        "team": team.slug,
        "monthly_amount": None if budget is None else str(budget.monthly_amount),
        "mode": budget.mode if budget else Budget.Mode.SOFT,
        "when_spent": budget.when_spent if budget else Budget.WhenSpent.STOP_RUNNING,
        "spent_at": budget.spent_at.isoformat().replace("+00:00", "Z")
        if budget and budget.spent_at
        else None,
        "currency": settings.PORTAL_CURRENCY,
    }
