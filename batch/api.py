"""Batch API under /api/v1/: windows (admins write), their occurrences, and jobs.

Jobs are narrowed to the caller's teams (admins see all), so another team's
job is a 404. Views parse input and call `batch.actions`.
"""

from datetime import timedelta

from django.db.models import Prefetch, Subquery
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

from batch import actions, calendar
from batch.models import BatchJob, BatchJobEvent, BatchWindow
from batch.serializers import (
    JobCreateSerializer,
    JobDetailSerializer,
    JobSerializer,
    WindowSerializer,
)
from cluster import clock
from teams import access, inputs
from teams.api import APIViewSetMixin, ReviewersWrite
from teams.models import Team
from teams.schema import ERROR_400, ERROR_403, ERROR_404, ERROR_409
from teams.serializers import AwareDateTimeField, ReasonSerializer

MAX_OCCURRENCE_RANGE = timedelta(days=92)


class WindowViewSet(
    APIViewSetMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    viewsets.GenericViewSet,
):
    """Off-peak batch windows. Everyone reads; platform admins create and update."""

    queryset = BatchWindow.objects.prefetch_related("capacities__flavor")
    serializer_class = WindowSerializer
    lookup_value_regex = r"[0-9]+"
    permission_classes = [ReviewersWrite]
    write_denied = "Only platform admins can change batch windows."

    def perform_create(self, serializer):
        data = dict(serializer.validated_data)
        serializer.instance = actions.save_window(
            None, by=self.request.user, capacity=data.pop("capacity"), **data
        )

    def perform_update(self, serializer):
        data = dict(serializer.validated_data)
        serializer.instance = actions.save_window(
            serializer.instance, by=self.request.user, capacity=data.pop("capacity"), **data
        )

    @extend_schema(
        parameters=[
            OpenApiParameter("from", str, description="ISO 8601 with offset; default now."),
            OpenApiParameter(
                "to",
                str,
                description="After `from`; default 14 days later, at most 92 days after `from`.",
            ),
        ],
        responses={200: OpenApiResponse(description="Occurrences in the range."), 400: ERROR_400},
    )
    @action(detail=True, methods=["get"])
    def occurrences(self, request, pk=None):
        """Occurrences meeting [from, to), each with its capacity and GPUs planned per flavor."""
        window = self.get_object()
        starts_at = _instant(request.query_params, "from") or clock.now()
        ends_at = _instant(request.query_params, "to") or starts_at + actions.horizon()
        if ends_at <= starts_at:
            raise ValidationError({"to": ["Must be after from."]})
        if ends_at - starts_at > MAX_OCCURRENCE_RANGE:
            raise ValidationError({"to": ["Ask for at most 92 days at a time."]})
        return Response(calendar.window_occurrences(window, starts_at, ends_at))


@extend_schema_view(
    list=extend_schema(
        parameters=[
            # Empty means all, as the job list page's filter sends it.
            OpenApiParameter("status", enum=["", *BatchJob.Status.values]),
            OpenApiParameter("team", str, description="Team slug."),
            OpenApiParameter(
                "window", str, pattern=r"^[0-9]{0,15}$", description="Window id of the plan."
            ),
        ],
    )
)
class JobViewSet(
    APIViewSetMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """Batch jobs of your teams (all for admins), newest first."""

    queryset = BatchJob.objects.none()
    lookup_value_regex = r"[0-9]+"
    list_parameters = ("status", "team", "window")

    def get_queryset(self):
        jobs = visible_jobs(self.request.user).select_related(
            "team", "flavor", "created_by", "window"
        )
        if self.action == "list":
            return filter_jobs(jobs, self.request.query_params)
        return jobs.prefetch_related(
            Prefetch("events", queryset=BatchJobEvent.objects.select_related("actor"))
        )

    def get_serializer_class(self):
        return JobSerializer if self.action == "list" else JobDetailSerializer

    @extend_schema(
        request=JobCreateSerializer, responses={201: JobDetailSerializer, 400: ERROR_400}
    )
    def create(self, request):
        """Queue a batch job; the planner puts it into the next window occurrence that fits."""
        form = JobCreateSerializer(data=request.data, context={"request": request})
        form.is_valid(raise_exception=True)
        job = actions.submit(by=request.user, **form.validated_data)
        return self._detail(job, status.HTTP_201_CREATED)

    def _detail(self, job, code=status.HTTP_200_OK):
        fresh = self.get_queryset().get(pk=job.pk)
        return Response(JobDetailSerializer(fresh).data, status=code)

    @extend_schema(
        request=ReasonSerializer,
        responses={200: JobDetailSerializer, 404: ERROR_404, 409: ERROR_409},
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        """Cancel a queued or planned job (its submitter, a team manager or an admin)."""
        job = self.get_object()
        form = ReasonSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        actions.cancel(job, by=request.user, reason=form.validated_data["reason"])
        return self._detail(job)

    @extend_schema(
        request=ReasonSerializer,
        responses={200: JobDetailSerializer, 403: ERROR_403, 404: ERROR_404, 409: ERROR_409},
    )
    @action(detail=True, methods=["post"], url_path="release-past-budget")
    def release_past_budget(self, request, pk=None):
        """Let a job held by its team's hard budget run past it (platform admins)."""
        job = self.get_object()
        form = ReasonSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        actions.release_past_budget(job, by=request.user, reason=form.validated_data["reason"])
        return self._detail(job)


def _instant(params, name):
    raw = params.get(name)
    if raw is None:
        return None
    try:
        return AwareDateTimeField().run_validation(raw)
    except ValidationError as exc:
        raise ValidationError({name: exc.detail}) from None


def visible_jobs(user):
    jobs = BatchJob.objects.all()
    if not access.can_review(user):
        jobs = jobs.filter(team__memberships__user=user)
    return jobs


def filter_jobs(jobs, params):
    """Filters shared by the API and the job list page: status, team, window."""
    wanted = params.get("status")
    if wanted:
        if wanted not in BatchJob.Status.values:
            choices = ", ".join(BatchJob.Status.values)
            raise ValidationError({"status": [f"Unknown status; use one of {choices}."]})
        jobs = jobs.filter(status=wanted)
    if team := params.get("team"):
        # The team's id as a subquery, not a join: PostgreSQL then reads the team's
        # jobs newest first from `batch_job_team_newest` and stops at the page.
        jobs = jobs.filter(team_id=Subquery(Team.objects.filter(slug=team).order_by().values("pk")))
    window = params.get("window")
    if window:
        window_id = inputs.whole_number(window)
        if window_id is None:
            raise ValidationError({"window": ["Give a window id."]})
        jobs = jobs.filter(window_id=window_id)
    return jobs
