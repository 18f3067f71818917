"""/api/v1/clusters/: everyone signed in sees where each cluster is and how it
answered; platform admins also see, add, change and remove how it is reached."""

from django.db.models import ProtectedError
from django.forms.models import model_to_dict
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers, viewsets

from cluster.models import Cluster
from teams import access, errors
from teams.api import APIViewSetMixin, ReviewersWrite
from teams.schema import ERROR_403, ERROR_404, ERROR_409

STATE = ["state", *Cluster.OBSERVED]


class ClusterSerializer(serializers.ModelSerializer):
    state = serializers.ChoiceField(
        choices=["unknown", "reachable", "unreachable"],
        read_only=True,
        help_text="How the cluster answered the last inventory.",
    )

    class Meta:
        model = Cluster
        fields = ["slug", "name", "region", *STATE]
        read_only_fields = STATE


class ClusterAdminSerializer(ClusterSerializer):
    class Meta(ClusterSerializer.Meta):
        fields = [*ClusterSerializer.Meta.fields, "kubeconfig", "context", "prometheus_url",
                  "prometheus_label"]  # fmt: skip

    def to_internal_value(self, data):
        """Texts are JSON strings: DRF would take 0 for "0"."""
        if isinstance(data, dict):
            texts = [
                n
                for n, f in self.fields.items()
                if isinstance(f, serializers.CharField) and not f.read_only
            ]
            wrong = {
                n: ["Not a valid string."]
                for n in texts
                if n in data and not isinstance(data[n], str)
            }
            if wrong:
                raise serializers.ValidationError(wrong)
        return super().to_internal_value(data)

    def validate(self, attrs):
        """The model's own rules (the default cluster's), as a 400 naming the field."""
        entry = Cluster(**{**model_to_dict(self.instance or Cluster()), **attrs})
        entry.pk = getattr(self.instance, "pk", None)
        entry.clean()
        return attrs


@extend_schema_view(
    destroy=extend_schema(responses={204: None, 403: ERROR_403, 404: ERROR_404, 409: ERROR_409})
)
class ClusterViewSet(APIViewSetMixin, viewsets.ModelViewSet):
    """The clusters the portal serves. Everyone reads; platform admins write."""

    queryset = Cluster.objects.all()
    lookup_field = "slug"
    permission_classes = [ReviewersWrite]
    write_denied = "Only platform admins can change clusters."
    http_method_names = ["get", "post", "put", "patch", "delete", "head", "options"]

    def get_serializer_class(self):
        if access.can_review(self.request.user):
            return ClusterAdminSerializer
        return ClusterSerializer

    def perform_destroy(self, instance):
        try:
            instance.delete()
        except ProtectedError:
            flavors = ", ".join(instance.flavors.values_list("slug", flat=True))
            raise errors.ActionError(
                f"Flavors belong to cluster {instance.slug} ({flavors}): move or delete them first."
            ) from None
