"""What a cluster's exporters serve to Prometheus: the DCGM exporter and
kube-state-metrics (their text format is kubesim/exposition.py)."""
