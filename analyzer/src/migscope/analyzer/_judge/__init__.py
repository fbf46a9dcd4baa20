"""The judge: what each slice's window says about it, and what the pool must offer.

The second step of the analyzer's flow (intake → judge → plan → report): a slice's statistics
become a verdict (:mod:`.classify`, under the thresholds of :mod:`.policy`), a slice that
must not be re-created pins its GPU (:mod:`.safety`), the verdicts become a demand per pool
(:mod:`.demand`), and a right-sized request per workload (:mod:`.workloads`, :mod:`.claims`
for DRA claims). Pure decision code: data in, data out.
"""
