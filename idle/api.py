"""REST API: /api/v1/idle-policies/ and /api/v1/idle-actions/ (docs/idle.md).

Members read the flavors' policies and their own teams'; admins write any,
a team's managers write their team's (stricter only). The log shows a
member their teams' rows; another team's policy is a 404.
"""

from django.conf import settings
from django.http import Http404
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from billing.reports import Month
from cluster.models import Flavor
from idle import actions, showback
from idle.models import (
    MAX_MINUTES,
    Exemption,
    IdleAction,
    IdlePolicy,
    IdleState,
    Mode,
    visible_policies,
)
from teams import access, inputs
from teams.api import Pagination
from teams.inputs import MAX_TEXT_LENGTH
from teams.schema import ERROR_400, ERROR_403, ERROR_404, ERROR_409
from teams.serializers import ErrorSerializer


class Minutes(serializers.IntegerField):
    """A JSON integer or a string of ASCII digits: not a bool, not "١٠" or "²"
    (which `int()` reads or refuses in ways a client cannot guess)."""

    def to_internal_value(self, data):
        if isinstance(data, bool):
            self.fail("invalid")
        if isinstance(data, int):
            value = data
        else:
            value = inputs.whole_number(data) if isinstance(data, str) else None
            if value is None:
                self.fail("invalid")
        self.run_validators(value)
        return super().to_internal_value(value)


class PolicySerializer(serializers.ModelSerializer):
    flavor = serializers.SlugField(max_length=50)
    team = serializers.SlugField(max_length=63, required=False, allow_null=True, default=None)
    idle_minutes = Minutes(min_value=1, max_value=MAX_MINUTES)
    grace_minutes = Minutes(min_value=0, max_value=MAX_MINUTES)
    mode = serializers.ChoiceField(Mode.choices, default=Mode.REPORT)
    enabled = serializers.BooleanField(default=True)

    class Meta:
        model = IdlePolicy
        fields = ["id", "flavor", "team", "idle_minutes", "grace_minutes", "mode", "enabled"]
        read_only_fields = ["id"]
        validators = []

    def to_representation(self, policy):
        return {
            "id": policy.pk,
            "flavor": policy.flavor.slug,
            "team": policy.team.slug if policy.team_id else None,
            "idle_minutes": policy.idle_minutes,
            "grace_minutes": policy.grace_minutes,
            "mode": policy.mode,
            "enabled": policy.enabled,
        }


class IdlePoliciesView(APIView):
    @extend_schema(responses=PolicySerializer(many=True))
    def get(self, request):
        """The flavors' idle policies and your teams' (every team's for admins)."""
        return Response(PolicySerializer(visible_policies(request.user), many=True).data)

    @extend_schema(
        request=PolicySerializer,
        responses={200: PolicySerializer, 400: ERROR_400, 403: ERROR_403},
    )
    def post(self, request):
        """Set the policy of a flavor (admins) or of a flavor for a team (its
        managers, never looser than the flavor's): created or replaced."""
        serializer = PolicySerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        flavor = Flavor.objects.filter(slug=data["flavor"]).first()
        if flavor is None:
            raise serializers.ValidationError({"flavor": "No such flavor."})
        team = None
        if data["team"]:
            team = access.teams_for(request.user).filter(slug=data["team"]).first()
            if team is None:
                raise serializers.ValidationError({"team": "No such team among yours."})
        policy = actions.set_policy(
            flavor,
            team,
            by=request.user,
            idle_minutes=data["idle_minutes"],
            grace_minutes=data["grace_minutes"],
            mode=data["mode"],
            enabled=data["enabled"],
        )
        return Response(PolicySerializer(policy).data)


class IdlePolicyView(APIView):
    def _get(self, request, pk):
        policy = visible_policies(request.user).filter(pk=pk).first()
        if policy is None:
            raise Http404("No such idle policy among yours.")
        return policy

    @extend_schema(responses=PolicySerializer)
    def get(self, request, pk):
        """One idle policy."""
        return Response(PolicySerializer(self._get(request, pk)).data)

    @extend_schema(responses={204: None, 403: ERROR_403, 409: ERROR_409})
    def delete(self, request, pk):
        """Remove a policy (admins; a team's managers their team's)."""
        actions.remove_policy(self._get(request, pk), by=request.user)
        return Response(status=204)


class IdleActionSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    flavor = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = IdleAction
        fields = [
            "id",
            "at",
            "team",
            "flavor",
            "namespace",
            "workload_kind",
            "workload_name",
            "kind",
            "mode",
            "gpus",
            "idle_since",
            "action_due_at",
            "detail",
        ]


class TeamQuery(serializers.Serializer):
    team = serializers.SlugField(required=False, max_length=63)


class IdleActionsView(generics.ListAPIView):
    """The idle log, newest first: your teams' (every team's for admins)."""

    serializer_class = IdleActionSerializer
    pagination_class = Pagination
    list_parameters = ("team",)

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "team",
                str,
                description="team slug; empty: all of yours",
                pattern=r"^[-a-zA-Z0-9_]{0,63}$",
            )
        ],
        responses={200: IdleActionSerializer(many=True), 400: ERROR_400, 404: ERROR_404},
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        query = TeamQuery(data=self.request.query_params)
        query.is_valid(raise_exception=True)
        teams = access.teams_for(self.request.user)
        if query.validated_data.get("team"):
            teams = teams.filter(slug=query.validated_data["team"])
            if not teams.exists():
                raise Http404("No such team among yours.")
        return IdleAction.objects.filter(team__in=teams).select_related("team", "flavor")


class ExemptionSerializer(serializers.ModelSerializer):
    team = serializers.SlugField(max_length=63)
    namespace = serializers.RegexField(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=63)
    kind = serializers.ChoiceField(["Job", "Deployment", "StatefulSet", "ReplicaSet", "Pod"])
    name = serializers.RegexField(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", max_length=253)
    reason = serializers.CharField(max_length=MAX_TEXT_LENGTH)
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = Exemption
        fields = ["id", "team", "namespace", "kind", "name", "until", "reason", "created_by"]
        read_only_fields = ["id", "created_by"]

    def to_representation(self, exemption):
        data = super().to_representation(exemption)
        data["team"] = exemption.team.slug
        return data


class ExemptionsView(generics.ListAPIView):
    """Exemptions from idle policies: your teams' (every team's for admins)."""

    serializer_class = ExemptionSerializer
    pagination_class = Pagination

    def get_queryset(self):
        teams = access.teams_for(self.request.user)
        return Exemption.objects.filter(team__in=teams).select_related("team", "created_by")

    @extend_schema(
        request=ExemptionSerializer,
        responses={201: ExemptionSerializer, 400: ERROR_400, 403: ERROR_403},
    )
    def post(self, request):
        """Leave a workload of your team alone until a time, with a reason (its
        managers and admins; audited). The only way to exempt one: an annotation
        on the object, which any member can write, is ignored."""
        serializer = ExemptionSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        team = access.teams_for(request.user).filter(slug=data["team"]).first()
        if team is None:
            raise serializers.ValidationError({"team": "No such team among yours."})
        exemption = actions.exempt(
            team,
            namespace=data["namespace"],
            kind=data["kind"],
            name=data["name"],
            until=data["until"],
            reason=data["reason"],
            by=request.user,
        )
        return Response(ExemptionSerializer(exemption).data, status=201)


class IdleStateSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    flavor = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = IdleState
        fields = [
            "id",
            "team",
            "flavor",
            "namespace",
            "kind",
            "name",
            "gpus",
            "idle_since",
            "announced_at",
            "action_due_at",
            "acted_at",
        ]


class IdleStatesView(generics.ListAPIView):
    """Workloads idle now or acted on (scaled to zero): your teams' (all for admins)."""

    serializer_class = IdleStateSerializer
    pagination_class = Pagination

    def get_queryset(self):
        teams = access.teams_for(self.request.user)
        return (
            IdleState.objects.filter(team__in=teams)
            .exclude(idle_since=None, acted_at=None)
            .select_related("team", "flavor")
            .order_by("namespace", "kind", "name")
        )


class BringBackView(APIView):
    @extend_schema(
        request=None,
        responses={
            200: IdleStateSerializer,
            403: ERROR_403,
            404: ERROR_404,
            409: ERROR_409,
            503: OpenApiResponse(
                ErrorSerializer, description="The cluster did not answer; nothing changed."
            ),
        },
    )
    def post(self, request, pk):
        """Bring back a workload an idle action scaled to zero: the replicas it had."""
        request.data  # noqa: B018 - a body, if sent, is parsed and refused as everywhere
        teams = access.teams_for(request.user)
        state = IdleState.objects.filter(pk=pk, team__in=teams).select_related("team").first()
        if state is None:
            raise Http404("No such idle workload among your teams'.")
        data = IdleStateSerializer(state).data
        replicas = actions.bring_back(state, by=request.user)
        return Response({**data, "replicas": replicas})


class SavingSerializer(serializers.Serializer):
    team = serializers.CharField()
    month = serializers.CharField()
    given_back_gpu_hours = serializers.DecimalField(max_digits=16, decimal_places=4)
    saving = serializers.DecimalField(max_digits=16, decimal_places=2)
    would_give_back_gpu_hours = serializers.DecimalField(max_digits=16, decimal_places=4)
    would_save = serializers.DecimalField(max_digits=16, decimal_places=2)
    currency = serializers.CharField()


class IdleSavingsView(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("month", str, description="YYYY-MM; the current one if empty")
        ],
        responses={200: SavingSerializer(many=True), 400: ERROR_400},
    )
    def get(self, request):
        """GPU-hours given back by idle actions and the saving, per team of yours, in
        a month (report-only policies: what they would have given back and saved)."""
        try:
            month = Month.parse(request.query_params.get("month"))
        except ValueError as exc:
            raise serializers.ValidationError({"month": str(exc)}) from None
        teams = dict(access.teams_for(request.user).values_list("pk", "slug"))
        figures = showback.by_team(list(teams), month.start, month.end, timezone.now())
        rows = [
            {
                "team": teams[team_id],
                "month": month.label,
                **values,
                "currency": settings.PORTAL_CURRENCY,
            }
            for team_id, values in sorted(figures.items(), key=lambda item: teams[item[0]])
        ]
        return Response(SavingSerializer(rows, many=True).data)
