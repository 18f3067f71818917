"""Factories for test data. Requests are made through the actions, never by
setting a status by hand, so tests see the same rows the product writes."""

from datetime import timedelta
from decimal import Decimal

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone

from cluster.models import Flavor
from gpu_requests import actions
from gpu_requests.models import QuotaRequest
from teams import access
from teams.models import Membership, Team


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")
    password = factory.django.Password("demo")


class TeamFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Team
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"team-{n}")
    name = factory.LazyAttribute(lambda t: t.slug.replace("-", " ").title())


class FlavorFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Flavor
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"gpu-{n}")
    name = factory.LazyAttribute(lambda f: f.slug.upper())
    gpu_model = "NVIDIA H100 80GB HBM3"
    memory_gb = 80
    resource_name = "nvidia.com/gpu"
    node_selector = factory.LazyAttribute(lambda f: {"nvidia.com/gpu.product": f.gpu_model})
    tolerations = factory.LazyFunction(
        lambda: [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    )
    capacity = 16
    price_per_gpu_hour = Decimal("4.0000")


def make_reviewer(username="admin"):
    user = UserFactory(username=username, is_staff=True)
    user.user_permissions.add(access.review_permission())
    return get_user_model().objects.get(pk=user.pk)  # drop the permission cache


def add_member(team, user, role=Membership.Role.MEMBER):
    Membership.objects.get_or_create(team=team, user=user, defaults={"role": role})
    return user


def next_week(days=7, hours=0):
    start = (timezone.now() + timedelta(days=days)).replace(minute=0, second=0, microsecond=0)
    return start + timedelta(hours=hours)


def submit(team, flavor, by, *, gpus=2, starts_at=None, ends_at=None, hours=24, reason="train"):
    starts_at = starts_at or next_week()
    if ends_at is None and hours is not None:
        ends_at = starts_at + timedelta(hours=hours)
    return actions.submit(
        team=team,
        flavor=flavor,
        gpus=gpus,
        starts_at=starts_at,
        ends_at=ends_at,
        justification=reason,
        by=by,
    )


def peak_by_hand(flavor, starts_at, ends_at, *, exclude=None):
    """The most GPUs of `flavor` that quota requests reserve at any instant of
    [starts_at, ends_at), counted the slow obvious way: at the period's start and at
    every request start inside it (where reservations rise), each covering request
    summed. The oracle for gpu_requests.capacity's timeline."""
    held = [
        r
        for r in QuotaRequest.objects.reserving().filter(flavor=flavor)
        if exclude is None or r.pk != exclude.pk
    ]
    instants = {starts_at} | {
        r.starts_at
        for r in held
        if r.starts_at > starts_at and (ends_at is None or r.starts_at < ends_at)
    }
    return max(
        sum(
            r.gpus
            for r in held
            if r.starts_at <= instant and (r.ends_at is None or r.ends_at > instant)
        )
        for instant in instants
    )
