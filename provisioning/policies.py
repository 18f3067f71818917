"""Admission policies the API server enforces for every client of a team's
namespace, kubectl included: a GPU pod must be placed on the nodes of a flavor
the team holds now, and never ask for more of that flavor than the team holds.

Pure builders, as `provisioning.manifests`: catalog and holdings in, dicts out.

- One `ValidatingAdmissionPolicy` (`flavor-quota`) for the whole cluster, built
  from the catalog: per GPU resource name, how much a pod (or a Job's,
  CronJob's, Deployment's, StatefulSet's, ReplicaSet's or DaemonSet's pod
  template) asks for; per flavor, whether the pod is pinned to the flavor's
  nodes (its `nodeSelector`, or every term of its required node affinity) and
  what the team holds of it.
- Per team a `ValidatingAdmissionPolicyBinding` whose parameter is the team's
  ResourceQuota: its annotations `gpu-portal.io/gpus.<flavor>` are the team's
  holdings now (approved active quota plus released batch work), written by
  the portal with the quota they refine, in the same apply. The quota, not a
  ConfigMap: members hold `edit` in their namespace and could rewrite a
  ConfigMap; `edit` only reads ResourceQuotas.
- Where the server serves `MutatingAdmissionPolicy` (v1 since Kubernetes 1.36),
  one more policy and binding pin a pod that names no flavor to the only flavor
  of its resource name the team holds, so the common case needs no selector.

DRA flavors are not here: a claim names its DeviceClass, whose devices quota
(`<class>.deviceclass.resource.k8s.io/devices`) already tells models apart.
A resource name served by one flavor needs no pinning (the name is the
flavor), only the count.
"""

import json
from dataclasses import dataclass

from provisioning.manifests import QUOTA_NAME
from teams.namespaces import namespace_of

GROUP = "admissionregistration.k8s.io/v1"
VALIDATING_NAME = "gpu-portal-flavor-quota"
MUTATING_NAME = "gpu-portal-flavor-pin"
HOLDINGS_PREFIX = "gpu-portal.io/gpus."
MANAGED = {"app.kubernetes.io/managed-by": "gpu-portal"}

# Pods, and the pod templates of the kinds that make them: the template's refusal
# comes earlier and reads better (a Deployment refused, not its pods failing
# quietly); the pods' is the one no path avoids. Suspended Jobs are left to their
# pods: the portal's batch Jobs wait suspended for their window, before the quota
# for them is held.
TEMPLATE_RULES = [
    {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]},
    {"apiGroups": ["batch"], "apiVersions": ["v1"], "resources": ["jobs", "cronjobs"]},
    {
        "apiGroups": ["apps"],
        "apiVersions": ["v1"],
        "resources": ["deployments", "statefulsets", "replicasets", "daemonsets"],
    },
]


@dataclass(frozen=True)
class PolicyFlavor:
    slug: str
    name: str
    resource_name: str
    node_selector: tuple  # ((label, value), ...), sorted

    @classmethod
    def of(cls, slug, name, resource_name, node_selector):
        return cls(slug, name, resource_name, tuple(sorted((node_selector or {}).items())))

    @property
    def annotation(self):
        # An annotation's name ends with a letter or digit; a slug may end with - or _.
        return HOLDINGS_PREFIX + self.slug + ("" if self.slug[-1:].isalnum() else "0")

    @property
    def selector_text(self):
        return ",".join(f"{k}={v}" for k, v in self.node_selector) or "no node selector"


def _lit(value):
    """A CEL literal for a string, list or map of strings (JSON's syntax is CEL's here)."""
    return json.dumps(value, ensure_ascii=True)


def holdings_annotations(flavors, held):
    """The quota's annotations the policies read: every flavor's holding, 0 when none
    (`held`: {flavor slug: GPUs})."""
    return {f.annotation: str(int(held.get(f.slug, 0))) for f in flavors}


def _by_resource(flavors):
    groups = {}
    for flavor in flavors:
        groups.setdefault(flavor.resource_name, []).append(flavor)
    return sorted(groups.items())


def _ask(resource):
    """What the pod's containers ask for of `resource` (limits, else requests; init
    containers added, not maxed: never less than the pod needs)."""
    key = _lit(resource)

    def amount(field):
        return (
            f"(has(c.resources) && has(c.resources.{field}) && {key} in c.resources.{field}"
            f" ? quantity(string(c.resources.{field}[{key}])).asInteger() : 0)"
        )

    per_container = f"({amount('limits')} > 0 ? {amount('limits')} : {amount('requests')})"
    return f"variables.containers.map(c, {per_container}).sum()"


def _pinned(flavor):
    """Whether the pod's placement keeps it on the flavor's nodes: its nodeSelector has
    every label of the flavor's, or every term of its required node affinity asks
    each label to be exactly the flavor's value."""
    if not flavor.node_selector:
        return "true"
    by_selector = " && ".join(
        f"{_lit(k)} in variables.selector && variables.selector[{_lit(k)}] == {_lit(v)}"
        for k, v in flavor.node_selector
    )
    by_term = " && ".join(
        f"t.matchExpressions.exists(e, e.key == {_lit(k)} && e.operator == 'In'"
        f" && size(e.values) > 0 && e.values.all(x, x == {_lit(v)}))"
        for k, v in flavor.node_selector
    )
    by_affinity = (
        f"size(variables.terms) > 0 && variables.terms.all(t, has(t.matchExpressions) && {by_term})"
    )
    return f"({by_selector}) || ({by_affinity})"


def _held(flavor):
    key = _lit(flavor.annotation)
    return (
        f"has(params.metadata.annotations) && {key} in params.metadata.annotations"
        f" ? int(params.metadata.annotations[{key}]) : 0"
    )


def _variables(flavors):
    spec = (
        "object.kind == 'Pod' ? object.spec"
        " : object.kind == 'CronJob' ? object.spec.jobTemplate.spec.template.spec"
        " : object.spec.template.spec"
    )
    variables = [
        {"name": "spec", "expression": spec},
        {
            "name": "containers",
            "expression": "variables.spec.containers"
            " + (has(variables.spec.initContainers) ? variables.spec.initContainers : [])",
        },
        {
            "name": "selector",
            "expression": "has(variables.spec.nodeSelector) ? variables.spec.nodeSelector : {}",
        },
        {
            "name": "terms",
            "expression": "has(variables.spec.affinity)"
            " && has(variables.spec.affinity.nodeAffinity)"
            " && has(variables.spec.affinity.nodeAffinity"
            ".requiredDuringSchedulingIgnoredDuringExecution)"
            " ? variables.spec.affinity.nodeAffinity"
            ".requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms : []",
        },
        {
            "name": "team",
            "expression": "has(params.metadata.labels)"
            " && 'gpu-portal.io/team' in params.metadata.labels"
            " ? params.metadata.labels['gpu-portal.io/team'] : params.metadata.namespace",
        },
    ]
    for index, (resource, members) in enumerate(_by_resource(flavors)):
        variables.append({"name": f"ask{index}", "expression": _ask(resource)})
        for flavor in members:
            pinned = "true" if len(members) == 1 else _pinned(flavor)
            variables.append({"name": f"pinned_{_var(flavor)}", "expression": pinned})
            variables.append({"name": f"held_{_var(flavor)}", "expression": _held(flavor)})
    return variables


def _var(flavor):
    """The flavor's name in CEL variables: its slug with - and _ as CEL allows
    (`a-b` and `a_b` differ), never starting with a digit."""
    return "f_" + flavor.slug.replace("_", "__").replace("-", "_d")


def _holding_text(flavor):
    return f"{_lit(flavor.name + ' ')} + string(variables.held_{_var(flavor)})"


def _validations(flavors, request_url):
    validations = []
    for index, (resource, members) in enumerate(_by_resource(flavors)):
        ask = f"variables.ask{index}"
        if len(members) > 1:
            choices = " + '; ' + ".join(
                f"{_lit(f'{f.name} ({f.selector_text}): your team holds ')}"
                f" + string(variables.held_{_var(f)})"
                for f in members
            )
            validations.append(
                {
                    "expression": f"{ask} == 0 || "
                    + " || ".join(f"variables.pinned_{_var(f)}" for f in members),
                    "messageExpression": (
                        f"'GPU quota: this asks for ' + string({ask}) + {_lit(' ' + resource)}"
                        " + ' without choosing a GPU flavor. Set spec.nodeSelector to one'"
                        f" + ' flavor of the team ' + variables.team + ': ' + {choices}"
                        f" + '. Request quota: ' + {_lit(request_url)}"
                    ),
                    "reason": "Forbidden",
                }
            )
        for flavor in members:
            held = f"variables.held_{_var(flavor)}"
            validations.append(
                {
                    "expression": f"{ask} == 0 || !variables.pinned_{_var(flavor)}"
                    f" || {held} >= {ask}",
                    "messageExpression": (
                        f"'GPU quota: this asks for ' + string({ask}) + ' x '"
                        f" + {_lit(flavor.name + ' (' + resource + ')')} + '; team '"
                        f" + variables.team + ' holds ' + string({held}) + ' of '"
                        f" + {_lit(flavor.name)} + ' now. Request more: '"
                        f" + {_lit(f'{request_url}?flavor={flavor.slug}')}"
                    ),
                    "reason": "Forbidden",
                }
            )
    return validations


def validating_policy(flavors, *, request_url):
    """The cluster's one ValidatingAdmissionPolicy, for `flavors` (PolicyFlavor, the
    catalog's non-DRA flavors); `request_url` is the portal's quota request page."""
    flavors = sorted(flavors, key=lambda f: f.slug)
    return _policy(
        "ValidatingAdmissionPolicy",
        VALIDATING_NAME,
        TEMPLATE_RULES,
        matchConditions=[
            {
                "name": "not-a-suspended-job",
                "expression": "!(object.kind == 'Job' && has(object.spec.suspend)"
                " && object.spec.suspend)",
            }
        ],
        variables=_variables(flavors),
        validations=_validations(flavors, request_url),
    )


def _policy(kind, name, rules, **spec):
    """An admission policy on CREATE of `rules`, its parameter the team's quota."""
    return {
        "apiVersion": GROUP,
        "kind": kind,
        "metadata": {"name": name, "labels": dict(MANAGED)},
        "spec": {
            "failurePolicy": "Fail",
            "paramKind": {"apiVersion": "v1", "kind": "ResourceQuota"},
            "matchConstraints": {
                "resourceRules": [{**rule, "operations": ["CREATE"]} for rule in rules]
            },
            **spec,
        },
    }


def _team_labels(team_slug):
    return {**MANAGED, "gpu-portal.io/team": team_slug}


def _match_namespace(namespace):
    return {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}}


def validating_binding(team_slug, prefix=""):
    """The team's binding: the policy, in its namespace only, with its quota (the
    holdings on it) as the parameter."""
    return _binding(
        "ValidatingAdmissionPolicyBinding",
        VALIDATING_NAME,
        namespace_of(team_slug, prefix),
        team_slug,
        validationActions=["Deny"],
    )


def _binding(kind, policy_name, namespace, team_slug, **spec):
    return {
        "apiVersion": GROUP,
        "kind": kind,
        "metadata": {"name": f"{policy_name}.{namespace}", "labels": _team_labels(team_slug)},
        "spec": {
            "policyName": policy_name,
            **spec,
            "paramRef": {
                "name": QUOTA_NAME,
                "namespace": namespace,
                "parameterNotFoundAction": "Allow",
            },
            "matchResources": _match_namespace(namespace),
        },
    }


def _pin(members):
    """A pod asking for a shared resource name with no flavor chosen: the node
    selector of the one flavor of it the team holds (`{}` for none or several)."""
    choices = "{}"
    for flavor in reversed(members):
        selector = _lit(dict(flavor.node_selector))
        choices = f"(variables.held_{_var(flavor)} > 0 ? {selector} : {choices})"
    holding = " + ".join(f"(variables.held_{_var(f)} > 0 ? 1 : 0)" for f in members)
    return f"({holding}) == 1 ? {choices} : {{}}"


# A pod's nodeSelector is an atomic map, which an apply configuration may not
# change: JSON patches add the labels, one by one to a selector the pod has.
ADD_LABELS = (
    "size(variables.{pin}) == 0 ? []"
    " : has(object.spec.nodeSelector) ? variables.{pin}.map(k, JSONPatch{{op: 'add',"
    " path: '/spec/nodeSelector/' + jsonpatch.escapeKey(k), value: variables.{pin}[k]}})"
    " : [JSONPatch{{op: 'add', path: '/spec/nodeSelector', value: variables.{pin}}}]"
)


def mutating_policy(flavors):
    """Pins a GPU pod that names no flavor to the only flavor of its resource name
    the team holds (Kubernetes 1.36+: admissionregistration.k8s.io/v1)."""
    flavors = sorted(flavors, key=lambda f: f.slug)
    variables, mutations = _variables(flavors), []
    for index, (_, members) in enumerate(_by_resource(flavors)):
        if len(members) < 2 or not all(f.node_selector for f in members):
            continue
        unpinned = " && ".join(f"!variables.pinned_{_var(f)}" for f in members)
        variables.append(
            {
                "name": f"pin{index}",
                "expression": f"variables.ask{index} > 0 && {unpinned} ? ({_pin(members)}) : {{}}",
            }
        )
        mutations.append(
            {
                "patchType": "JSONPatch",
                "jsonPatch": {"expression": ADD_LABELS.format(pin=f"pin{index}")},
            }
        )
    return _policy(
        "MutatingAdmissionPolicy",
        MUTATING_NAME,
        TEMPLATE_RULES[:1],  # pods: the pin is for what is scheduled
        variables=variables,
        mutations=mutations,
        reinvocationPolicy="Never",
    )


def mutating_binding(team_slug, prefix=""):
    return _binding(
        "MutatingAdmissionPolicyBinding", MUTATING_NAME, namespace_of(team_slug, prefix), team_slug
    )


def team_policies(flavors, team_slug, prefix, *, request_url):
    """The policies and the team's bindings; none when the catalog has no flavor
    the policies could tell apart or count."""
    if not flavors:
        return []
    objects = [validating_policy(flavors, request_url=request_url)]
    objects.append(validating_binding(team_slug, prefix))
    mutating = mutating_policy(flavors)
    if mutating["spec"]["mutations"]:
        objects += [mutating, mutating_binding(team_slug, prefix)]
    return objects
