"""What a cluster's exporters serve to Prometheus: the DCGM exporter and
kube-state-metrics, in the exposition format."""
