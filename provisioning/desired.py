"""What the database wants on the cluster, per team: the desired state.

Computed in a fixed number of queries for one team or for all of them, so the
sweep can compare every team's desired state with what was last synced.
"""

import hashlib
import json
from dataclasses import dataclass, field

from django.conf import settings
from django.db.models import Q, Sum
from django.utils import timezone

from gpu_requests.models import Flavor, Membership, QuotaRequest, Team
from provisioning import manifests

NOT_GRANTED = [
    QuotaRequest.Status.PENDING,
    QuotaRequest.Status.REJECTED,
    QuotaRequest.Status.CANCELLED,
]


@dataclass
class Desired:
    team_id: int
    slug: str
    gpus_by_resource: dict = field(default_factory=dict)
    user_names: list = field(default_factory=list)
    archived: bool = False
    namespace_deleted: bool = False

    def subjects(self):
        if settings.PORTAL_RBAC_SUBJECTS == "users":
            return manifests.user_subjects(
                settings.PORTAL_RBAC_USER_PREFIX + name for name in self.user_names
            )
        return manifests.group_subjects(
            [settings.PORTAL_RBAC_GROUP_TEMPLATE.format(slug=self.slug)]
        )

    @property
    def namespace(self):
        return manifests.namespace_name(self.slug, settings.PORTAL_NAMESPACE_PREFIX)

    def objects(self):
        """The team's objects, or none once its namespace was deleted on purpose."""
        if self.namespace_deleted:
            return []
        return manifests.team_objects(
            team_slug=self.slug,
            prefix=settings.PORTAL_NAMESPACE_PREFIX,
            gpus_by_resource=self.gpus_by_resource,
            subjects=self.subjects(),
            cluster_role=settings.PORTAL_RBAC_CLUSTER_ROLE,
        )

    def digest(self):
        return digest(self.objects())


def object_key(obj):
    return f"{obj['kind']}/{obj['metadata']['name']}"


def object_hash(obj):
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


def digest(objects):
    return hashlib.sha256(json.dumps([object_hash(o) for o in objects]).encode()).hexdigest()[:32]


def desired_states(team_ids=None, now=None):
    """{team_id: Desired}. Three queries (four in users mode), however many teams.

    A resource name keeps its key at zero once every request for it ended, so
    the cap stays explicit: the keys are every resource the team ever had quota
    for (any request that reached approval), the values what is active now.
    """
    from provisioning.models import TeamSync

    now = now or timezone.now()
    teams = Team.objects.all()
    if team_ids is not None:
        teams = teams.filter(pk__in=team_ids)
    states = {team_id: Desired(team_id, slug) for team_id, slug in teams.values_list("pk", "slug")}
    ids = list(states) if team_ids is not None else None

    granted = QuotaRequest.objects.exclude(status__in=NOT_GRANTED)
    if ids is not None:
        granted = granted.filter(team_id__in=ids)
    # Every resource name the team has been granted, each starting at zero.
    for team_id, resource in granted.values_list("team_id", "flavor__resource_name").distinct():
        states[team_id].gpus_by_resource[resource] = 0
    # Active quota summed per resource name: flavors sharing one name share one cap.
    active = granted.filter(status=QuotaRequest.Status.ACTIVE)
    for row in active.values("team_id", "flavor__resource_name").annotate(gpus=Sum("gpus")):
        states[row["team_id"]].gpus_by_resource[row["flavor__resource_name"]] = row["gpus"]

    flags = TeamSync.objects.filter(team_id__in=states).values_list(
        "team_id", "archived_at", "namespace_deleted_at"
    )
    for team_id, archived_at, deleted_at in flags:
        state = states[team_id]
        state.archived = archived_at is not None
        state.namespace_deleted = deleted_at is not None
        if state.archived:
            state.gpus_by_resource = dict.fromkeys(state.gpus_by_resource, 0)

    if settings.PORTAL_RBAC_SUBJECTS == "users":
        members = Membership.objects.filter(team_id__in=states, user__is_active=True)
        for team_id, username in members.values_list("team_id", "user__username"):
            if not states[team_id].archived:
                states[team_id].user_names.append(username)
    return states


def desired_state(team_id, row=None):
    """One team's desired state; with its TeamSync `row` (team selected), one query
    in group mode (two in users mode)."""
    if row is None:
        return desired_states([team_id])[team_id]
    state = Desired(team_id, row.team.slug)
    state.archived = row.archived_at is not None
    state.namespace_deleted = row.namespace_deleted_at is not None
    active = Sum("gpus", filter=Q(status=QuotaRequest.Status.ACTIVE), default=0)
    granted = (
        QuotaRequest.objects.filter(team_id=team_id)
        .exclude(status__in=NOT_GRANTED)
        .values("flavor__resource_name")
        .annotate(gpus=active)
        .order_by()
    )
    for item in granted:
        gpus = 0 if state.archived else item["gpus"]
        state.gpus_by_resource[item["flavor__resource_name"]] = gpus
    if settings.PORTAL_RBAC_SUBJECTS == "users" and not state.archived:
        members = Membership.objects.filter(team_id=team_id, user__is_active=True)
        state.user_names = list(members.values_list("user__username", flat=True))
    return state


def shared_resource_names(flavors=None):
    """{resource name: [flavor names]} for names more than one active flavor uses."""
    flavors = flavors if flavors is not None else Flavor.objects.filter(is_active=True)
    by_resource = {}
    for flavor in flavors:
        by_resource.setdefault(flavor.resource_name, []).append(flavor.name)
    return {name: sorted(f) for name, f in by_resource.items() if len(f) > 1}
