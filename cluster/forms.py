"""Form fields over the GPU catalog, for every feature's forms."""

from django import forms
from django.conf import settings

from cluster.capacity import capacity_of


class FlavorChoiceField(forms.ModelChoiceField):
    """A flavor, offered with its price and what the cluster has of it."""

    def label_from_instance(self, flavor):
        return (
            f"{flavor.name} · {flavor.price_per_gpu_hour.normalize():f} "
            f"{settings.PORTAL_CURRENCY}/GPU-hour · {capacity_of(flavor)} in the cluster"
        )
