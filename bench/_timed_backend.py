"""The sim backend, with when and where each run ran (for bench/sweep_scale.py).

Importable by name on every worker (the bench puts bench/ on PYTHONPATH).
"""

from __future__ import annotations

import os
import time

from ccbench.backends.sim import SimBackend


class TimedSim(SimBackend):
    name = "sim"

    def run(self, runspec):
        t0, c0 = time.time(), time.thread_time()
        result = super().run(runspec)
        result.stats = {**result.stats, "bench_start": t0, "bench_end": time.time(), "bench_pid": os.getpid(),
                        "bench_cpu": time.thread_time() - c0}
        return result
