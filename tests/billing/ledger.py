"""Ledger rows for page tests, written by the same action ingestion uses
(`write_hour`), from figures given by hand instead of Prometheus answers."""

from billing import actions
from billing.metering import Figures, Measured, Workload, activity_band
from cluster.models import Flavor


def workload(allocated, active, idle=0, unmetered=0, *, gpus=1, mean=None, fb_peak=None):
    load = Workload(allocated, active, idle, unmetered, gpus=gpus)
    metered = (active + idle) // 60
    if mean is not None and metered:
        load.activity_total = mean * metered
        load.samples = metered
        load.histogram = {str(activity_band(mean)): metered}
    load.fb_peak = fb_peak
    return load


def meter(hour, teams=None, workloads=None, capacity=None, other=None):
    """teams: {(team, flavor): (allocated, active, idle, unmetered)} in GPU-seconds;
    workloads: {(team, namespace, kind, name, flavor): Workload}; other: {flavor:
    allocated} of pods in namespaces of no team."""
    from billing.models import IngestedHour

    IngestedHour.objects.get_or_create(hour=hour)
    measured = Measured(
        team={(t.pk, f.pk): Figures(*figures) for (t, f), figures in (teams or {}).items()},
        workload={
            (t.pk, ns, kind, name, f.pk): load
            for (t, ns, kind, name, f), load in (workloads or {}).items()
        },
        other={f.pk: Figures(allocated) for f, allocated in (other or {}).items()},
        capacity=capacity or {},
    )
    return actions.write_hour(hour, measured, list(Flavor.objects.all()))
