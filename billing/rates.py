"""Prices in force: the rate card read once, then looked up per flavor and hour."""

import bisect
from decimal import ROUND_HALF_UP, Decimal

from django.db.models import Case, DecimalField, ExpressionWrapper, F, Q, Value, When

from billing.models import Rate, mig_fraction
from gpu_requests.models import Flavor

PRICE_PLACES = Decimal("0.0001")
PRICE = DecimalField(max_digits=20, decimal_places=8)


class RateCard:
    """All rates and flavors in two queries; `price(flavor_id, at)` costs none."""

    def __init__(self):
        self.flavors = {flavor.pk: flavor for flavor in Flavor.objects.all()}
        self.rates = {}
        for rate in Rate.objects.order_by("flavor_id", "effective_from"):
            self.rates.setdefault(rate.flavor_id, []).append(rate)
        self.starts = {
            flavor_id: [rate.effective_from for rate in rates]
            for flavor_id, rates in self.rates.items()
        }

    def rate_at(self, flavor_id, at):
        index = bisect.bisect_right(self.starts.get(flavor_id, []), at) - 1
        return self.rates[flavor_id][index] if index >= 0 else None

    def price(self, flavor_id, at, _depth=0):
        """Price per GPU-hour of the flavor at `at` (Decimal).

        Before a flavor's first rate, its catalog price applies.
        """
        rate = self.rate_at(flavor_id, at)
        if rate is None:
            return self.flavors[flavor_id].price_per_gpu_hour
        if rate.price_per_gpu_hour is not None:
            return rate.price_per_gpu_hour
        if _depth > 3:  # a parent loop; add_rate refuses them, old rows might not
            return self.flavors[flavor_id].price_per_gpu_hour
        parent_price = self.price(rate.mig_parent_id, at, _depth + 1)
        fraction = mig_fraction(
            self.flavors[flavor_id], self.flavors[rate.mig_parent_id], rate.mig_basis
        )
        if fraction is None:
            return parent_price
        return (parent_price * fraction).quantize(PRICE_PLACES, ROUND_HALF_UP)


def blend(price, spot_seconds, seconds, factor):
    """`price` with the spot factor applied to the spot share of `seconds`."""
    if not seconds or not spot_seconds or factor == 1:
        return price
    share = Decimal(spot_seconds) / Decimal(seconds)
    return (price * (1 - share * (1 - factor))).quantize(PRICE_PLACES, ROUND_HALF_UP)


def blended_expression(price, spot_field, seconds_field, factor):
    """`blend` as an SQL expression over a ledger row's own columns."""
    share = ExpressionWrapper(
        F(spot_field) * Value(Decimal(1)) / F(seconds_field), output_field=PRICE
    )
    return Case(
        When(
            Q(**{f"{seconds_field}__gt": 0}, **{f"{spot_field}__gt": 0}),
            then=ExpressionWrapper(
                Value(price) * (Value(Decimal(1)) - share * Value(Decimal(1) - factor)),
                output_field=PRICE,
            ),
        ),
        default=Value(price),
        output_field=PRICE,
    )
