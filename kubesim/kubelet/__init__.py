"""The kubelet: how a pod's containers run over simulated time (runtime.py, pure),
the kubelet that carries it out on every node (kubelet.py), and the XIDs a GPU's
driver reports (xids.py)."""
