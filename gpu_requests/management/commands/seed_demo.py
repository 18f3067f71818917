"""Demo data: users, teams, the GPU catalog and requests in every state.

Idempotent: users, teams and flavors are updated in place; requests are only
made when the demo teams have none, and always through the actions, so the
audit history reads as if people had clicked through the portal.
"""

from datetime import timedelta
from decimal import Decimal

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

from cluster.inventory import GPU_TAINT
from cluster.models import Flavor
from gpu_requests import actions
from gpu_requests.models import QuotaRequest
from teams import access
from teams.models import Membership, Team

# Node selectors match the GPU Operator labels of kubesim's demo cluster.
CATALOG = [
    # slug, name, model, memory GB, sharing, resource name, selector, capacity, price
    (
        "h100",
        "H100 80GB",
        "NVIDIA H100 80GB HBM3",
        80,
        "whole",
        "nvidia.com/gpu",
        {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        16,
        "4.2000",
    ),
    (
        "a100",
        "A100 80GB",
        "NVIDIA A100-SXM4-80GB",
        80,
        "whole",
        "nvidia.com/gpu",
        {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/mig.strategy": "none"},
        16,
        "2.6000",
    ),
    (
        "l4",
        "L4 24GB",
        "NVIDIA L4",
        24,
        "whole",
        "nvidia.com/gpu",
        {"nvidia.com/gpu.product": "NVIDIA-L4"},
        24,
        "0.8000",
    ),
    (
        "t4",
        "T4 16GB",
        "Tesla T4",
        16,
        "whole",
        "nvidia.com/gpu",
        {"nvidia.com/gpu.product": "Tesla-T4"},
        8,
        "0.3500",
    ),
    (
        "a100-3g40",
        "A100 MIG 3g.40gb",
        "NVIDIA A100-SXM4-80GB MIG 3g.40gb",
        40,
        "mig",
        "nvidia.com/mig-3g.40gb",
        {"nvidia.com/mig.config": "all-3g.40gb"},
        14,
        "1.3000",
    ),
    (
        "a100-1g10",
        "A100 MIG 1g.10gb",
        "NVIDIA A100-SXM4-80GB MIG 1g.10gb",
        10,
        "mig",
        "nvidia.com/mig-1g.10gb",
        {"nvidia.com/mig.config": "all-1g.10gb"},
        28,
        "0.4000",
    ),
]

USERS = [
    # username, first name, staff, team slug, role
    ("admin", "Ada (platform)", True, None, None),
    ("alice", "Alice", False, "vision", Membership.Role.MEMBER),
    ("carol", "Carol", False, "vision", Membership.Role.MANAGER),
    ("bob", "Bob", False, "nlp", Membership.Role.MEMBER),
    ("dave", "Dave", False, "speech", Membership.Role.MANAGER),
]


# Days of the demo's metering history (billing.demo.HISTORY_DAYS, which this app may
# not import: billing sits beside it) and one more for its first, partial day.
HISTORY_DAYS = 31


def _backdate(quota_request, start):
    """Make `quota_request` (approved now, starting now) as asked for and approved on
    `start`, from then on: its start, its row's times and its events'. Demo history
    only: the actions refuse a start in the past, as they should."""
    moved = {"created_at": start, "updated_at": start}
    QuotaRequest.objects.filter(pk=quota_request.pk).update(starts_at=start, **moved)
    quota_request.events.update(created_at=start)


class Command(BaseCommand):
    help = "Load the demo users, teams, GPU catalog and quota requests (safe to run twice)."

    @transaction.atomic
    def handle(self, *args, **options):
        teams = {
            slug: Team.objects.update_or_create(slug=slug, defaults={"name": name})[0]
            for slug, name in [("vision", "Vision"), ("nlp", "NLP"), ("speech", "Speech")]
        }
        for slug, name, model, memory, sharing, resource, selector, capacity, price in CATALOG:
            Flavor.objects.update_or_create(
                slug=slug,
                defaults={
                    "name": name,
                    "gpu_model": model,
                    "memory_gb": memory,
                    "sharing": sharing,
                    "resource_name": resource,
                    "node_selector": selector,
                    "tolerations": GPU_TAINT,
                    "capacity": capacity,
                    "price_per_gpu_hour": Decimal(price),
                },
            )
        users = {}
        review = access.review_permission()
        for username, first_name, staff, team_slug, role in USERS:
            user, created = get_user_model().objects.get_or_create(
                username=username,
                defaults={"first_name": first_name, "email": f"{username}@example.com"},
            )
            if created:
                user.set_password("demo")
            user.is_staff = user.is_superuser = staff
            user.save()
            if staff:
                user.user_permissions.add(review)
            if team_slug:
                Membership.objects.update_or_create(
                    team=teams[team_slug], user=user, defaults={"role": role}
                )
            users[username] = get_user_model().objects.get(pk=user.pk)

        if QuotaRequest.objects.filter(team__in=teams.values()).exists():
            self.stdout.write("Demo data is up to date (requests already present).")
            return
        self._requests(teams, users)
        self.stdout.write(self.style.SUCCESS("Demo data loaded."))

    def _requests(self, teams, users):
        flavors = {flavor.slug: flavor for flavor in Flavor.objects.all()}
        now = timezone.now().replace(second=0, microsecond=0)
        day = timedelta(days=1)
        next_monday = (now + timedelta(days=7 - now.weekday())).replace(hour=8, minute=0)

        def ask(team, user, flavor, gpus, start, end, why):
            return actions.submit(
                team=teams[team],
                flavor=flavors[flavor],
                gpus=gpus,
                starts_at=start,
                ends_at=end,
                justification=why,
                by=users[user],
            )

        admin = users["admin"]
        # Active: started now, runs for a month.
        running = ask(
            "vision",
            "alice",
            "a100-3g40",
            4,
            now,
            now + 30 * day,
            "Fine-tuning the detection model on the new street-scene set.",
        )
        actions.approve(running, by=admin, reason="Fits; MIG slices are plenty for this.")
        # Held and never used, through the whole month of demo history (billing.demo
        # loads HISTORY_DAYS before the demo's start, from midnight): the dashboard's and
        # the Spend page's "quota nobody uses", on whatever day the demo starts.
        idle_reservation = ask(
            "speech",
            "dave",
            "l4",
            4,
            now,
            now + 30 * day,
            "ASR retraining (the data collection slipped; the quota was kept just in case).",
        )
        actions.approve(idle_reservation, by=admin)
        _backdate(idle_reservation, (now - HISTORY_DAYS * day).replace(hour=0, minute=0))
        # Approved, starting next week.
        upcoming = ask(
            "vision",
            "carol",
            "h100",
            4,
            next_monday,
            next_monday + 5 * day,
            "Pre-training run for the v3 backbone.",
        )
        actions.approve(upcoming, by=admin)
        # Expired: a short evaluation that has ended.
        done = ask(
            "nlp",
            "bob",
            "t4",
            2,
            now,
            now + timedelta(hours=2),
            "Evaluation sweep of the summariser.",
        )
        actions.approve(done, by=admin)
        actions.expire(done)
        # Pending, waiting for a reviewer.
        ask(
            "nlp",
            "bob",
            "a100",
            8,
            next_monday,
            next_monday + 3 * day,
            "Distillation of the 70B model into the 8B student.",
        )
        ask(
            "vision",
            "alice",
            "l4",
            2,
            now + day,
            None,
            "Always-on inference for the labelling tool.",
        )
        # Rejected, cancelled and revoked.
        too_big = ask(
            "nlp",
            "bob",
            "h100",
            16,
            now + 2 * day,
            now + 16 * day,
            "Full-cluster hyper-parameter search.",
        )
        actions.reject(too_big, by=admin, reason="The whole H100 pool for two weeks: split it up.")
        dropped = ask("vision", "alice", "t4", 1, now + day, now + 2 * day, "Quick notebook test.")
        actions.cancel(dropped, by=users["alice"], reason="Ran it on my laptop instead.")
        revoked = ask(
            "vision",
            "carol",
            "a100-1g10",
            7,
            now,
            now + 14 * day,
            "Student projects for the reading group.",
        )
        actions.approve(revoked, by=admin)
        actions.revoke(revoked, by=admin, reason="Needed for an incident; ask again next week.")
