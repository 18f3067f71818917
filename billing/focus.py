"""The ledger as a FOCUS 1.3 cost-and-usage dataset (docs/billing.md, "FOCUS").

`COLUMNS` is the one statement of what the file holds: each column's feature
level, data type, nullability and allowed values as the FinOps Open Cost and
Usage Specification defines them. The export writes these columns and
tests/billing/test_focus_export.py validates its files against this data.

Source: FinOps-Open-Cost-and-Usage-Spec/FOCUS_Spec, one file per column in
specification/datasets/cost_and_usage/columns/ (the column ID lowercased:
billedcost.md, chargecategory.md, ...; the list is columns.mdpp), as ratified
in 1.3 (December 2025). 1.3 added AllocatedMethodId, AllocatedMethodDetails,
AllocatedResourceId, AllocatedResourceName, AllocatedTags (allocatedmethodid.md,
...), ContractApplied, ServiceProviderName and HostProviderName; it deprecated
ProviderName and PublisherName ("Deprecated (version) 1.3" in providername.md,
publishername.md), which stay mandatory in 1.3 and go in 1.4. Not written:
conditional columns whose condition the portal does not meet (commitment
discounts, capacity reservations, contracts, invoices, availability zones,
pricing currencies other than the billing currency, SKU meters and details).

Every figure is a sum of the ledger by `billing.queries.team_figures`, the
function every page, CSV and API answer sums, so the file agrees with them.
"""

import json
from dataclasses import dataclass
from datetime import UTC, timedelta
from decimal import Decimal

from django.conf import settings
from django.db.models.functions import TruncDay, TruncHour
from django.utils.text import slugify

from billing import queries
from billing.models import FlavorHour, TeamUsage, cost_of, hours
from billing.reports import Month
from teams.namespaces import namespace_of

VERSION = "1.3"


@dataclass(frozen=True)
class Column:
    name: str
    level: str  # Mandatory, Conditional or Recommended (the column's "Feature level")
    type: str  # String, Decimal, DateTime or JSON (its "Data type")
    nullable: bool  # its "Allows nulls", as its requirements narrow it for our rows
    allowed: tuple = ()  # its allowed values, if the spec lists them


def _columns(level, type, *names, nullable=False, allowed=()):
    return [Column(name, level, type, nullable, allowed) for name in names]


CHARGE_CATEGORIES = ("Usage", "Purchase", "Tax", "Credit", "Adjustment")  # chargecategory.md
SERVICE_CATEGORIES = (  # servicecategory.md
    "AI and Machine Learning",
    "Analytics",
    "Business Applications",
    "Compute",
    "Databases",
    "Developer Tools",
    "Multicloud",
    "Identity",
    "Integration",
    "Internet of Things",
    "Management and Governance",
    "Media",
    "Migration",
    "Mobile",
    "Networking",
    "Security",
    "Storage",
    "Web",
    "Other",
)

COLUMNS = (
    *_columns("Conditional", "String", "AllocatedMethodId", nullable=True),
    *_columns("Recommended", "JSON", "AllocatedMethodDetails", nullable=True),
    *_columns(
        "Conditional", "String", "AllocatedResourceId", "AllocatedResourceName", nullable=True
    ),
    *_columns("Conditional", "JSON", "AllocatedTags", nullable=True),
    *_columns("Mandatory", "Decimal", "BilledCost"),
    *_columns("Mandatory", "String", "BillingAccountId", "BillingAccountName", "BillingCurrency"),
    *_columns("Mandatory", "DateTime", "BillingPeriodEnd", "BillingPeriodStart"),
    *_columns("Mandatory", "String", "ChargeCategory", allowed=CHARGE_CATEGORIES),
    # Null unless the charge corrects a closed billing period (chargeclass.md).
    *_columns("Mandatory", "String", "ChargeClass", nullable=True, allowed=("Correction",)),
    *_columns("Mandatory", "String", "ChargeDescription"),
    *_columns(
        "Recommended", "String", "ChargeFrequency", allowed=("One-Time", "Recurring", "Usage-Based")
    ),
    *_columns("Mandatory", "DateTime", "ChargePeriodEnd", "ChargePeriodStart"),
    # Null unless ChargeCategory is Usage (consumedquantity.md, consumedunit.md).
    *_columns("Conditional", "Decimal", "ConsumedQuantity", nullable=True),
    *_columns("Conditional", "String", "ConsumedUnit", nullable=True),
    *_columns("Mandatory", "Decimal", "ContractedCost"),
    *_columns("Conditional", "Decimal", "ContractedUnitPrice", nullable=True),
    *_columns("Mandatory", "Decimal", "EffectiveCost"),
    *_columns("Mandatory", "String", "HostProviderName", "InvoiceIssuerName"),
    *_columns("Mandatory", "Decimal", "ListCost"),
    # Null exactly when SkuPriceId is (listunitprice.md, pricingquantity.md): a credit
    # has no SKU price. ListUnitPrice is there as the provider publishes list prices.
    *_columns("Conditional", "Decimal", "ListUnitPrice", nullable=True),
    *_columns("Mandatory", "Decimal", "PricingQuantity", nullable=True),
    *_columns("Mandatory", "String", "PricingUnit", nullable=True),
    *_columns("Mandatory", "String", "ProviderName", "PublisherName"),
    *_columns("Conditional", "String", "RegionId", "RegionName", "ResourceId", "ResourceName"),
    *_columns("Conditional", "String", "ResourceType"),
    *_columns("Mandatory", "String", "ServiceCategory", allowed=SERVICE_CATEGORIES),
    *_columns("Mandatory", "String", "ServiceName", "ServiceProviderName"),
    *_columns("Conditional", "String", "SkuId"),
    *_columns("Conditional", "String", "SkuPriceId", nullable=True),
    *_columns("Conditional", "String", "SubAccountId", "SubAccountName"),
    *_columns("Conditional", "JSON", "Tags"),
)
# Ours, named as the spec asks of custom columns ("x_" and PascalCase): which of the
# portal's figures a row is (docs/billing.md, Definitions).
GPU_TIME = "x_GpuTime"
HEADER = [column.name for column in COLUMNS] + [GPU_TIME]

IN_USE, IDLE, RESERVED, LOST = "in use", "idle", "reserved, unallocated", "lost, credited"
GPU_HOURS = "GPU-Hours"  # the spec's UnitFormat: <singular unit>-<plural time unit>
TAG_PREFIX = "portal/"  # the spec asks a provider-defined tag scheme for a key prefix
# AllocatedMethodId values (docs/billing.md, "FOCUS" documents each).
BY_REQUESTS = "gpu-requests"  # GPUs requested by the team's running pods x time
BY_QUOTA = "gpu-quota"  # the team's quota not allocated, charged in the reservation mode
GRANULARITIES = {"day": (TruncDay, timedelta(days=1)), "hour": (TruncHour, timedelta(hours=1))}
PLACES = Decimal("0.000001")  # the ledger's money precision (billing.models.MONEY)


def charges(teams, start, end, granularity="day", mode=None):
    """FOCUS rows (dicts keyed by HEADER) of `teams`' ledger over [start, end), one
    per team, flavor, day (or hour), price and figure. Two queries, streamed."""
    mode = mode or settings.PORTAL_BILLING_CHARGE
    trunc, length = GRANULARITIES[granularity]
    period = trunc("hour", tzinfo=UTC)
    rows = (
        TeamUsage.objects.filter(team__in=teams, hour__gte=start, hour__lt=end)
        .annotate(period=period)
        .values(
            "team__slug",
            "team__name",
            "flavor__slug",
            "flavor__name",
            "period",
            "price",
            "price_factor",
        )
        .annotate(
            **queries.team_figures(mode),
            reserved_unallocated_cost=cost_of("reserved_unallocated_seconds"),
        )
        .order_by("team__slug", "period", "flavor__slug", "price")
    )
    capacity = {
        (row["flavor__slug"], row["period"]): row["gpu_hours"]
        for row in FlavorHour.objects.filter(hour__gte=start, hour__lt=end)
        .annotate(period=period)
        .values("flavor__slug", "period")
        .annotate(gpu_hours=hours("capacity_seconds"))
        .order_by()
    }
    for row in rows.iterator():
        row["start"], row["end"] = max(row["period"], start), min(row["period"] + length, end)
        pool = capacity.get((row["flavor__slug"], row["period"]))
        reserved = row["reserved_unallocated_cost"] if mode == "reservation" else 0
        idle = (row["idle_gpu_hours"], row["idle_cost"])
        figures = [
            # What the row charges, less idle, reserved and credit: active, unmetered,
            # and the credited runs' time (their credit is a row of its own).
            (
                IN_USE,
                row["allocated_gpu_hours"] - idle[0],
                row["cost"] + row["credit"] - idle[1] - reserved,
            ),
            (IDLE, *idle),
        ]
        if mode == "reservation":
            figures.append((RESERVED, row["reserved_unallocated_gpu_hours"], reserved))
        for kind, gpu_hours, cost in figures:
            if gpu_hours:
                yield _usage(row, kind, gpu_hours, cost, pool)
        if row["lost_gpu_hours"]:
            yield _credit(row)


def _common(row):
    """The columns every row of a team, flavor, period and price shares."""
    provider = settings.PORTAL_FOCUS_PROVIDER_NAME
    cluster = settings.PORTAL_CLUSTER_NAME
    month = Month.parse(f"{row['start']:%Y-%m}")
    return {
        "BillingAccountId": slugify(provider) or "gpu-portal",
        "BillingAccountName": provider,
        "BillingCurrency": settings.PORTAL_CURRENCY,
        "BillingPeriodStart": _time(month.start),
        "BillingPeriodEnd": _time(month.end),
        "ChargePeriodStart": _time(row["start"]),
        "ChargePeriodEnd": _time(row["end"]),
        "ChargeClass": None,
        "ChargeFrequency": "Usage-Based",
        # The portal runs the cluster and bills for it: no other entity to name.
        "HostProviderName": provider,
        "InvoiceIssuerName": provider,
        "ProviderName": provider,
        "PublisherName": provider,
        "ServiceProviderName": provider,
        "ServiceName": "GPU compute",
        "ServiceCategory": "Compute",
        "RegionId": cluster,
        "RegionName": cluster,
        # The resource is the cluster's pool of the flavor, shared by teams; the
        # allocation columns say which team's share a row is.
        "ResourceId": f"{cluster}/{row['flavor__slug']}",
        "ResourceName": f"{row['flavor__name']} GPUs in {cluster}",
        "ResourceType": "GPU pool",
        "SkuId": row["flavor__slug"],
        "SubAccountId": row["team__slug"],
        "SubAccountName": row["team__name"],
        "Tags": _json(
            {
                f"{TAG_PREFIX}cluster": cluster,
                f"{TAG_PREFIX}namespace": namespace_of(row["team__slug"]),
                f"{TAG_PREFIX}flavor": row["flavor__slug"],
            }
        ),
    }


DESCRIPTIONS = {
    IN_USE: "GPU time held by the team's running pods, in use (or unmetered)",
    IDLE: "GPU time held by the team's running pods, idle (engine activity below the threshold)",
    RESERVED: "GPU quota reserved by the team and not allocated (charged by reservation)",
    LOST: "Credit for GPU time lost to spot reclaims and XID failures",
}


def _usage(row, kind, gpu_hours, cost, pool):
    cost, gpu_hours = _money(cost), _money(gpu_hours)
    ratio = _money(gpu_hours / pool) if pool else None
    return {
        **_common(row),
        "ChargeCategory": "Usage",
        "ChargeDescription": f"{row['flavor__name']}: {DESCRIPTIONS[kind]}",
        "BilledCost": cost,
        "EffectiveCost": cost,
        "ListCost": cost,
        "ContractedCost": cost,
        "ListUnitPrice": row["price"],
        "ContractedUnitPrice": row["price"],
        "PricingQuantity": gpu_hours,
        "PricingUnit": GPU_HOURS,
        "ConsumedQuantity": gpu_hours,
        "ConsumedUnit": GPU_HOURS,
        "SkuPriceId": _sku_price(row),
        "AllocatedMethodId": BY_QUOTA if kind == RESERVED else BY_REQUESTS,
        # Of the pool's capacity in the period; the rest is the platform's (unreserved,
        # other namespaces, batch set-aside): the admin page's "Where the capacity went".
        "AllocatedMethodDetails": None
        if ratio is None
        else _json(
            {
                "Elements": [
                    {
                        "AllocatedRatio": float(ratio),
                        "UsageUnit": GPU_HOURS,
                        "UsageQuantity": float(gpu_hours),
                    }
                ]
            }
        ),
        "AllocatedResourceId": f"{settings.PORTAL_CLUSTER_NAME}/{namespace_of(row['team__slug'])}",
        "AllocatedResourceName": namespace_of(row["team__slug"]),
        "AllocatedTags": _json({f"{TAG_PREFIX}team": row["team__slug"]}),
        GPU_TIME: kind,
    }


def _credit(row):
    credit = _money(-row["credit"])
    return {
        **_common(row),
        "ChargeCategory": "Credit",
        "ChargeDescription": f"{row['flavor__name']}: {DESCRIPTIONS[LOST]}",
        "BilledCost": credit,
        "EffectiveCost": credit,
        "ListCost": credit,
        "ContractedCost": credit,
        # Granted by the portal, not a SKU's price: no unit price or quantities.
        "ListUnitPrice": None,
        "ContractedUnitPrice": None,
        "PricingQuantity": None,
        "PricingUnit": None,
        "ConsumedQuantity": None,
        "ConsumedUnit": None,
        "SkuPriceId": None,
        "AllocatedMethodId": None,
        "AllocatedMethodDetails": None,
        "AllocatedResourceId": None,
        "AllocatedResourceName": None,
        "AllocatedTags": None,
        GPU_TIME: LOST,
    }


def _sku_price(row):
    """The flavor at its time-of-use factor (spot, off-peak): the price's terms, never
    its amount, so the ID stays the same when the rate card changes."""
    factor = row["price_factor"].normalize()
    return row["flavor__slug"] if factor == 1 else f"{row['flavor__slug']}@x{factor:f}"


def _money(value):
    # + 0 turns a negative zero into zero: "-0.000000" is no amount a reader expects.
    return Decimal(value).quantize(PLACES) + 0


def _time(moment):
    """The spec's DateTimeFormat: ISO 8601 in UTC, `Z`."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _json(value):
    return json.dumps(value, separators=(",", ":"))
