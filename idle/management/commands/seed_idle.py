"""Demo data for idle policies: a short policy (in act mode) on vision's MIG
flavor, and the notebook Deployment that breaks it, written as YAML for the
demo to apply once the team's quota is on the cluster: one 3g.40gb slice it
never uses (kubesim's `idle` GPU profile). Within the demo's first minutes the
notebook is announced, then scaled to zero; its report card shows it and
offers "Bring it back".

Run after seed_demo. Idempotent.
"""

from pathlib import Path

import yaml
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from cluster.inventory import GPU_TAINT
from cluster.models import Flavor
from idle import actions
from idle.models import Mode
from provisioning.manifests import CONTAINER_SECURITY, POD_SECURITY
from teams.namespaces import namespace_of

FLAVOR = "a100-3g40"  # vision's running request (seed_demo)
TEAM = "vision"
NAME = "notebook"
IDLE_MINUTES, GRACE_MINUTES = 1, 2


def notebook(flavor, namespace):
    """An idle notebook Deployment on one GPU of `flavor`."""
    labels = {"app": NAME}
    gpu = {flavor.resource_name: "1"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": NAME, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {
                    "labels": labels,
                    # kubesim: a container that keeps running and never touches its GPU.
                    "annotations": {"kubesim.io/duration": "30d", "kubesim.io/gpu-profile": "idle"},
                },
                "spec": {
                    "securityContext": {**POD_SECURITY, "runAsUser": 1000},
                    "nodeSelector": dict(flavor.node_selector),
                    "tolerations": [dict(t) for t in flavor.tolerations or GPU_TAINT],
                    "containers": [
                        {
                            "name": "jupyter",
                            "image": "quay.io/jupyter/base-notebook:2025-01-06",
                            "resources": {"limits": gpu},
                            "securityContext": CONTAINER_SECURITY,
                        }
                    ],
                },
            },
        },
    }


class Command(BaseCommand):
    help = "Seed the demo's idle policy and its idle notebook (after seed_demo)."

    def add_arguments(self, parser):
        parser.add_argument("--notebook", help="write the idle notebook Deployment here (YAML)")

    def handle(self, *args, **options):
        flavor = Flavor.objects.get(slug=FLAVOR)
        admin = get_user_model().objects.get(username="admin")
        # Audited as the admin setting it; unchanged on a second run.
        actions.set_policy(
            flavor,
            None,
            by=admin,
            idle_minutes=IDLE_MINUTES,
            grace_minutes=GRACE_MINUTES,
            mode=Mode.ACT,
        )
        if options["notebook"]:
            manifest = notebook(flavor, namespace_of(TEAM))
            Path(options["notebook"]).write_text(yaml.safe_dump(manifest, sort_keys=False))
        self.stdout.write(
            f"Idle policy on {flavor.slug}: {IDLE_MINUTES} min idle, {GRACE_MINUTES} min grace, "
            "act."
        )
