"""Write the Grafana dashboard of idle GPUs (billing/grafana.py) as JSON."""

import json

from django.core.management.base import BaseCommand

from billing import grafana


class Command(BaseCommand):
    help = "Print the Grafana dashboard JSON (deploy/grafana/gpu-idle.json is its output)."

    def handle(self, *args, **options):
        self.stdout.write(json.dumps(grafana.dashboard(), indent=2, sort_keys=True))
