"""The aggregated layout MILP, built and solved with HiGHS.

Variables (all integer):

* ``k[c]``: GPUs of class ``c`` that keep their current target (``0..|c|``; exactly ``|c|``
  for a class of frozen GPUs).
* ``m[K, t]``: GPUs of pool ``K`` (same kept instances) that change to candidate ``t``.
* ``Z[t]``: GPUs with target ``t`` that are *used* (hold a demanded or in-use instance).
* ``y[t, p]``, ``yb[t, p]``: instances of profile ``p`` counted towards demand on GPUs with
  target ``t`` without and with in-use instances (``yb`` exists where busy GPUs can have
  ``t``).

Constraints:

* pool balance: ``sum_t m[K, t] + sum_{c in K} k[c] = |K|``;
* used GPUs exist: ``Z[t] <= T[t]`` where ``T[t] = sum_{c: cur(c)=t} k[c] + sum_K m[K, t]``;
* busy GPUs are used: ``Z[t] >= B[t]``, the busy part of ``T[t]``;
* coverage fits: ``y[t, p] <= count_t(p) * (Z[t] - B[t])``, ``yb[t, p] <= count_t(p) * B[t]``;
* a used GPU without in-use instances holds a demanded one: ``sum_p y[t, p] >= Z[t] - B[t]``
  (redundant at the optimum; it makes ``Z`` count exactly the GPUs the plan reports used);
* no over-counting: ``sum_t (y[t, p] + yb[t, p]) <= D[p]``.

Objective (``W`` = :class:`~migscope.analyzer._plan.pool.Weights`, ``g_p`` compute slices
of ``p``, ``C`` of the GPU), with the constants folded into HiGHS's objective offset::

    W.unmet    * sum_p g_p (D[p] - sum_t (y[t, p] + yb[t, p]))
  + W.change   * sum_c (|c| - k[c])
  + W.busy     * sum_{c busy} (|c| - k[c])
  + W.stranded * (C * sum_t Z[t] - sum_{t,p} g_p (y[t, p] + yb[t, p]))
  + W.used     * sum_t Z[t]

**Staged solve.** Lexicographic weights span nine orders of magnitude at 10,000 GPUs, which
HiGHS's tolerances cannot honour (it warns, and stalls at the root). When ``W.unmet``
dominates every other term (as :meth:`Weights.lexicographic` makes it), the same optimum is
reached in two well-scaled solves: first maximise covered compute slices, then fix that
coverage with a constraint and minimise the rest of the objective. The reported objective and
bound are those of the weighted sum.

**Warm starts.** Constructive plans (:mod:`~migscope.analyzer._plan._heuristics`) are
completed into full solutions (the model with their layouts fixed) and handed to HiGHS, so
the result is never worse than the best of them, even when the time limit stops the search.

The same model with ``k`` and ``m`` fixed gives the best coverage of given layouts, which is
how the baselines are scored.

The modules, each one job: :mod:`.model` builds the columns and rows above, :mod:`.session`
runs HiGHS on them and checks what it returns, :mod:`.search` is the strategy (warm starts,
staged solve) and reads the answer back as a :class:`MilpResult`.
"""

from __future__ import annotations

from migscope.analyzer._plan._milp.search import MilpResult, solve

__all__ = ["MilpResult", "solve"]
