"""Demo data for DRA, on a cluster that serves it (`make demo CLUSTER=kubernetes`,
whose control plane publishes the demo cluster file's draPools): an H100 flavor
held by DRA, a month of it approved for vision, and the team's example (a
ResourceClaimTemplate and a Job) written as YAML for the demo to apply.

Run after seed_demo. Idempotent.
"""

from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import yaml
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

from cluster.inventory import GPU_TAINT
from cluster.models import Flavor
from gpu_requests import actions
from gpu_requests.models import QuotaRequest
from provisioning.manifests import example_dra_job
from teams.models import Team
from teams.namespaces import namespace_of

SLUG = "h100-dra"
SELECTOR = 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"'


class Command(BaseCommand):
    help = "Seed a DRA flavor, a quota of it and the team's example (after seed_demo)."

    def add_arguments(self, parser):
        parser.add_argument("--example", help="write the team's example here (YAML)")

    @transaction.atomic
    def handle(self, *args, **options):
        flavor = Flavor.objects.filter(slug=SLUG).first() or Flavor(slug=SLUG)
        flavor.name = "H100 80GB (DRA)"
        flavor.gpu_model = "NVIDIA H100 80GB HBM3"
        flavor.memory_gb = 80
        flavor.device_class = "gpu.nvidia.com"
        flavor.device_selector = SELECTOR
        flavor.tolerations = GPU_TAINT
        flavor.capacity = max(flavor.capacity or 0, 4)  # the inventory counts it soon
        flavor.price_per_gpu_hour = Decimal("4.2000")
        flavor.full_clean()  # as the admin's form: the resource name is the class's key
        flavor.save()
        team = Team.objects.get(slug="vision")
        if not QuotaRequest.objects.filter(team=team, flavor=flavor).exists():
            now = timezone.now().replace(second=0, microsecond=0)
            request = actions.submit(
                team=team,
                flavor=flavor,
                gpus=2,
                starts_at=now,
                ends_at=now + timedelta(days=30),
                justification="Trying the DRA pool: devices picked by attribute, not by node.",
                by=get_user_model().objects.get(username="alice"),
            )
            actions.approve(request, by=get_user_model().objects.get(username="admin"))
        if options["example"]:
            example = example_dra_job(
                namespace=namespace_of(team.slug),
                flavor_slug=flavor.slug,
                device_class=flavor.device_class,
                device_selector=flavor.device_selector,
                tolerations=flavor.tolerations,
            )
            Path(options["example"]).write_text(yaml.safe_dump_all(example, sort_keys=False))
        self.stdout.write(f"DRA flavor {flavor.slug}: 2 approved for {team.name}.")
