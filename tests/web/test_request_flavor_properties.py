"""The request form's "find a flavor by its properties" (issue 21): what the user sees
when asking for "at least 40 GB", "Hopper" or "a MIG slice", without JavaScript
("Show matching flavors") and through the live check htmx sends."""

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.urls import reverse

from gpu_requests import actions
from gpu_requests.models import QuotaRequest
from tests.dra.objects import AT_LEAST_40GI, QUOTA_KEY
from tests.factories import FlavorFactory, next_week, submit

URL = reverse("request_new")
ARCHITECTURE_HOPPER = 'device.attributes["gpu.nvidia.com"].architecture == "Hopper"'
TYPE_MIG = "device.attributes['gpu.nvidia.com'].type == 'mig'"


def dra(slug, selector, **fields):
    fields = {"name": slug.upper(), "node_selector": {}, **fields}
    return FlavorFactory(
        slug=slug,
        device_class="gpu.nvidia.com",
        resource_name=QUOTA_KEY,
        device_selector=selector,
        **fields,
    )


@pytest.fixture
def catalog(h100):
    """H100 80GB (16, 4 USD), A100 40GB, T4 16GB, an extended-resource MIG slice, and
    DRA flavors: "40 GB or more, any model", "any Hopper" and a MIG slice by type."""
    FlavorFactory(
        slug="a100-40",
        name="A100 40GB",
        gpu_model="NVIDIA A100-SXM4-40GB",
        memory_gb=40,
        capacity=8,
        price_per_gpu_hour=Decimal("2.5"),
    )
    FlavorFactory(slug="t4", name="T4 16GB", gpu_model="Tesla T4", memory_gb=16)
    FlavorFactory(
        slug="mig-1g",
        name="A100 MIG 1g.10gb",
        gpu_model="NVIDIA A100 80GB",
        memory_gb=10,
        sharing="mig",
        resource_name="nvidia.com/mig-1g.10gb",
    )
    dra("big", AT_LEAST_40GI, name="40 GB or more", gpu_model="Any model", memory_gb=1)
    dra("hopper", ARCHITECTURE_HOPPER, name="Any Hopper", gpu_model="Hopper", memory_gb=80)
    dra("dra-mig", TYPE_MIG, name="DRA MIG slice", gpu_model="A100", memory_gb=10)


def local(dt):
    return dt.strftime("%Y-%m-%dT%H:%M")


def shown(response):
    """Slugs of the matching table's rows, and the names the flavor select offers."""
    page = response.content.decode()
    rows = re.findall(r'<tr id="match-([\w-]+)"', page)
    select = page.split('name="flavor"')[1].split("</select>")[0]
    options = re.findall(r'<option value="\d+"[^>]*>([^<·]+) ·', select)
    return rows, [name.strip() for name in options]


def match(client, vision, **properties):
    return client.post(URL, {"team": vision.pk, "match": "1", **properties})


def test_it_offers_every_flavor_before_properties_are_asked(login, alice, catalog):
    response = login(alice).get(URL)
    rows, options = shown(response)
    assert len(rows) == len(options) == 7
    assert "Find a flavor by its properties" in response.content.decode()
    assert "Every flavor." in response.content.decode()


def test_at_least_40_gb_finds_dra_and_extended_flavors(login, alice, vision, catalog):
    response = match(login(alice), vision, min_memory_gb="40")
    rows, options = shown(response)
    # The DRA flavor's catalog says 1 GB; its selector (>= 40Gi) is what counts.
    assert rows == ["big", "a100-40", "hopper", "h100"]  # by name
    assert options == ["40 GB or more", "A100 40GB", "Any Hopper", "H100 80GB"]
    assert "4 flavors have these properties" in response.content.decode()
    # No error shown for the fields not filled in yet.
    assert "This field is required" not in response.content.decode()


def test_an_architecture_finds_the_models_of_it(login, alice, vision, catalog):
    rows, _ = shown(match(login(alice), vision, model="hopper"))
    # The extended H100 by its model's architecture; "any model" does not promise one.
    assert rows == ["hopper", "h100"]
    rows, _ = shown(match(login(alice), vision, model="A100", min_memory_gb="20"))
    assert rows == ["a100-40"]


def test_a_mig_slice_is_told_by_the_catalog_or_the_selectors_type(login, alice, vision, catalog):
    rows, _ = shown(match(login(alice), vision, sharing="mig"))
    assert rows == ["mig-1g", "dra-mig"] or rows == ["dra-mig", "mig-1g"]
    rows, _ = shown(match(login(alice), vision, sharing="whole", min_memory_gb="80"))
    assert rows == ["hopper", "h100"]


def test_nothing_matching_says_so(login, alice, vision, catalog):
    response = match(login(alice), vision, min_memory_gb="200")
    assert "No flavor has all these properties" in response.content.decode()
    assert shown(response) == ([], [])


def test_each_match_shows_price_cost_and_what_is_free_over_the_period(
    login, alice, vision, admin_user, catalog, h100
):
    start = next_week()
    held = submit(vision, h100, alice, gpus=6, starts_at=start + timedelta(hours=12))
    actions.approve(held, by=admin_user)
    response = match(
        login(alice),
        vision,
        min_memory_gb="80",
        gpus="2",
        starts_at=local(start),
        ends_at=local(start + timedelta(hours=24)),
    )
    page = response.content.decode()
    row = page.split('<tr id="match-h100">')[1].split("</tr>")[0]
    assert "4.00 USD" in row  # per GPU-hour
    assert "192.00 USD" in row  # 2 GPUs x 24 h x 4
    assert "10 of 16" in row  # 6 reserved for half of the period
    other = page.split('<tr id="match-hopper">')[1].split("</tr>")[0]
    assert "16 of 16" in other
    assert "the period asked for" in page


def test_open_ended_costs_per_hour_and_too_many_gpus_are_not_priced(login, alice, vision, catalog):
    page = match(
        login(alice), vision, model="A100", gpus="12", starts_at=local(next_week())
    ).content.decode()
    assert "more than its 8" in page.split('<tr id="match-a100-40">')[1].split("</tr>")[0]
    assert "48.00 USD per hour" in page.split('<tr id="match-mig-1g">')[1].split("</tr>")[0]


@pytest.mark.parametrize(
    "field, value, error",
    [
        ("min_memory_gb", "40\x00", "Null characters are not allowed"),
        ("min_memory_gb", "9" * 400, "whole number of GB"),
        ("min_memory_gb", "٤٠", "in digits 0-9"),
        ("min_memory_gb", "4²", "in digits 0-9"),
        ("min_memory_gb", "-1", "whole number of GB"),
        ("model", "H100\x00", "Null characters are not allowed"),
        ("model", "H\x07100", "Type a model or architecture"),
        ("model", "x" * 101, "at most 100 characters"),
        ("sharing", "\x00", "Select a valid choice"),
    ],
)
def test_bad_properties_are_field_errors(login, alice, vision, catalog, field, value, error):
    response = match(login(alice), vision, **{field: value})
    assert response.status_code == 200
    slot = response.content.decode().split(f'id="errors-{field}">')[1].split("</div>")[0]
    assert error in slot
    assert len(shown(response)[1]) == 7  # nothing narrowed by what could not be read


def test_the_live_check_sends_the_new_flavor_list_only_when_the_properties_change(
    login, alice, vision, catalog
):
    client = login(alice)
    data = {"team": vision.pk, "min_memory_gb": "40", "matched_for": "||"}
    response = client.post(f"{URL}?validate=1", data, headers={"HX-Request": "true"})
    page = response.content.decode()
    assert '<div id="flavor-matches" hx-swap-oob="true">' in page
    assert '<div id="flavor-choice" hx-swap-oob="true">' in page
    assert 'name="matched_for" value="40||"' in page
    assert shown(response)[1] == ["40 GB or more", "A100 40GB", "Any Hopper", "H100 80GB"]
    # Typing the number of GPUs: the table is priced again, the select is left alone.
    data |= {"matched_for": "40||", "gpus": "3"}
    page = client.post(f"{URL}?validate=1", data, headers={"HX-Request": "true"}).content
    assert b'id="flavor-matches" hx-swap-oob="true"' in page
    assert b'id="flavor-choice"' not in page
    # A bad property: its error slot, out of band.
    data["min_memory_gb"] = "٤٠"
    page = client.post(f"{URL}?validate=1", data, headers={"HX-Request": "true"}).content
    errors = page.decode().split('id="errors-min_memory_gb" hx-swap-oob="true">')[1]
    assert "in digits 0-9" in errors.split("</div>")[0]


def test_a_flavor_without_the_properties_asked_is_refused_and_one_with_them_submits(
    login, alice, vision, catalog, h100
):
    start = next_week()
    data = {
        "team": vision.pk,
        "gpus": "1",
        "starts_at": local(start),
        "ends_at": local(start + timedelta(hours=2)),
        "justification": "train",
        "model": "T4",
        "flavor": h100.pk,
    }
    response = login(alice).post(URL, data)
    assert "Select a valid choice" in response.content.decode()
    assert not QuotaRequest.objects.exists()
    data["model"] = "H100"
    response = login(alice).post(URL, data)
    assert response.status_code == 302
    assert QuotaRequest.objects.get().flavor == h100
