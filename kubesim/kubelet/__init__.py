"""The kubelet: how a pod's containers run on its node over simulated time."""
