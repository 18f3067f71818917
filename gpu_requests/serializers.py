"""What the API reads and writes. Parsing only: the rules a request must
follow live in `actions.validate_request`, so the web form and the API give
the same answers."""

from rest_framework import serializers

from cluster.models import Flavor
from gpu_requests.models import QuotaRequest
from teams import access
from teams.inputs import MAX_TEXT_LENGTH, validate_visible
from teams.models import AuditEvent, SyncStatus, Team
from teams.serializers import AwareDateTimeField, ErrorSerializer


class TeamSyncSerializer(serializers.Serializer):
    """How far the team's namespace on the cluster is from what the portal wants."""

    status = serializers.ChoiceField(
        # Named in the schema by SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"]:
        # it would collide with requests' `status`.
        choices=SyncStatus.choices,
        help_text="`not_provisioned`: the portal has not created the team's namespace yet. "
        "A failing team stays failing, with its last error, until a sync succeeds.",
    )
    last_error = serializers.CharField(
        allow_null=True, help_text="The cluster's message for the last failed sync."
    )
    last_error_status = serializers.IntegerField(
        allow_null=True, help_text="The HTTP status of that error, if the API server answered."
    )
    last_error_at = serializers.DateTimeField(allow_null=True)
    last_synced_at = serializers.DateTimeField(
        allow_null=True, help_text="When the cluster last matched the portal."
    )
    archived = serializers.BooleanField(help_text="Quota revoked and capped at zero.")
    namespace_deleted = serializers.BooleanField()

    def to_representation(self, team):
        # No query when the caller selected `sync` with the team.
        record = team.sync_record
        return super().to_representation(
            {
                "status": team.sync_status,
                "last_error": (record and record.last_error) or None,
                "last_error_status": record and record.last_error_status,
                "last_error_at": record and record.last_error_at,
                "last_synced_at": record and record.last_synced_at,
                "archived": team.is_archived,
                "namespace_deleted": bool(record and record.namespace_deleted_at),
            }
        )


class TeamSerializer(serializers.ModelSerializer):
    sync = TeamSyncSerializer(source="*", read_only=True)

    class Meta:
        model = Team
        fields = ["slug", "name", "created_at", "sync"]


class FlavorSerializer(serializers.ModelSerializer):
    cluster = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, help_text="The cluster the flavor's GPUs are in."
    )
    node_selector = serializers.DictField(
        child=serializers.CharField(), help_text="Kubernetes node labels the GPUs carry."
    )
    tolerations = serializers.ListField(
        child=serializers.DictField(), help_text="Kubernetes tolerations for the GPU nodes."
    )
    held_by = serializers.SerializerMethodField(
        help_text="`extended_resource` (resource_name on nodes matching node_selector) or "
        "`dra` (devices of device_class matching device_selector; resource_name is then "
        "the class's quota key)."
    )

    class Meta:
        model = Flavor
        fields = [
            "slug",
            "name",
            "cluster",
            "gpu_model",
            "memory_gb",
            "sharing",
            "held_by",
            "resource_name",
            "capacity",
            "price_per_gpu_hour",
            "node_selector",
            "tolerations",
            "device_class",
            "device_selector",
        ]

    def get_held_by(self, flavor) -> str:
        return "dra" if flavor.is_dra else "extended_resource"


class QuotaRequestCreateSerializer(serializers.Serializer):
    team = serializers.CharField(max_length=63, help_text="Slug of one of your teams.")
    flavor = serializers.CharField(max_length=50, help_text="Slug of an active flavor.")
    gpus = serializers.IntegerField(help_text="At least 1, at most the flavor's capacity.")
    starts_at = AwareDateTimeField(
        help_text="ISO 8601 with an offset (Z or +hh:mm); timestamps without one are refused. "
        "At most a few minutes in the past."
    )
    ends_at = AwareDateTimeField(
        allow_null=True,
        help_text="After starts_at; null for an open-ended request. Required, so that an "
        "open-ended reservation is always deliberate. The period is [starts_at, ends_at).",
    )
    justification = serializers.CharField(max_length=MAX_TEXT_LENGTH, validators=[validate_visible])

    def validate_team(self, slug):
        user = self.context["request"].user
        # Teams the caller cannot see are reported as unknown: their existence
        # is no more disclosed here than by GET teams/{slug}/.
        team = access.teams_for(user).filter(slug=slug).first()
        if team is None:
            raise serializers.ValidationError(
                f"Unknown team {slug!r}, or you are not one of its members."
            )
        return team

    def validate_flavor(self, slug):
        # Inactive flavors are found here and refused by the action, which says why.
        flavor = Flavor.objects.filter(slug=slug).first()
        if flavor is None:
            raise serializers.ValidationError(f"There is no flavor {slug!r}.")
        return flavor


class AuditEventSerializer(serializers.ModelSerializer):
    actor = serializers.SlugRelatedField(
        slug_field="username",
        read_only=True,
        allow_null=True,
        help_text="Null when the system acted.",
    )

    class Meta:
        model = AuditEvent
        fields = ["action", "from_status", "to_status", "actor", "reason", "created_at"]


class QuotaRequestSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    flavor = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    flavor_name = serializers.CharField(source="flavor.name", read_only=True)
    resource_name = serializers.CharField(source="flavor.resource_name", read_only=True)
    requested_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = QuotaRequest
        fields = [
            "id",
            "team",
            "flavor",
            "flavor_name",
            "resource_name",
            "gpus",
            "starts_at",
            "ends_at",
            "justification",
            "status",
            "estimated_cost",
            "requested_by",
            "created_at",
        ]
        read_only_fields = fields


class QuotaRequestDetailSerializer(QuotaRequestSerializer):
    events = AuditEventSerializer(many=True, read_only=True, help_text="Oldest first.")

    class Meta(QuotaRequestSerializer.Meta):
        fields = [*QuotaRequestSerializer.Meta.fields, "events"]
        read_only_fields = fields


class CapacityErrorSerializer(ErrorSerializer):
    """Either kind of 409 of an approval: a status conflict has only `detail`;
    a capacity conflict has the other fields too."""

    flavor = serializers.CharField(required=False, help_text="Slug of the flavor that is full.")
    peak = serializers.IntegerField(
        required=False, help_text="GPUs already reserved at the busiest moment."
    )
    capacity = serializers.IntegerField(required=False)
    requested = serializers.IntegerField(required=False)
