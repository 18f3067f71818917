"""Which flavors of the catalog have the properties a team asks for (issue 21):
"at least 40 GB, any model", "Hopper", "a MIG slice".

What a flavor offers is read from what pins it down hardest. A DRA flavor's
device selector is what Kubernetes enforces, so its terms win: a memory
capacity bound (`compareTo(quantity("40Gi")) >= 0`), a `productName` or
`architecture` equal to a value, a `type` of `gpu` or `mig` (NVIDIA's driver,
docs/dra.md). Whatever the selector leaves open, and everything about an
extended-resource flavor, comes from the catalog (`memory_gb`, `gpu_model`,
`sharing`). GB are as GPUs are sold: an "80GB" H100 has 80 GiB, so a
selector's bound is read in GiB. Pure functions over flavors already loaded.
"""

import re
from dataclasses import dataclass

from cluster.models import Flavor

GIB = 2**30

# NVIDIA data-centre GPUs by architecture, so "Hopper" finds an extended-resource
# H100 flavor whose catalog names only the model.
ARCHITECTURES = {
    "volta": {"v100"},
    "turing": {"t4"},
    "ampere": {"a100", "a30", "a40", "a10", "a16", "a2"},
    "ada lovelace": {"l4", "l40", "l40s"},
    "hopper": {"h100", "h200", "h800", "h20", "gh200"},
    "blackwell": {"b100", "b200", "gb200", "b300", "gb300"},
}


def _compact(text):
    return re.sub(r"[^a-z0-9]", "", text.lower())


def architecture_of(model):
    """The architecture of a model name ("NVIDIA H100 80GB HBM3" -> "hopper"), or ""."""
    words = set(re.split(r"[^a-z0-9]+", model.lower()))
    return next((arch for arch, models in ARCHITECTURES.items() if words & models), "")


@dataclass(frozen=True)
class Offer:
    """What every device of a flavor has, as far as the portal can tell."""

    memory_gb: int
    models: tuple  # names and architectures a device is known to have
    sharing: str

    def has(self, *, min_memory_gb=None, model="", sharing=""):
        if min_memory_gb is not None and self.memory_gb < min_memory_gb:
            return False
        if sharing and self.sharing != sharing:
            return False
        wanted = _compact(model)
        return not wanted or any(wanted in _compact(name) for name in self.models)


def offer_of(flavor):
    memory_gb, models, sharing = flavor.memory_gb, [], flavor.sharing
    for term in flavor.selector_terms if flavor.is_dra else []:
        if term.kind == "capacity" and term.name == "memory" and term.op in (">=", ">", "=="):
            memory_gb = int(term.value // GIB)
        elif term.kind == "attribute" and term.op == "==" and isinstance(term.value, str):
            if term.name in ("productName", "architecture"):
                models.append(term.value)
            elif term.name == "type" and term.value in ("gpu", "mig"):
                sharing = Flavor.Sharing.WHOLE if term.value == "gpu" else Flavor.Sharing.MIG
            elif term.name == "profile":
                sharing = Flavor.Sharing.MIG
    if not models:
        models = [flavor.gpu_model, flavor.name]
    models += [architecture_of(name) for name in models]
    return Offer(memory_gb, tuple(name for name in models if name), sharing)


def matching(flavors, *, min_memory_gb=None, model="", sharing=""):
    """The flavors (in their order) whose every device has these properties."""
    return [
        flavor
        for flavor in flavors
        if offer_of(flavor).has(min_memory_gb=min_memory_gb, model=model, sharing=sharing)
    ]
