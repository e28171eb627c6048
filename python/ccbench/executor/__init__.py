"""Executors: run a study's runs on a backend and commit each to the store.

``execute`` runs locally (serially, or in a process pool with ``jobs > 1``)
and resumes: runs already finished in the results directory are skipped.
A Dask executor will sit next to it later.
"""

from ccbench.executor.local import INTERRUPT_GRACE_S, ExecutionSummary, Outcome, Progress, execute, run_one, worker_count

__all__ = ["execute", "run_one", "ExecutionSummary", "Outcome", "Progress", "INTERRUPT_GRACE_S", "worker_count"]
