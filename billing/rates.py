"""Prices in force: the rate card read once, then looked up per flavor and hour."""

import bisect
from decimal import ROUND_HALF_UP, Decimal

from billing.models import Rate, mig_fraction
from cluster.models import Flavor

PRICE_PLACES = Decimal("0.0001")


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


FACTOR_PLACES = Decimal("0.000001")


def spot_factor(spot_seconds, seconds, factor):
    """The mean price factor of `seconds` of which `spot_seconds` ran on spot nodes."""
    if not seconds or not spot_seconds:
        return Decimal(1)
    share = Decimal(spot_seconds) / Decimal(seconds)
    return (1 - share * (1 - factor)).quantize(FACTOR_PLACES, ROUND_HALF_UP)


def priced(price, factor):
    return (price * factor).quantize(PRICE_PLACES, ROUND_HALF_UP)
