from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from gpu_requests.models import QuotaRequest
from tests.factories import FlavorFactory, submit


def errors_of(**kwargs):
    with pytest.raises(ValidationError) as excinfo:
        submit(**kwargs)
    assert not QuotaRequest.objects.exists()
    return excinfo.value.message_dict


def test_it_needs_at_least_one_gpu(alice, vision, h100):
    for gpus in (0, -1):
        assert errors_of(team=vision, flavor=h100, by=alice, gpus=gpus) == {
            "gpus": ["Ask for at least 1 GPU."]
        }


def test_it_refuses_more_gpus_than_the_flavor_has(alice, vision, h100):
    assert (
        "16 H100 80GB in all" in errors_of(team=vision, flavor=h100, by=alice, gpus=17)["gpus"][0]
    )


def test_the_end_must_follow_the_start(alice, vision, h100):
    start = timezone.now() + timedelta(days=1)
    errors = errors_of(team=vision, flavor=h100, by=alice, starts_at=start, ends_at=start)
    assert errors == {"ends_at": ["The end must be after the start."]}


def test_the_start_cannot_be_in_the_past(alice, vision, h100):
    errors = errors_of(
        team=vision, flavor=h100, by=alice, starts_at=timezone.now() - timedelta(hours=1)
    )
    assert errors == {"starts_at": ["The start is in the past."]}


def test_only_members_ask_for_their_team(bob, vision, h100):
    assert errors_of(team=vision, flavor=h100, by=bob) == {
        "team": ["You are not a member of this team."]
    }


def test_retired_flavors_cannot_be_requested(alice, vision):
    old = FlavorFactory(slug="k80", name="K80", is_active=False)
    assert errors_of(team=vision, flavor=old, by=alice) == {"flavor": ["K80 is no longer offered."]}


def test_justification_has_a_limit(alice, vision, h100):
    errors = errors_of(team=vision, flavor=h100, by=alice, reason="x" * 2001)
    assert errors == {"justification": ["Keep the justification to 2,000 characters."]}


def test_a_request_covers_a_year_at_most(alice, vision, h100):
    start = timezone.now() + timedelta(days=1)
    errors = errors_of(
        team=vision, flavor=h100, by=alice, starts_at=start, ends_at=start + timedelta(days=367)
    )
    assert errors == {"ends_at": ["A request covers at most 366 days; ask again to extend it."]}


def test_quota_is_planned_a_year_ahead_at_most(alice, vision, h100):
    errors = errors_of(
        team=vision, flavor=h100, by=alice, starts_at=timezone.now() + timedelta(days=400)
    )
    assert errors == {"starts_at": ["The start must be within a year from now."]}


def test_a_cost_too_large_to_store_is_refused(alice, vision):
    huge = FlavorFactory(slug="huge", capacity=10**6, price_per_gpu_hour=Decimal("999999"))
    errors = errors_of(team=vision, flavor=huge, by=alice, gpus=10**6, hours=24 * 300)
    assert errors == {"gpus": ["The estimated cost is too large; ask for less."]}
