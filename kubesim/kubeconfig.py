"""A kubeconfig pointing at kubesim, for kubectl and the official client."""

import base64
import os

import yaml


def kubeconfig(
    url: str,
    *,
    context: str = "kubesim",
    namespace: str = "default",
    token: str | None = None,
    ca_pem: bytes | None = None,
) -> dict:
    cluster = {"server": url}
    if ca_pem:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": cluster}],
        "users": [{"name": context, "user": {"token": token} if token else {}}],
        "contexts": [
            {
                "name": context,
                "context": {"cluster": context, "user": context, "namespace": namespace},
            }
        ],
        "current-context": context,
        "preferences": {},
    }


def write_kubeconfig(path: str, url: str, **kwargs) -> str:
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    with open(path, "w") as handle:
        yaml.safe_dump(kubeconfig(url, **kwargs), handle, sort_keys=False)
    return path
