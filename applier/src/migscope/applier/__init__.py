"""Apply recommended MIG layouts through the GPU Operator's MIG Manager, safely.

:mod:`~migscope.applier.applier` decides which nodes to change and runs them;
:mod:`~migscope.applier.workflow` takes one node through the resumable label workflow;
:mod:`~migscope.applier.preflight` says why a node may not be changed now;
:mod:`~migscope.applier.describe` and :mod:`~migscope.applier.outcome` say what a run did or
would do; :mod:`~migscope.applier.plan` reads the analyzer's plan through the report
contract; :mod:`~migscope.applier.steps` records progress on the node and holds the pure
decisions; :mod:`~migscope.applier.configmap`, :mod:`~migscope.applier.lease`,
:mod:`~migscope.applier.audit` and :mod:`~migscope.kube` do one job each;
:mod:`~migscope.applier.clock` is where all of them get the time (tests simulate it).
docs/applier.md explains the workflow, its safety rules and the RBAC it needs.
"""
