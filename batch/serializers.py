"""What the batch API reads and writes. Parsing only: the rules live in
`batch.validation` and `batch.actions`, so the web forms and the API agree."""

from datetime import time

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from batch import eta, validation, waiting
from batch.actions import JOB_FIELDS
from batch.launch import job_namespace
from batch.models import BatchJob, BatchJobEvent, BatchWindow
from cluster.models import Flavor
from teams import access
from teams.serializers import AwareDateTimeField


@extend_schema_field(OpenApiTypes.STR)
class HourMinuteField(serializers.Field):
    default_error_messages = {"invalid": "{message}"}

    def to_internal_value(self, value):
        try:
            return validation.parse_time(value, self.field_name)
        except ValueError as exc:
            self.fail("invalid", message=str(exc))

    def to_representation(self, value):
        return f"{value:%H:%M}" if isinstance(value, time) else value


class WindowSerializer(serializers.ModelSerializer):
    days = serializers.ListField(
        child=serializers.CharField(max_length=3), max_length=7, help_text='e.g. ["fri", "sat"]'
    )
    start_time = HourMinuteField(help_text='Local "HH:MM".')
    end_time = HourMinuteField(help_text='Local "HH:MM"; earlier than the start: the next day.')
    exceptions = serializers.ListField(
        child=serializers.CharField(max_length=10),
        required=False,
        max_length=1000,
        help_text="Local dates (YYYY-MM-DD) it does not open.",
    )
    capacity = serializers.DictField(
        child=serializers.IntegerField(),
        write_only=True,
        help_text="{flavor slug: GPUs set aside for batch}",
    )
    timezone = serializers.CharField(max_length=64)
    end_day = serializers.CharField(max_length=3, required=False, allow_blank=True, default="")
    summary = serializers.CharField(read_only=True)

    class Meta:
        model = BatchWindow
        fields = [
            "id",
            "name",
            "timezone",
            "days",
            "start_time",
            "end_time",
            "end_day",
            "exceptions",
            "capacity",
            "price_factor",
            "spot_allowed",
            "enabled",
            "summary",
        ]
        read_only_fields = ["id", "summary"]
        # Uniqueness of the name is the model's; the message comes from the action.
        extra_kwargs = {"name": {"validators": []}}

    def to_representation(self, window):
        data = super().to_representation(window)
        data["capacity"] = {c.flavor.slug: c.gpus for c in window.capacities.all()}
        return data

    def validate_capacity(self, value):
        flavors = {f.slug: f for f in Flavor.objects.filter(slug__in=list(value))}
        unknown = sorted(set(value) - set(flavors))
        if unknown:
            raise serializers.ValidationError(f"Unknown flavor(s): {', '.join(unknown)}.")
        return {flavors[slug]: gpus for slug, gpus in value.items()}

    def validate(self, data):
        merged = {
            name: data.get(name, getattr(self.instance, name, None))
            for name in ("name", "timezone", "days", "start_time", "end_time", "end_day")
        }
        merged["exceptions"] = data.get("exceptions", getattr(self.instance, "exceptions", []))
        capacity = data.get("capacity")
        if capacity is None and self.instance is not None:
            capacity = {c.flavor: c.gpus for c in self.instance.capacities.all()}
        errors = validation.window_errors(
            **merged, capacity={f.slug: g for f, g in (capacity or {}).items()}
        )
        others = BatchWindow.objects.filter(name=merged["name"])
        if self.instance is not None:
            others = others.exclude(pk=self.instance.pk)
        if others.exists():
            errors.setdefault("name", ["A window with this name exists."])
        if errors:
            raise serializers.ValidationError(errors)
        return {**data, **merged, "capacity": capacity}


class JobCreateSerializer(serializers.Serializer):
    team = serializers.CharField(max_length=63, help_text="Slug of one of your teams.")
    name = serializers.CharField(max_length=100)
    flavor = serializers.CharField(max_length=50, help_text="Slug of a flavor.")
    image = serializers.CharField(max_length=512, help_text="From an allowed registry.")
    command = serializers.JSONField(
        required=False, default=list, help_text="A list of strings, never a shell string."
    )
    args = serializers.JSONField(required=False, default=list, help_text="A list of strings.")
    env = serializers.JSONField(
        required=False,
        default=list,
        help_text='[{"name": "X", "value": "1"} or {"name": "TOKEN", "secret": '
        '{"name": "my-secret", "key": "token"}}]',
    )
    gpus = serializers.JSONField(help_text="GPUs per pod.")
    parallelism = serializers.JSONField(required=False, default=1)
    completions = serializers.JSONField(required=False, default=1)
    expected_runtime_minutes = serializers.JSONField()
    max_runtime_minutes = serializers.JSONField(
        required=False, help_text="Default: the expected runtime."
    )
    spot_allowed = serializers.BooleanField(required=False, default=False)
    priority = serializers.JSONField(required=False, default=0, help_text="-100 to 100.")
    annotations = serializers.JSONField(
        required=False, default=dict, help_text="Pod annotations, {key: value}."
    )
    window = serializers.IntegerField(
        required=False, allow_null=True, default=None, help_text="Only this window (id)."
    )
    occurrence = AwareDateTimeField(
        required=False,
        allow_null=True,
        default=None,
        help_text="Only the occurrence of `window` opening at this instant.",
    )

    def validate_team(self, slug):
        team = access.teams_for(self.context["request"].user).filter(slug=slug).first()
        if team is None:
            raise serializers.ValidationError(
                f"Unknown team {slug!r}, or you are not one of its members."
            )
        return team

    def validate_flavor(self, slug):
        flavor = Flavor.objects.filter(slug=slug).first()
        if flavor is None:
            raise serializers.ValidationError(f"There is no flavor {slug!r}.")
        return flavor

    def validate_window(self, pk):
        if pk is None:
            return None
        window = BatchWindow.objects.filter(pk=pk, enabled=True).first()
        if window is None:
            raise serializers.ValidationError(f"There is no enabled window {pk}.")
        return window

    def validate(self, data):
        data.setdefault("max_runtime_minutes", data.get("expected_runtime_minutes"))
        return data


class JobEventSerializer(serializers.ModelSerializer):
    # None for the portal's own transitions (planned, released, finished).
    actor = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)

    class Meta:
        model = BatchJobEvent
        fields = ["action", "from_status", "to_status", "actor", "reason", "created_at"]


class JobSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    flavor = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = BatchJob
        fields = [
            "id",
            "team",
            "flavor",
            *JOB_FIELDS,
            "status",
            "planned_start",
            "estimated_cost",
            "on_demand_cost",
            "reserved_cost",
            "created_by",
            "created_at",
        ]
        read_only_fields = fields


class OccurrenceRefSerializer(serializers.Serializer):
    window = serializers.IntegerField()
    window_name = serializers.CharField()
    opens_at = serializers.DateTimeField()
    closes_at = serializers.DateTimeField()


class KubernetesJobSerializer(serializers.Serializer):
    namespace = serializers.CharField()
    name = serializers.CharField(help_text="Deterministic: batch-<id>.")


class AheadSerializer(serializers.Serializer):
    team = serializers.CharField()
    jobs = serializers.IntegerField()
    gpus = serializers.IntegerField()


class WaitingReasonSerializer(serializers.Serializer):
    code = serializers.ChoiceField(
        choices=list(waiting.REASONS),
        help_text="starting, window_not_open and behind_others: planned; the others: queued.",
    )
    text = serializers.CharField()
    occurrence = serializers.CharField(help_text="The window occurrence the reason is about.")
    ahead = AheadSerializer(
        many=True, help_text="Work held or planned in that occurrence before this job, per team."
    )
    share_position = serializers.IntegerField(
        allow_null=True, help_text="The team's place in the fair share there (1: served first)."
    )
    share_teams = serializers.IntegerField(allow_null=True)


class EtaRangeSerializer(serializers.Serializer):
    to = serializers.DateTimeField(source="starts_to", help_text="The latest start in the range.")
    confidence = serializers.FloatField(
        help_text="The share of actual starts the range is calibrated to hold (0.8: 80 %)."
    )
    samples = serializers.IntegerField(
        help_text="Jobs it was calibrated on (their start against their first estimate, "
        f"the last {eta.HISTORY_DAYS} days); 0: too few yet, a prior (docs/batch.md)."
    )

    def get_fields(self):
        # `from` is a Python keyword: the field is added here rather than in the body.
        starts_from = serializers.DateTimeField(
            source="starts_from", help_text="The earliest start in the range (not before now)."
        )
        return {"from": starts_from, **super().get_fields()}


class AlternativeSerializer(serializers.Serializer):
    change = serializers.ChoiceField(choices=["gpus", "max_runtime", "flavor"])
    text = serializers.CharField()
    eta = serializers.DateTimeField(help_text="When the job would start with this change.")


class JobDetailSerializer(JobSerializer):
    window = serializers.IntegerField(
        source="target_window_id",
        read_only=True,
        allow_null=True,
        help_text="The window asked for; null: any window that fits.",
    )
    occurrence = serializers.SerializerMethodField()
    kubernetes_job = serializers.SerializerMethodField()
    events = JobEventSerializer(many=True, read_only=True)
    waiting_reason = serializers.SerializerMethodField()
    eta = serializers.SerializerMethodField()
    eta_range = serializers.SerializerMethodField()
    alternatives = serializers.SerializerMethodField()

    class Meta(JobSerializer.Meta):
        fields = [
            *JobSerializer.Meta.fields,
            "window",
            "occurrence",
            "planned_end",
            "explanation",
            "kubernetes_job",
            "released_at",
            "started_at",
            "finished_at",
            "lost_gpu_minutes",
            "cluster_message",
            "cluster_events",
            "log_tail",
            "events",
            "waiting_reason",
            "eta",
            "eta_range",
            "alternatives",
        ]
        read_only_fields = fields

    def _waiting(self, job):
        """batch.waiting.explain, once per job and response."""
        cache = self.context.setdefault("waiting", {})
        if job.pk not in cache:
            cache[job.pk] = waiting.explain(job)
        return cache[job.pk]

    @extend_schema_field(WaitingReasonSerializer(allow_null=True))
    def get_waiting_reason(self, job):
        """Why a queued or planned job is not running; null for any other status."""
        found = self._waiting(job)
        if found is None:
            return None
        return WaitingReasonSerializer(found).data

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_eta(self, job):
        """When it will start (its planned start); null when no occurrence in view fits."""
        found = self._waiting(job)
        if found is None or found.eta is None:
            return None
        return serializers.DateTimeField().to_representation(found.eta)

    @extend_schema_field(EtaRangeSerializer(allow_null=True))
    def get_eta_range(self, job):
        """Where its start falls, as often as `confidence` says; null when `eta` is."""
        found = self._waiting(job)
        if found is None or found.eta_range is None:
            return None
        return EtaRangeSerializer(found.eta_range).data

    @extend_schema_field(AlternativeSerializer(many=True))
    def get_alternatives(self, job):
        """Changes to the job that would start it sooner, soonest first."""
        found = self._waiting(job)
        return [] if found is None else AlternativeSerializer(found.alternatives, many=True).data

    @extend_schema_field(OccurrenceRefSerializer(allow_null=True))
    def get_occurrence(self, job):
        if job.window_id is None:
            return None
        return {
            "window": job.window_id,
            "window_name": job.window.name,
            "opens_at": serializers.DateTimeField().to_representation(job.opens_at),
            "closes_at": serializers.DateTimeField().to_representation(job.closes_at),
        }

    @extend_schema_field(KubernetesJobSerializer)
    def get_kubernetes_job(self, job):
        return {"namespace": job_namespace(job.team), "name": job.kubernetes_name}
