"""Form fields over the GPU catalog, for every feature's forms."""

from django import forms
from django.conf import settings

from cluster.capacity import capacity_of


class ByCluster(forms.models.ModelChoiceIterator):
    """The flavors under their clusters' names (optgroups) when they are in several."""

    def __iter__(self):
        if self.field.empty_label is not None:
            yield ("", self.field.empty_label)
        groups = {}
        for flavor in self.queryset.select_related("cluster"):
            groups.setdefault(flavor.cluster, []).append(self.choice(flavor))
        if len(groups) == 1:
            yield from next(iter(groups.values()))
            return
        for cluster in sorted(groups, key=lambda c: c.name):
            yield (cluster.label, groups[cluster])


class FlavorChoiceField(forms.ModelChoiceField):
    """A flavor, offered with its price and what the cluster has of it, under its
    cluster's name when the catalog spans several."""

    iterator = ByCluster

    def label_from_instance(self, flavor):
        return (
            f"{flavor.name} · {flavor.price_per_gpu_hour.normalize():f} "
            f"{settings.PORTAL_CURRENCY}/GPU-hour · {capacity_of(flavor)} in the cluster"
        )
