from decimal import Decimal

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models
from django.db.models import F, Q, Value
from django.db.models.functions import Concat
from django.utils import timezone

from cluster import devices
from teams.inputs import validate_one_line
from teams.models import Team, register_audit_actions


class CapacityAction(models.TextChoices):
    """A flavor's capacity changed (cluster.capacity.change_capacity)."""

    CHANGE_CAPACITY = "change_capacity", "Capacity changed"


register_audit_actions(CapacityAction)

# Extended resource names as the device plugins publish them.
resource_name_validator = RegexValidator(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$",
    "Not a Kubernetes resource name, e.g. nvidia.com/gpu or nvidia.com/mig-1g.10gb.",
)
# DeviceClass names: DNS subdomains, as Kubernetes validates object names.
device_class_validator = RegexValidator(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
    "Not a DeviceClass name: lowercase letters, digits, '-' and '.', e.g. gpu.nvidia.com.",
)


class Cluster(models.Model):
    """A Kubernetes cluster the portal serves: how to reach its API server and its
    metrics, and what the inventory last found there (`cluster.actions.record_inventory`).

    Flavors belong to one; a request names a flavor, so it names a cluster. An
    installation made before there were several has one, `default`, reached
    through the portal's own settings (PORTAL_KUBECONFIG and friends)."""

    DEFAULT = "default"
    # What the inventory records of it (besides `reachable`), read-only everywhere.
    OBSERVED = [
        "checked_at",
        "inventory_at",
        "version",
        "serves_dra",
        "serves_admission_policies",
        "problem",
    ]

    name = models.CharField(max_length=100, unique=True, validators=[validate_one_line])
    slug = models.SlugField(max_length=50, unique=True)
    region = models.CharField(max_length=100, blank=True, validators=[validate_one_line])
    kubeconfig = models.CharField(
        max_length=1000,
        blank=True,
        validators=[validate_one_line],
        help_text="Path of a kubeconfig file on the portal's hosts (e.g. a Secret mounted "
        "into its pods). Empty: the portal's own settings (PORTAL_KUBECONFIG, $KUBECONFIG, "
        "then in-cluster).",
    )
    context = models.CharField(
        max_length=253,
        blank=True,
        validators=[validate_one_line],
        help_text="The kubeconfig's context to use. Empty: its current context.",
    )
    prometheus_url = models.URLField(
        "Prometheus URL", blank=True, help_text="Empty: the portal's (PORTAL_PROMETHEUS_URL)."
    )
    prometheus_label = models.CharField(
        max_length=253,
        blank=True,
        validators=[validate_one_line],
        help_text="In a Prometheus shared by several clusters, the value of the `cluster` "
        "label on this one's series. Empty: its series carry none.",
    )
    # What the last inventory found (null: not looked yet).
    reachable = models.BooleanField(null=True)
    checked_at = models.DateTimeField(null=True, blank=True)
    inventory_at = models.DateTimeField(
        null=True, blank=True, help_text="When its inventory was last recorded whole."
    )
    version = models.CharField(max_length=64, blank=True)
    serves_dra = models.BooleanField(null=True)
    serves_admission_policies = models.BooleanField(null=True)
    problem = models.TextField(blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    def clean(self):
        super().clean()
        if self.pk and self.slug != Cluster.DEFAULT:
            was = Cluster.objects.filter(pk=self.pk).values_list("slug", flat=True).first()
            if was == Cluster.DEFAULT:
                raise ValidationError({"slug": "The default cluster keeps its slug."})
        if self.slug == Cluster.DEFAULT and (self.kubeconfig or self.context):
            raise ValidationError(
                {
                    "kubeconfig": "The default cluster is reached through the portal's "
                    "settings (PORTAL_KUBECONFIG, PORTAL_KUBE_CONTEXT): leave these empty."
                }
            )

    @property
    def label(self):
        """Its name and region, for pages."""
        return f"{self.name} ({self.region})" if self.region else self.name

    @property
    def state(self):
        """In a word, for pages: `unknown`, `reachable` or `unreachable`."""
        return {None: "unknown", True: "reachable", False: "unreachable"}[self.reachable]


def default_cluster():
    """The pk of the cluster a flavor belongs to when none is named: `default`,
    made (reached through the portal's own settings) the first time it is needed.
    Reads only its pk: migrations call it too, on a table of their time."""
    found = Cluster.objects.filter(slug=Cluster.DEFAULT).values_list("pk", flat=True).first()
    if found is not None:
        return found
    return Cluster.objects.get_or_create(slug=Cluster.DEFAULT, defaults={"name": "default"})[0].pk


class Flavor(models.Model):
    """One entry of the GPU catalog: what a team can ask quota for.

    Held one of two ways: an extended resource (`resource_name`, e.g.
    nvidia.com/gpu, on nodes matching `node_selector`), or by Dynamic Resource
    Allocation (`device_class`, optionally narrowed by `device_selector`, CEL
    in the subset of `cluster.devices`). For a DRA flavor `resource_name`
    is the quota key that counts the class's devices
    (`<class>.deviceclass.resource.k8s.io/devices`), so everything keyed by
    resource name (quota, shared-cap notes, usage rows) treats both alike.
    """

    class Sharing(models.TextChoices):
        WHOLE = "whole", "Whole GPU"
        MIG = "mig", "MIG slice"
        TIME_SLICED = "time-sliced", "Time-sliced"

    cluster = models.ForeignKey(
        Cluster,
        on_delete=models.PROTECT,
        related_name="flavors",
        blank=True,  # saved as `default` (save())
        help_text="The cluster its GPUs are in. Empty: the default cluster.",
    )
    name = models.CharField(max_length=100, unique=True, validators=[validate_one_line])
    slug = models.SlugField(max_length=50, unique=True)
    gpu_model = models.CharField(max_length=100, validators=[validate_one_line])
    memory_gb = models.PositiveIntegerField("memory (GB)")
    sharing = models.CharField(max_length=16, choices=Sharing.choices, default=Sharing.WHOLE)
    resource_name = models.CharField(
        max_length=253, default="nvidia.com/gpu", validators=[resource_name_validator]
    )
    node_selector = models.JSONField(default=dict, blank=True)
    tolerations = models.JSONField(default=list, blank=True)
    device_class = models.CharField(
        "DeviceClass",
        max_length=200,
        blank=True,
        validators=[device_class_validator],
        help_text="Set for a DRA flavor (e.g. gpu.nvidia.com); empty for an extended resource.",
    )
    device_selector = models.TextField(
        "device selector (CEL)",
        blank=True,
        help_text=(
            "DRA flavors only: narrows the class's devices, e.g. "
            'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3" && '
            'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0'
        ),
    )
    capacity = models.PositiveIntegerField(help_text="Devices of this flavor in the cluster.")
    price_per_gpu_hour = models.DecimalField(
        max_digits=10, decimal_places=4, validators=[MinValueValidator(Decimal(0))]
    )
    is_active = models.BooleanField(default=True)

    class Meta:
        db_table = "gpu_requests_flavor"  # made by gpu_requests, the catalog's first home
        ordering = ["name"]
        constraints = [
            # A DRA flavor's quota key is its class's: the database refuses any other.
            models.CheckConstraint(
                condition=Q(device_class="")
                | Q(resource_name=Concat(F("device_class"), Value(devices.DRA_QUOTA_SUFFIX))),
                name="dra_flavor_resource_is_its_class",
            ),
            models.CheckConstraint(
                condition=~Q(device_class="") | Q(device_selector=""),
                name="device_selector_needs_a_class",
            ),
        ]

    def __str__(self):
        return self.name

    def save(self, *args, **kwargs):
        # Not a field default: that would read (even create) a cluster whenever a
        # Flavor is built in memory.
        if self.cluster_id is None:
            self.cluster_id = default_cluster()
        super().save(*args, **kwargs)

    @property
    def is_dra(self):
        return bool(self.device_class)

    @property
    def selector_terms(self):
        """The device selector as `devices.Term`s (it was validated when saved)."""
        return devices.parse_selector(self.device_selector)

    @property
    def held_as(self):
        """How pods hold this flavor, in one line for pages."""
        if self.is_dra:
            narrowed = f" where {self.device_selector}" if self.device_selector else ""
            return f"DRA: devices of DeviceClass {self.device_class}{narrowed}"
        selector = ", ".join(f"{k}={v}" for k, v in sorted((self.node_selector or {}).items()))
        return f"Extended resource {self.resource_name}" + (
            f" on nodes labelled {selector}" if selector else ""
        )

    def clean(self):
        super().clean()
        if not self.device_class:
            if self.device_selector:
                raise ValidationError(
                    {"device_selector": "A device selector needs a DeviceClass (a DRA flavor)."}
                )
            if devices.is_dra_quota_resource(self.resource_name or ""):
                raise ValidationError(
                    {"resource_name": "This is a DeviceClass's quota key: set the DeviceClass."}
                )
            return
        if self.node_selector:
            raise ValidationError(
                {
                    "node_selector": "A DRA flavor picks devices, not nodes: leave the node "
                    "selector empty and narrow the devices with the device selector."
                }
            )
        try:
            devices.parse_selector(self.device_selector)
        except devices.SelectorError as exc:
            raise ValidationError({"device_selector": str(exc)}) from None
        self.resource_name = devices.quota_resource(self.device_class)

    def shares_resource_with(self, flavors=None):
        """The other flavors of `flavors` (default: the whole catalog, one query)
        that a single quota key cannot tell apart from this one: its cluster's."""
        flavors = Flavor.objects.all() if flavors is None else flavors
        return [
            f
            for f in flavors
            if f != self
            and (f.cluster_id, f.resource_name) == (self.cluster_id, self.resource_name)
        ]


def shared_resource_names(flavors):
    """[(resource name, [flavors])] for each resource name several of `flavors`
    in one cluster use (a name per cluster that has such flavors).

    A quota caps a resource name, not a flavor: flavors sharing one in a cluster
    share a cap there, and only node selectors keep their jobs apart.
    """
    by_resource = {}
    for flavor in flavors:
        by_resource.setdefault((flavor.cluster_id, flavor.resource_name), []).append(flavor)
    return [(name, group) for (_, name), group in by_resource.items() if len(group) > 1]


class FlavorCapacity(models.Model):
    """What the cluster holds of one flavor, as the inventory task last saw it.

    `override` is the admin's word and wins over the inventory (for capacity the
    cluster does not show yet, or a pool being drained on purpose).
    """

    flavor = models.OneToOneField(
        Flavor, on_delete=models.CASCADE, primary_key=True, related_name="inventory"
    )
    devices = models.PositiveIntegerField(null=True, blank=True)
    allocated = models.PositiveIntegerField(null=True, blank=True)
    # Of `devices` (what can run now), those no pod holds: pods on a cordoned or
    # NotReady node count in `allocated` and free nothing here.
    free = models.PositiveIntegerField(null=True, blank=True)
    observed_at = models.DateTimeField(null=True, blank=True)
    override = models.PositiveIntegerField(
        null=True, blank=True, help_text="Capacity to use instead of the inventory."
    )
    # node -> devices of the flavor there (pages show which nodes' devices match).
    nodes = models.JSONField(default=dict, blank=True)
    # Why the inventory could not count the flavor (a DRA flavor on a cluster
    # without DRA, a missing DeviceClass); "" when it could.
    problem = models.TextField(blank=True)

    class Meta:
        verbose_name_plural = "flavor capacities"

    def __str__(self):
        return f"{self.flavor}: {self.devices} devices"

    @property
    def age(self):
        return None if self.observed_at is None else timezone.now() - self.observed_at


class GpuNode(models.Model):
    """A GPU node as the inventory task last saw it (replaced on every run)."""

    cluster = models.ForeignKey(
        Cluster, on_delete=models.CASCADE, related_name="nodes", default=default_cluster
    )
    name = models.CharField(max_length=253)
    pool = models.CharField(max_length=253, blank=True)
    gpu_model = models.CharField(max_length=253, blank=True)
    allocatable = models.JSONField(default=dict)  # resource name -> devices
    allocated = models.JSONField(default=dict)  # resource name -> devices held by pods
    taints = models.JSONField(default=list)
    cordoned = models.BooleanField(default=False)
    ready = models.BooleanField(default=True)
    # resource name -> devices pods can be given now (none on a cordoned or NotReady
    # node; less the GPUs an XID made unusable): cluster.inventory.healthy_gpus.
    usable = models.JSONField(default=dict)
    # [{gpu, code, meaning}]: XIDs that made its GPUs unusable, from GPU health.
    xids = models.JSONField(default=list, blank=True)
    # The node's labels as the inventory saw them: spot or not, zone, pool.
    labels = models.JSONField(default=dict, blank=True)
    observed_at = models.DateTimeField()

    class Meta:
        ordering = ["pool", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="one_node_per_name")
        ]

    def __str__(self):
        return self.name

    def resources(self):
        """[(resource, allocatable, allocated, free)] for the nodes table: free is of
        what can run (`usable`), none on a cordoned or NotReady node."""
        rows = []
        for resource, total in sorted(self.allocatable.items()):
            used = self.allocated.get(resource, 0)
            rows.append((resource, total, used, max(self.usable.get(resource, 0) - used, 0)))
        return rows

    @property
    def taint_labels(self):
        return [
            f"{t.get('key')}{'=' + t['value'] if t.get('value') else ''}:{t.get('effect')}"
            for t in self.taints
        ]


class NamespaceQuota(models.Model):
    """One GPU resource of a team namespace's ResourceQuota, as the inventory task
    last read it: the cap (`spec.hard`), what the team's pods use of it
    (`status.used`), and the last pod creation it refused (a FailedCreate event).

    Replaced on every run; pages read it through `team.quota_usage` (the reverse
    accessor), so gpu_requests shows it without importing this app.
    """

    cluster = models.ForeignKey(
        Cluster, on_delete=models.CASCADE, related_name="+", default=default_cluster
    )
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="quota_usage")
    resource_name = models.CharField(max_length=253)
    hard = models.PositiveIntegerField()
    used = models.PositiveIntegerField()
    refused_at = models.DateTimeField(null=True, blank=True)
    refused_message = models.TextField(blank=True)
    observed_at = models.DateTimeField()

    class Meta:
        ordering = ["resource_name"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "team", "resource_name"], name="one_quota_row_per_resource"
            )
        ]

    def __str__(self):
        return f"{self.team_id} {self.resource_name}: {self.used}/{self.hard}"

    @property
    def at_limit(self):
        return self.used >= self.hard

    @property
    def refusing(self):
        """At the limit, and the cluster has refused pods for it."""
        return self.at_limit and self.refused_at is not None


class DraAllocation(models.Model):
    """One device a ResourceClaim's allocation gave a pod, as the inventory saw it
    (`status.allocation.devices.results`, the pod from `status.reservedFor`).

    Kept after the claim is gone (updated, never replaced): billing reads which
    pod held which device in past hours from it, instead of trusting the DCGM
    exporter's pod labels. `first_seen`/`last_seen` bound what the inventory saw.
    """

    claim_uid = models.CharField(max_length=64)
    namespace = models.CharField(max_length=63)
    claim = models.CharField(max_length=253)
    pod = models.CharField(max_length=253)
    pod_uid = models.CharField(max_length=64)
    node = models.CharField(max_length=253, blank=True)
    driver = models.CharField(max_length=253)
    pool = models.CharField(max_length=253)
    device = models.CharField(max_length=253)
    flavor = models.ForeignKey(Flavor, on_delete=models.SET_NULL, null=True, related_name="+")
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["claim_uid", "pod_uid", "driver", "pool", "device"],
                name="one_row_per_claimed_device",
            )
        ]
        indexes = [models.Index(fields=["last_seen"])]

    def __str__(self):
        return f"{self.namespace}/{self.pod}: {self.driver}/{self.pool}/{self.device}"
