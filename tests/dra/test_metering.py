"""Billing's DRA half as pure functions: `metering.measure` over Prometheus
answers and the inventory's allocations, the flavor a claimed device is billed
as, and the MIG fraction of a DRA flavor (the rate card's one rule)."""

from datetime import UTC, datetime
from decimal import Decimal
from types import SimpleNamespace

from billing import metering
from billing.models import Rate, mig_fraction, mig_shape
from billing.prometheus import Series
from cluster.inventory import Dra, claimed_devices, exporter_device
from tests.dra import objects
from tests.dra.test_cluster import dra_flavor
from tests.factories import FlavorFactory

HOUR = datetime(2026, 12, 1, 10, tzinfo=UTC)
STEP = 60
T0 = HOUR.timestamp()
MIG_1G = 'device.attributes["gpu.nvidia.com"].profile == "1g.10gb"'


def running(uid, steps):
    labels = {"namespace": "vision", "pod": "notebook", "uid": uid}
    return Series(labels, [(T0 + i * STEP, 1.0) for i in steps])


def device_series(value, steps, pod=None, gpu="2", instance="0"):
    labels = {"Hostname": "cpu-1", "gpu": gpu, "GPU_I_PROFILE": "1g.10gb", "GPU_I_ID": instance}
    if pod:
        labels |= {"namespace": "vision", "pod": pod}
    return Series(labels, [(T0 + i * STEP, value) for i in steps])


def measured(flavor, answers):
    held = SimpleNamespace(
        namespace="vision",
        pod="notebook",
        pod_uid="u1",
        node="cpu-1",
        device="gpu-2-mig-1g10gb-0",
        flavor_id=flavor.pk,
    )
    return metering.measure(
        answers, [flavor], {"vision": 7}, STEP, Decimal("0.05"), hour=HOUR, allocations=[held]
    )


def test_a_mig_device_without_the_exporters_pod_labels_is_metered_from_its_claim(db):
    """dcgm-exporter leaves pod labels off MIG devices (dcgm-exporter#577): the
    claim's allocation still puts the device on the pod, busy by its own series."""
    flavor = dra_flavor("mig-dra", device_class="mig.nvidia.com", selector=MIG_1G)
    answers = {
        "dra_running": [running("u1", range(10))],
        # Busy for 6 steps, idle for 2, no sample for 2: never a pod label.
        "dra_activity": [device_series(0.8, range(6)), device_series(0.0, range(6, 8))],
        "capacity": [
            Series({"node": "cpu-1", "resource": "x"}, [(T0 + i * STEP, 2.0) for i in range(60)])
        ],
    }
    figures = measured(flavor, answers).team[(7, flavor.pk)]
    assert (figures.allocated, figures.active, figures.idle, figures.unmetered) == (
        600,
        360,
        120,
        120,
    )
    assert figures.dra == figures.allocated
    workload = measured(flavor, answers).workload[(7, "vision", "Pod", "notebook", flavor.pk)]
    assert workload.gpus == 1 and workload.samples == 8


def test_where_the_exporter_names_the_pod_too_it_is_counted_once(db):
    """Both sources name the pod: the claim's figures stand, the exporter's pod
    labels add nothing on top (nor in the scrape gaps after the pod ended)."""
    flavor = dra_flavor("mig-dra", device_class="mig.nvidia.com", selector=MIG_1G)
    labelled = device_series(0.8, range(10), pod="notebook")
    answers = {
        # kube-state-metrics saw the pod running at steps 0-9 and nothing else
        # at all (every other step of the hour is a scrape gap).
        "dra_running": [running("u1", range(10))],
        "dra_activity": [labelled],
        "activity": [labelled],
    }
    figures = measured(flavor, answers).team[(7, flavor.pk)]
    assert (figures.allocated, figures.active, figures.unmetered, figures.dra) == (600, 600, 0, 600)


def test_the_exporters_device_labels_of_nvidias_device_names():
    assert exporter_device("cpu-0", "gpu-1") == ("cpu-0", "1", "")
    assert exporter_device("cpu-1", "gpu-2-mig-19-4-1") == ("cpu-1", "2", "4")
    assert exporter_device("cpu-1", "gpu-2-mig-1g10gb-1") == ("cpu-1", "2", "1")
    assert exporter_device("cpu-1", "nic-0") is None


def test_a_claimed_device_is_billed_as_the_flavor_its_request_names(db):
    """Two flavors serve the H100s; the claim asks by the H100 flavor's own selector."""
    any_gpu = dra_flavor("any-gpu-dra")
    h100 = dra_flavor("h100-dra", selector=objects.H100_ONLY)
    claim = objects.claim("big", "vision", selector=objects.H100_ONLY)
    claim["metadata"]["uid"] = "c1"
    claim["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    {
                        "request": "gpu",
                        "driver": "gpu.nvidia.com",
                        "pool": "cpu-0",
                        "device": "gpu-1",
                    }
                ]
            }
        },
        "reservedFor": [{"resource": "pods", "name": "train", "uid": "p1"}],
    }
    plain = objects.claim("any", "vision")
    plain["metadata"]["uid"] = "c2"
    plain["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    {
                        "request": "gpu",
                        "driver": "gpu.nvidia.com",
                        "pool": "cpu-0",
                        "device": "gpu-0",
                    }
                ]
            }
        },
        "reservedFor": [{"resource": "pods", "name": "other", "uid": "p2"}],
    }
    unreserved = objects.claim("waiting", "vision")  # allocated to no pod yet
    dra = Dra(
        [objects.device_class("gpu.nvidia.com", objects.GPU_CLASS)],
        [objects.resource_slice("cpu-0", objects.H100_DEVICES)],
        [claim, plain, unreserved],
    )
    found = {
        (d.pod, d.pod_uid, d.node, d.device, d.flavor)
        for d in claimed_devices(dra, [any_gpu, h100])
    }
    assert found == {
        ("train", "p1", "cpu-0", "gpu-1", "h100-dra"),
        ("other", "p2", "cpu-0", "gpu-0", "any-gpu-dra"),
    }


def test_a_mig_flavor_by_dra_is_priced_by_the_same_fraction_as_by_extended_resource(db):
    parent = FlavorFactory(slug="a100", memory_gb=80)
    extended = FlavorFactory(slug="mig-1g", resource_name="nvidia.com/mig-1g.10gb")
    by_dra = dra_flavor("mig-dra", device_class="mig.nvidia.com", selector=MIG_1G)
    assert mig_shape(by_dra) == mig_shape(extended) == (1, 10)
    for basis, share in (
        (Rate.MigBasis.COMPUTE, Decimal(1) / 7),
        (Rate.MigBasis.MEMORY, Decimal("0.125")),
    ):
        assert mig_fraction(by_dra, parent, basis) == mig_fraction(extended, parent, basis) == share
    # A DRA flavor naming no profile is no MIG slice: its own price applies.
    assert mig_shape(dra_flavor("any-mig", device_class="mig.nvidia.com")) is None
