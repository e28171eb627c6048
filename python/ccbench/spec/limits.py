"""Hard maxima of the study schema (raising them needs a code change, on purpose).

They bound what one study *describes*; what it would *cost* to run (runs,
simulated packets, sample rows, disk, memory) is estimated and limited in
:mod:`ccbench.spec.cost`, and those limits a user can raise (``--allow-large``).

* Counts (flows per [[flows]] entry, senders, repetitions): 10,000 each —
  far beyond any dumbbell experiment (the largest ready study has 33 flows),
  low enough that a typo of a few digits is caught before a list of a
  billion entries is built.
* Duration: one day of simulated or real time.
* Sample interval: at least 1 µs — samples are stored in whole microseconds,
  so a finer interval only repeats timestamps.
* A link's jitter: at most 10 s — a path whose delay varies by more is
  an outage, not jitter (and the sum of delay and jitter stays far inside
  the simulator's 64-bit clock).
* A link's stalls: pauses of at most 10 s on average (longer is an outage)
  at mean intervals of at least 100 µs (finer would make the simulator draw
  a pause per few packets for nothing) and at most one day.
* ``init_cwnd`` and ``cwnd_clamp``: 1 .. 2^31-1 segments, as Linux: the
  initcwnd route attribute is a u32 taken as min(initcwnd, snd_cwnd_clamp),
  the clamp defaults to ~0, and the kernel's tcp_snd_cwnd_set() warns on a
  window that is not a positive int (TCP_BPF_SNDCWND_CLAMP takes an int > 0).
"""

MAX_COUNT = 10_000
MAX_SENDERS = 10_000
MAX_REPETITIONS = 10_000
MAX_DURATION_NS = 86_400 * 10**9
MIN_SAMPLE_INTERVAL_NS = 1_000
MAX_CWND_SEGMENTS = 2**31 - 1
LINK_JITTER_MAX_NS = 10 * 10**9
STALL_LENGTH_MAX_NS = 10 * 10**9
# A host's latency, median and 90th percentile ([tcp] read_latency and pacing_latency).
HOST_LATENCY_MAX_NS = 100 * 10**6
STALL_EVERY_MIN_NS = 100_000
STALL_EVERY_MAX_NS = 86_400 * 10**9
# Pause processes overlaid on one link (`stalls` as an array of tables).
MAX_STALL_PROCESSES = 4
