"""kube-controller-manager and kube-scheduler: one module per controller (the part
that reads the store and writes the results), each beside the pure module of its
decisions (jobs, workloads, nodes, scheduler, xid)."""
