"""Kubernetes protobuf request bodies: the envelope, kinds and fields kubesim decodes,
and clear errors for what it cannot (kubectl's own bodies are tested in test_kubectl)."""

import json
import urllib.request

import pytest

from kubesim.apiserver import protobuf
from kubesim.apiserver.errors import BadRequest


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = b""
    while True:
        byte, value = value & 0x7F, value >> 7
        if value:
            out += bytes([byte | 0x80])
        else:
            return out + bytes([byte])


def field(number: int, value) -> bytes:
    """One protobuf field: an int is a varint, bytes/str are length-delimited."""
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    data = value.encode() if isinstance(value, str) else value
    return varint(number << 3 | 2) + varint(len(data)) + data


def envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    type_meta = field(1, api_version) + field(2, kind)
    return protobuf.MAGIC + field(1, type_meta) + field(2, raw) + field(3, "") + field(4, "")


def post(sim, path, body: bytes):
    request = urllib.request.Request(sim.url + path, data=body, method="POST")
    request.add_header("Content-Type", protobuf.CONTENT_TYPE)
    request.add_header("Accept", f"{protobuf.CONTENT_TYPE}, application/json")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.headers["Content-Type"], json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], json.loads(error.read())


def job_body(*, backoff_limit=None, extra_spec=b"") -> bytes:
    container = field(1, "main") + field(2, "busybox:1.36") + field(3, "sleep") + field(3, "5")
    container += field(8, field(1, field(1, "nvidia.com/gpu") + field(2, field(1, "1"))))
    container += field(5, "") + field(16, 0)  # empty non-pointer fields Go always writes
    pod_spec = field(2, container) + field(3, "Never") + field(6, "")
    template = field(1, field(8, b"")) + field(2, pod_spec)
    spec = field(6, template) + extra_spec
    if backoff_limit is not None:
        spec += field(7, backoff_limit)
    meta = field(1, "train") + field(3, "default") + field(8, b"") + field(7, 0)
    meta += field(11, field(1, "team") + field(2, "a"))
    return envelope("batch/v1", "Job", field(1, meta) + field(2, spec) + field(3, field(1, 3)))


def test_a_protobuf_job_is_created_and_answered_in_json(kubesim):
    status, content_type, created = post(
        kubesim,
        "/apis/batch/v1/namespaces/default/jobs",
        job_body(backoff_limit=0, extra_spec=field(10, 1)),
    )
    assert (status, content_type) == (201, "application/json")
    assert created["metadata"]["labels"]["team"] == "a"
    assert created["spec"]["backoffLimit"] == 0  # a pointer's zero is kept
    assert created["spec"]["suspend"] is True
    container = created["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["sleep", "5"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert "workingDir" not in container and "stdin" not in container
    assert created["status"] == {}  # status in a create body is ignored


def test_decode_eviction_for_drain():
    options = field(1, 30) + field(2, field(1, "uid-1"))
    meta = field(1, "train-abcde") + field(3, "default")
    body = envelope("policy/v1", "Eviction", field(1, meta) + field(2, options))
    assert protobuf.decode(body) == {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "train-abcde", "namespace": "default"},
        "deleteOptions": {"gracePeriodSeconds": 30, "preconditions": {"uid": "uid-1"}},
    }


def test_negative_and_time_values():
    meta = field(1, "x") + field(10, -1) + field(8, field(1, 1764547200))
    decoded = protobuf.decode(envelope("v1", "Namespace", field(1, meta)))
    assert decoded["metadata"] == {
        "name": "x",
        "deletionGracePeriodSeconds": -1,
        "creationTimestamp": "2025-12-01T00:00:00Z",
    }


def test_an_unknown_field_with_content_is_refused_not_dropped(kubesim):
    body = job_body(extra_spec=field(11, field(1, field(1, "FailJob"))))  # podFailurePolicy
    status, _, answer = post(kubesim, "/apis/batch/v1/namespaces/default/jobs", body)
    assert status == 415
    assert answer["message"] == (
        "kubesim cannot decode field 11 of JobSpec (at Job.spec) from "
        "application/vnd.kubernetes.protobuf; send the object as JSON "
        "(kubectl create -f / apply -f)"
    )
    assert kubesim.store.list("jobs") == []


def test_an_unknown_kind_is_refused(kubesim):
    body = envelope("v1", "ConfigMap", field(1, field(1, "x")))
    status, _, answer = post(kubesim, "/api/v1/namespaces", body)
    assert status == 415 and "kind 'ConfigMap' of 'v1'" in answer["message"]


@pytest.mark.parametrize(
    "body",
    [
        b"not protobuf",
        protobuf.MAGIC + b"\x0a\x40",  # a length past the end
        protobuf.MAGIC + b"\x0a",  # a truncated varint
        protobuf.MAGIC + b"\x0f",  # wire type 7
    ],
)
def test_malformed_bodies_are_bad_requests(kubesim, body):
    status, _, answer = post(kubesim, "/api/v1/namespaces", body)
    assert status == 400 and answer["reason"] == "BadRequest"
    with pytest.raises(BadRequest):
        protobuf.decode(body)
