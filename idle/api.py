"""REST API: /api/v1/idle-policies/ and /api/v1/idle-actions/ (docs/idle.md).

Members read the flavors' policies and their own teams'; admins write any,
a team's managers write their team's (stricter only). The log shows a
member their teams' rows; another team's policy is a 404.
"""

from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from gpu_requests import actions as quota_actions
from gpu_requests import inputs
from gpu_requests.api import ERROR_400, ERROR_403
from gpu_requests.models import Flavor
from idle import actions
from idle.models import MAX_MINUTES, IdleAction, IdlePolicy, Mode
from portal.api import Pagination


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


def _visible_policies(user):
    policies = IdlePolicy.objects.select_related("flavor", "team")
    if quota_actions.can_review(user):
        return policies
    return policies.filter(team=None) | policies.filter(team__in=quota_actions.teams_for(user))


class IdlePoliciesView(APIView):
    @extend_schema(responses=PolicySerializer(many=True))
    def get(self, request):
        """The flavors' idle policies and your teams' (every team's for admins)."""
        return Response(PolicySerializer(_visible_policies(request.user), many=True).data)

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
            team = quota_actions.teams_for(request.user).filter(slug=data["team"]).first()
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
        policy = _visible_policies(request.user).filter(pk=pk).first()
        if policy is None:
            raise Http404("No such idle policy among yours.")
        return policy

    @extend_schema(responses=PolicySerializer)
    def get(self, request, pk):
        """One idle policy."""
        return Response(PolicySerializer(self._get(request, pk)).data)

    @extend_schema(responses={204: None, 403: ERROR_403})
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

    @extend_schema(parameters=[OpenApiParameter("team", str, description="team slug")])
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        query = TeamQuery(data=self.request.query_params)
        query.is_valid(raise_exception=True)
        teams = quota_actions.teams_for(self.request.user)
        if query.validated_data.get("team"):
            teams = teams.filter(slug=query.validated_data["team"])
            if not teams.exists():
                raise Http404("No such team among yours.")
        return IdleAction.objects.filter(team__in=teams).select_related("team", "flavor")
