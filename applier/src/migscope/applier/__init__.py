"""Apply recommended MIG layouts through the GPU Operator's MIG Manager, safely.

:mod:`~migscope.applier.applier` runs the per-node workflow; :mod:`~migscope.applier.plan`
reads the analyzer's plan; :mod:`~migscope.applier.steps` records progress on the node and
holds the pure decisions; :mod:`~migscope.applier.configmap`, :mod:`~migscope.applier.lease`,
:mod:`~migscope.applier.audit` and :mod:`~migscope.kube` do one job each.
docs/applier.md explains the workflow, its safety rules and the RBAC it needs.
"""
