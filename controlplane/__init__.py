"""The real Kubernetes control plane the portal is tested against beside kubesim:
etcd, kube-apiserver, kube-controller-manager and kube-scheduler built from the
Go module proxy (kube/), KWOK GPU nodes (kwok/, kwok.yaml) made from kubesim's
cluster files, kube-state-metrics (kube-state-metrics/) and DCGM exporter pages
(dcgm.py). `make cluster-binaries` builds, `make cluster` runs it."""
