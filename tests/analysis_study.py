"""Small real studies (simulator) for the report and compare tests."""

from __future__ import annotations

from pathlib import Path

from ccbench.cli import main

SWEEP_STUDY = """\
[study]
name = "{name}"
duration = "4s"
repetitions = {reps}
seed = {seed}
sample_interval = "100ms"

[topology]
senders = 2

[topology.bottleneck]
rate = "20Mbit"
delay = "10ms"
loss = "{loss}"

[[flows]]
cca = "reno"
start_jitter = "100ms"

[[flows]]
cca = "reno"
sender = 1
start = "1s"
start_jitter = "100ms"

[[flows]]
cca = "cubic"
kind = "rpc"
request = "10KB"
response = "100B"
sender = 1

[sweep]
{sweep}
"""


def run_study(directory: Path, *, name: str = "report-test", reps: int = 3, seed: int = 1, loss: str = "0%",
              sweep: str = '"topology.bottleneck.loss" = ["0%", "1%"]\n"flows.0.cca" = ["reno", "bbr"]') -> Path:
    """Write the study, run it on the simulator, return the results directory."""
    directory.mkdir(parents=True, exist_ok=True)
    study = directory / f"{name}.toml"
    study.write_text(SWEEP_STUDY.format(name=name, reps=reps, seed=seed, loss=loss, sweep=sweep))
    out = directory / "results"
    assert main(["run", str(study), "--out", str(out)]) == 0
    return out
