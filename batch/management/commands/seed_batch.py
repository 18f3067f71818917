"""Demo data for batch windows: the image allowlist, a window that opens a few
minutes from now (every day, so a restarted demo has one again), a few jobs,
and the month before made up (batch.history): what `backtest_eta` replays.

Run after seed_demo (teams, users, flavors). Idempotent.
"""

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand
from django.utils import timezone

from batch import actions, history
from batch.models import BatchJob, BatchWindow, ImageRule
from cluster import clock
from cluster.models import Flavor
from teams.models import Team

ALLOWLIST = [
    ("nvcr.io/nvidia/", "NVIDIA NGC"),
    ("docker.io/library/", "Docker Hub official images"),
    ("docker.io/pytorch/", "PyTorch"),
    ("docker.io/tensorflow/", "TensorFlow"),
    ("docker.io/huggingface/", "Hugging Face"),
]
EVERY_DAY = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
JOBS = [
    # user, team, name, GPUs, pods, expected minutes, priority
    ("alice", "vision", "resnet-sweep", 1, 2, 2, 0),
    ("alice", "vision", "eval-detector", 1, 1, 1, 5),
    ("bob", "nlp", "embed-corpus", 2, 1, 2, 0),
]


class Command(BaseCommand):
    help = "Seed batch windows demo data (after seed_demo)."

    def add_arguments(self, parser):
        parser.add_argument("--opens-in", type=int, default=3, help="Minutes until it opens.")
        parser.add_argument(
            "--history",
            choices=[*history.PATTERNS, "none"],
            default="demo",
            help="How the made-up month of past jobs arrived (once; default demo).",
        )

    def handle(self, *args, **options):
        for prefix, note in ALLOWLIST:
            ImageRule.objects.update_or_create(prefix=prefix, defaults={"note": note})
        admin = get_user_model().objects.get(username="admin")
        opens = (timezone.now() + timedelta(minutes=options["opens_in"])).replace(
            second=0, microsecond=0
        )
        flavor = Flavor.objects.get(slug="a100")
        window = BatchWindow.objects.filter(name="Demo window").first()
        fields = {
            "name": "Demo window",
            "timezone": "UTC",
            "days": EVERY_DAY,
            "start_time": opens.time(),
            "end_time": (opens + timedelta(hours=2)).time(),
            "exceptions": [],
            "price_factor": "0.5",
            "spot_allowed": True,
        }
        for gpus in (4, 2, 1):
            try:
                window = actions.save_window(window, by=admin, capacity={flavor: gpus}, **fields)
                break
            except ValidationError as exc:
                self.stderr.write(" ".join(exc.messages))
        if not BatchJob.objects.exists():
            users = get_user_model().objects.in_bulk(field_name="username")
            teams = Team.objects.in_bulk(field_name="slug")
            for username, team, name, gpus, pods, minutes, priority in JOBS:
                actions.submit(
                    by=users[username],
                    team=teams[team],
                    flavor=flavor,
                    name=name,
                    image="docker.io/library/python:3.12-slim",
                    command=["python", "-c", f"import time; time.sleep({minutes * 30})"],
                    args=[],
                    env=[{"name": "PYTHONUNBUFFERED", "value": "1"}],
                    gpus=gpus,
                    parallelism=pods,
                    completions=pods,
                    expected_runtime_minutes=minutes,
                    max_runtime_minutes=minutes * 2,
                    spot_allowed=False,
                    priority=priority,
                    # kubesim runs each pod this long (sim time): within the expected runtime.
                    annotations={"kubesim.io/duration": f"{minutes * 45}s"},
                )
        made_up = BatchJob.objects.filter(name__startswith=history.PREFIX)
        if options["history"] != "none" and not made_up.exists():
            users = get_user_model().objects.in_bulk(field_name="username")
            teams = Team.objects.in_bulk(field_name="slug")
            members = {teams[team].pk: users[user] for user, team, *_ in JOBS}
            count = history.month(options["history"], until=clock.now(), members=members)
            self.stdout.write(f"A month of batch history: {count} jobs.")
        actions.replan(reason="demo data")
        self.stdout.write(f"Batch window opens at {opens:%H:%M} UTC.")
