"""Prometheus history for a described workload, and the exact answer billing must find.

    python -m kubesim history --cluster FILE --workload FILE --from T --to T --out FILE
        [--step 60s] [--answer FILE.json|FILE.csv] [--threshold 0.05] [--metrics REGEX]
        [--split 24h]

Plays the workload on the cluster's nodes step by step (sim time, nothing served)
and writes, per step, the samples the live endpoints would have served at that
moment: kube-state-metrics (`ksm.*_rows`) and one DCGM exporter per GPU node
(`dcgm.sample`), rendered by the same functions as `/metrics/kube-state-metrics` and
`/metrics/dcgm/{node}`. The output is OpenMetrics text for `promtool tsdb
create-blocks-from openmetrics`: one family after another (each family is spooled to
its own temporary file while the steps run, so memory stays bounded by the pods
alive at one time), samples of a series in time order, `# EOF` at the end.

The answer (JSON or CSV) has one row per pod and hour in which the pod held GPUs:
GPUs held, minutes held, GPU-minutes at/above and below the utilisation threshold
(DCGM_FI_PROF_GR_ENGINE_ACTIVE, as exported), GPU-minutes with no DCGM sample (scrape
gaps), mean utilisation and peak framebuffer. The file format is in docs/kubesim.md.
"""
