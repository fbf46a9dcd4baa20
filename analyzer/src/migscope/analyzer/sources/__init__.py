"""Where the analyzer's slice history comes from: one module per source, one protocol for all.

Every source implements :class:`~migscope.analyzer.sources.base.Source` (window, slices,
notes, provenance) and is analysed by :func:`migscope.analyzer.run`:

* :mod:`~migscope.analyzer.sources.file`: an OpenMetrics/text exposition file
  (``--source``), migscope's or dcgm-exporter's series;
* :mod:`~migscope.analyzer.sources.simulation`: the simulator's ground truth (``--simulate``);
* :mod:`~migscope.analyzer.sources.prometheus_source`: a Prometheus-compatible server
  (``--prometheus``: Prometheus, Thanos, Mimir, Cortex, VictoriaMetrics), whose statistics
  are PromQL (:mod:`~migscope.analyzer.sources.remote_stats`) over the HTTP API client
  (:mod:`~migscope.analyzer.sources.prometheus`), with selectors built without injection
  (:mod:`~migscope.analyzer.sources.promql`);
* :mod:`~migscope.analyzer.sources.embedded_prometheus`: another source replayed through a
  real Prometheus started for the run (``--prometheus-embedded``,
  :mod:`~migscope.analyzer.sources.local_prometheus`).

Pending pods (:mod:`~migscope.analyzer.sources.kube_pending`) are demand, not history: they
join the options. ``docs/analyzer-sources.md`` explains how to connect to each server.
"""
