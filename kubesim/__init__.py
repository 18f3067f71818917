"""kubesim: an embedded Kubernetes API server simulator for demos, tests and benchmarks.

It imports nothing from the portal: the portal reaches it only over HTTP, through
the official `kubernetes` client and kubectl. See docs/kubesim.md.
"""
