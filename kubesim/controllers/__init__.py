"""The controllers and the scheduler: what kube-controller-manager and
kube-scheduler decide, as pure functions over plain dicts."""
