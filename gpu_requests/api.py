"""REST API, /api/v1/. Views parse input and call `actions`; nothing here
changes a status itself.

Every queryset is narrowed to the caller's teams (reviewers see all), so
another team's request is a 404, never a 403.
"""

from django.db.models import Prefetch, prefetch_related_objects
from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from cluster.models import Flavor
from gpu_requests import actions
from gpu_requests.filters import PARAMETERS, SORTS, RequestFilter
from gpu_requests.models import QuotaRequest
from gpu_requests.serializers import (
    CapacityErrorSerializer,
    FlavorSerializer,
    QuotaRequestCreateSerializer,
    QuotaRequestDetailSerializer,
    QuotaRequestSerializer,
    TeamSerializer,
)
from teams import access
from teams.api import APIViewSetMixin
from teams.models import AuditEvent, Team
from teams.schema import ERROR_400, ERROR_403, ERROR_404, ERROR_409
from teams.serializers import ReasonSerializer

Status = QuotaRequest.Status
# A request's history as the detail shows it, oldest first, with who acted.
_EVENTS = Prefetch("events", queryset=AuditEvent.objects.select_related("actor"))
_TRANSITIONS = ("approve", "reject", "cancel", "revoke", "end_early")


class TeamViewSet(APIViewSetMixin, viewsets.ReadOnlyModelViewSet):
    """Your teams; reviewers see all of them."""

    queryset = Team.objects.none()
    serializer_class = TeamSerializer
    lookup_field = "slug"

    def get_queryset(self):
        # The sync row joins the team's query: no query per team for `sync`.
        return access.teams_for(self.request.user).select_related("sync")


class FlavorViewSet(APIViewSetMixin, viewsets.ReadOnlyModelViewSet):
    """The GPU catalog: flavors that can be requested now."""

    queryset = Flavor.objects.filter(is_active=True).select_related("cluster")
    serializer_class = FlavorSerializer
    lookup_field = "slug"


# The schema of reject, cancel, revoke and end early: a reason in, the request out.
TRANSITION_SCHEMA = extend_schema(
    request=ReasonSerializer,
    responses={
        200: QuotaRequestDetailSerializer,
        400: ERROR_400,
        403: ERROR_403,
        404: ERROR_404,
        409: ERROR_409,
    },
)


def _text_pattern(field):
    """A text filter's length limit (and the NUL ban) as its parameter's pattern."""
    limit = getattr(field, "max_length", None)
    return rf"^[^\x00]{{0,{limit}}}$" if limit else None


@extend_schema_view(
    list=extend_schema(
        parameters=[
            OpenApiParameter(
                name,
                enum=(
                    Status.values if name == "status" else list(SORTS) if name == "sort" else None
                ),
                type=OpenApiTypes.DATE if name.startswith("period_") else str,
                description=description,
                pattern=_text_pattern(RequestFilter.base_fields[name]),
            )
            for name, description in PARAMETERS.items()
        ],
    )
)
class QuotaRequestViewSet(
    APIViewSetMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """GPU quota requests of your teams (all teams for reviewers), newest first unless
    `sort` says otherwise; the same filters as the portal's request list."""

    queryset = QuotaRequest.objects.none()
    lookup_value_regex = r"[0-9]+"
    list_parameters = tuple(PARAMETERS)

    def get_queryset(self):
        requests = QuotaRequest.objects.all()
        if not access.can_review(self.request.user):
            requests = requests.filter(team__memberships__user=self.request.user)
        requests = requests.select_related("team", "flavor", "requested_by")
        if self.action == "list":
            return self._filter(requests)
        if self.action in _TRANSITIONS:
            return requests  # the history is read once, after the change (_transition)
        return requests.prefetch_related(_EVENTS)

    def _filter(self, requests):
        """The request list page's filters (gpu_requests.filters), a 400 naming the bad ones."""
        form = RequestFilter(self.request.query_params, strict=True)
        if not form.is_valid():
            raise ValidationError(form.errors)
        return form.apply(requests)

    def get_serializer_class(self):
        if self.action == "list":
            return QuotaRequestSerializer
        return QuotaRequestDetailSerializer

    @extend_schema(
        request=QuotaRequestCreateSerializer,
        responses={201: QuotaRequestDetailSerializer, 400: ERROR_400},
    )
    def create(self, request):
        """Ask for GPUs; the request waits, pending, for a reviewer."""
        form = QuotaRequestCreateSerializer(data=request.data, context={"request": request})
        form.is_valid(raise_exception=True)
        quota_request = actions.submit(by=request.user, **form.validated_data)
        return self._detail(quota_request, status=status.HTTP_201_CREATED)

    def _detail(self, quota_request, status=status.HTTP_200_OK):
        # Fetched again: the events changed since get_object() prefetched them.
        fresh = self.get_queryset().get(pk=quota_request.pk)
        return Response(QuotaRequestDetailSerializer(fresh).data, status=status)

    def _target(self, action):
        """The request to act on. A reviewer sees every team's requests, and only
        reviewers approve, reject or revoke: for them the action's read of the request,
        under its lock, is the only one (one that is not there is a 404 from it).
        Anyone else is told 404 or 403 from a read of what they may see first."""
        if action != "cancel" and access.can_review(self.request.user):
            return QuotaRequest(pk=int(self.kwargs["pk"]))
        return self.get_object()

    def _transition(self, request, action_function):
        quota_request = self._target(action_function.__name__)
        # Who may act is told before what they sent is judged (the action checks again).
        actions.require(action_function.__name__, request.user, quota_request)
        form = ReasonSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            action_function(quota_request, by=request.user, reason=form.validated_data["reason"])
        except QuotaRequest.DoesNotExist:
            raise Http404 from None
        # The action moved the status on this instance (the only field a transition
        # changes): the answer reads the history alone again, one query.
        prefetch_related_objects([quota_request], _EVENTS)
        return Response(QuotaRequestDetailSerializer(quota_request).data)

    @extend_schema(
        request=ReasonSerializer,
        responses={
            200: QuotaRequestDetailSerializer,
            400: ERROR_400,
            403: ERROR_403,
            404: ERROR_404,
            409: OpenApiResponse(
                CapacityErrorSerializer,
                description="Not pending any more, or not enough capacity during the period "
                "(then with `flavor`, `peak`, `capacity` and `requested`).",
            ),
        },
    )
    @action(detail=True, methods=["post"])
    def approve(self, request, pk=None):
        """Reviewers only: reserve the GPUs, if the flavor has room all through the period."""
        return self._transition(request, actions.approve)

    @TRANSITION_SCHEMA
    @action(detail=True, methods=["post"])
    def reject(self, request, pk=None):
        """Reviewers only: turn down a pending request."""
        return self._transition(request, actions.reject)

    @TRANSITION_SCHEMA
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        """The requester or a team manager: withdraw a pending request."""
        return self._transition(request, actions.cancel)

    @TRANSITION_SCHEMA
    @action(detail=True, methods=["post"])
    def revoke(self, request, pk=None):
        """Reviewers only: take back approved or active quota."""
        return self._transition(request, actions.revoke)

    @TRANSITION_SCHEMA
    @action(detail=True, methods=["post"], url_path="end-early")
    def end_early(self, request, pk=None):
        """The requester, a team manager or a reviewer: give active quota back now (its
        period ends now; the namespace's quota drops and the GPUs are free)."""
        return self._transition(request, actions.end_early)
