"""What the database wants on the cluster, per team: the desired state.

Computed in a fixed number of queries for one team or for all of them, so the
sweep can compare every team's desired state with what was last synced.
"""

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property

from django.conf import settings
from django.db.models import Q, Sum
from django.urls import reverse

from cluster.devices import is_dra_quota_resource
from cluster.models import Cluster, Flavor
from gpu_requests.models import QuotaRequest
from provisioning import manifests, policies
from teams import hooks
from teams.models import Membership, Team
from teams.namespaces import namespace_of

# The flavors whose quota provisioning writes: the default cluster's, the one the
# portal's settings reach. (Several clusters: docs/clusters.md says what serves them.)
SERVED = Q(cluster__slug=Cluster.DEFAULT)


@dataclass
class Desired:
    team_id: int
    slug: str
    gpus_by_resource: dict = field(default_factory=dict)
    # What the team holds of each flavor now ({slug: GPUs}), and the catalog's
    # flavors the admission policies tell apart (provisioning.policies).
    held_by_flavor: dict = field(default_factory=dict)
    flavors: list = field(default_factory=list)  # policies.PolicyFlavor of the served ones
    user_names: list = field(default_factory=list)
    archived: bool = False
    namespace_deleted: bool = False
    # While a hard budget holds the namespace (hooks.on_quota_cap): the GPUs it may hold.
    cap_by_resource: dict | None = None

    def subjects(self):
        if settings.PORTAL_RBAC_SUBJECTS == "users":
            return manifests.user_subjects(
                settings.PORTAL_RBAC_USER_PREFIX + name for name in self.user_names
            )
        return manifests.group_subjects(
            [settings.PORTAL_RBAC_GROUP_TEMPLATE.format(slug=self.slug)]
        )

    @cached_property
    def served(self):
        return {f.slug for f in self.flavors}

    @property
    def policy_flavors(self):
        """The flavors the admission policies tell apart: those held by node (not DRA)."""
        return [f for f in self.flavors if not is_dra_quota_resource(f.resource_name)]

    @property
    def namespace(self):
        return namespace_of(self.slug)

    def objects(self):
        """The team's objects, or none once its namespace was deleted on purpose."""
        if self.namespace_deleted:
            return []
        prefix = settings.PORTAL_NAMESPACE_PREFIX
        holdings = policies.holdings_annotations(self.policy_flavors, self.held_by_flavor)
        objects = manifests.team_objects(
            team_slug=self.slug,
            prefix=prefix,
            gpus_by_resource=self.gpus_by_resource,
            subjects=self.subjects(),
            cluster_role=settings.PORTAL_RBAC_CLUSTER_ROLE,
            namespace_labels=settings.PORTAL_NAMESPACE_LABELS,
            namespace_annotations=settings.PORTAL_NAMESPACE_ANNOTATIONS,
            quota_annotations=holdings,
        )
        request_url = settings.PORTAL_BASE_URL.rstrip("/") + reverse("request_new")
        objects += policies.team_policies(
            self.policy_flavors, self.slug, prefix, request_url=request_url
        )
        return self._capped(objects)

    def _capped(self, objects):
        """With the budget's quota last, while a cap holds the namespace."""
        if self.cap_by_resource is None:
            return objects
        return [*objects, manifests.budget_quota(self.namespace, self.slug, self.cap_by_resource)]

    def digest(self):
        return digest(self.objects())


def object_key(obj):
    return f"{obj['kind']}/{obj['metadata']['name']}"


def object_hash(obj):
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


def digest(objects, hashes=None):
    """One hash for a team's objects; `hashes` {object_key: object_hash} when
    they are at hand (a sync has just computed them)."""
    hashes = hashes or {}
    listed = [hashes.get(object_key(o)) or object_hash(o) for o in objects]
    return hashlib.sha256(json.dumps(listed).encode()).hexdigest()[:32]


def catalog():
    """(every resource name of the served catalog, its flavors): one query.

    A quota caps only the keys it lists, so each team's quota lists them all:
    at zero unless the team holds active quota for it. Without that, a team
    granted MIG slices could run any number of whole GPUs.
    """
    rows = Flavor.objects.filter(SERVED).values_list(
        "slug", "name", "resource_name", "node_selector"
    )
    flavors = [policies.PolicyFlavor.of(*row) for row in rows.order_by("slug")]
    resources = sorted({f.resource_name for f in flavors})
    return resources, flavors


def _add_extra_quota(states):
    """Add what other apps hold in the namespaces (hooks.on_extra_quota), archived teams aside."""
    live = [team_id for team_id, state in states.items() if not state.archived]
    for team_id, held in hooks.extra_holdings(live).items():
        state = states[team_id]
        for (flavor, resource), count in held.items():
            if flavor not in state.served:
                continue  # another cluster's flavor
            state.gpus_by_resource[resource] = state.gpus_by_resource.get(resource, 0) + count
            state.held_by_flavor[flavor] = state.held_by_flavor.get(flavor, 0) + count


def _hold(state, row):
    """Add an active-quota row (a flavor's GPUs) to the team's quota and holdings."""
    resource = row["flavor__resource_name"]
    state.gpus_by_resource[resource] = state.gpus_by_resource.get(resource, 0) + row["gpus"]
    state.held_by_flavor[row["flavor__slug"]] = row["gpus"]


def _add_quota_cap(states):
    """Cap the namespaces some app holds (hooks.on_quota_cap: a spent hard budget) at
    what it says, never above the quota itself. Archived teams are at zero already."""
    live = [team_id for team_id, state in states.items() if not state.archived]
    for team_id, cap in hooks.quota_caps(live).items():
        state = states[team_id]
        state.cap_by_resource = {
            resource: min(gpus, cap.get(resource, 0))
            for resource, gpus in state.gpus_by_resource.items()
        }


def desired_states(team_ids=None):
    """{team_id: Desired}. Four queries (five in users mode), however many teams, and
    what the registered providers of extra quota and caps ask."""
    from provisioning.models import TeamSync

    teams = Team.objects.all()
    if team_ids is not None:
        teams = teams.filter(pk__in=team_ids)
    resources, flavors = catalog()
    states = {
        team_id: Desired(
            team_id,
            slug,
            gpus_by_resource=dict.fromkeys(resources, 0),
            flavors=flavors,
            archived=archived_at is not None,
        )
        for team_id, slug, archived_at in teams.values_list("pk", "slug", "archived_at")
    }
    # Active quota summed per resource name: flavors sharing one name share one
    # cap. An archived team's cap stays at zero.
    active = QuotaRequest.objects.filter(
        status=QuotaRequest.Status.ACTIVE,
        team__archived_at=None,
        flavor__cluster__slug=Cluster.DEFAULT,
    )
    if team_ids is not None:
        active = active.filter(team_id__in=list(states))
    rows = active.values("team_id", "flavor__slug", "flavor__resource_name")
    for row in rows.annotate(gpus=Sum("gpus")).order_by():
        _hold(states[row["team_id"]], row)
    _add_extra_quota(states)
    _add_quota_cap(states)

    deleted = TeamSync.objects.filter(team_id__in=states, namespace_deleted_at__isnull=False)
    for team_id in deleted.values_list("team_id", flat=True):
        states[team_id].namespace_deleted = True

    if settings.PORTAL_RBAC_SUBJECTS == "users":
        members = Membership.objects.filter(team_id__in=states, user__is_active=True)
        for team_id, username in members.values_list("team_id", "user__username"):
            if not states[team_id].archived:
                states[team_id].user_names.append(username)
    return states


def desired_state(team_id, row=None):
    """One team's desired state; with its TeamSync `row` (team selected), two
    queries in group mode (three in users mode)."""
    if row is None:
        return desired_states([team_id])[team_id]
    resources, flavors = catalog()
    state = Desired(
        team_id,
        row.team.slug,
        gpus_by_resource=dict.fromkeys(resources, 0),
        flavors=flavors,
    )
    state.archived = row.team.archived_at is not None
    state.namespace_deleted = row.namespace_deleted_at is not None
    active = (
        QuotaRequest.objects.filter(team_id=team_id, status=QuotaRequest.Status.ACTIVE)
        .filter(flavor__cluster__slug=Cluster.DEFAULT)
        .values("flavor__slug", "flavor__resource_name")
        .annotate(gpus=Sum("gpus"))
        .order_by()
    )
    if not state.archived:
        for item in active:
            _hold(state, item)
        _add_extra_quota({team_id: state})
        _add_quota_cap({team_id: state})
    if settings.PORTAL_RBAC_SUBJECTS == "users" and not state.archived:
        members = Membership.objects.filter(team_id=team_id, user__is_active=True)
        state.user_names = list(members.values_list("user__username", flat=True))
    return state
