"""The kernel tests' retry (kernel_retry.py): when it skips and when it
lets a spoiled measurement fail its test."""

import pytest

import kernel_retry
from kernel_retry import STEAL_MAX, until_clean


@pytest.fixture(autouse=True)
def _no_pause(monkeypatch):
    monkeypatch.setattr(kernel_retry, "PAUSE_S", 0.0)


def _tries(results):
    it = iter(results)
    return lambda: next(it)


def test_a_clean_try_ends_the_retries():
    out = until_clean(_tries([("late", 0.3), ("ok", 0.3), ("late", 0.3)]), lambda x: x[0] == "late",
                      lambda x: x[0], attempts=3, steal=lambda x: x[1])
    assert [x[0] for x in out] == ["late", "ok"]


def test_every_try_spoiled_while_the_hypervisor_took_the_cpu_is_skipped():
    with pytest.raises(pytest.skip.Exception, match=r"took 20\.0-30\.0% of a CPU in each of 2 tries"):
        until_clean(_tries([("late", 0.3), ("late", 0.2)]), lambda x: x[0] == "late", lambda x: x[0],
                    attempts=2, steal=lambda x: x[1])


def test_a_spoiled_try_without_steal_is_left_to_fail_its_test():
    # One try with steal at the bar: the lateness may be the code's, so the
    # test gets the spoiled result to judge (and fail).
    out = until_clean(_tries([("late", 0.3), ("late", STEAL_MAX)]), lambda x: x[0] == "late",
                      lambda x: x[0], attempts=2, steal=lambda x: x[1])
    assert [x[0] for x in out] == ["late", "late"]
    # Without a steal reader nothing is skipped.
    out = until_clean(_tries([("late", 0.9)]), lambda x: x[0] == "late", lambda x: x[0], attempts=1)
    assert len(out) == 1


def test_a_run_retried_by_ccbench_itself_is_skipped_only_when_late_under_steal():
    late = {"suspect_kinds": ["emulator"], "steal": {"1": 0.25}}
    with pytest.raises(pytest.skip.Exception, match=r"took 25\.0% of a CPU"):
        kernel_retry.skip_if_stolen(late, "suspect", "the run")
    kernel_retry.skip_if_stolen({**late, "steal": {"1": 0.01}}, "suspect", "the run")  # the test judges it
    kernel_retry.skip_if_stolen({"suspect_kinds": ["kernel"], "steal": {"1": 0.25}}, "suspect", "the run")
    kernel_retry.skip_if_stolen({"steal": {"1": 0.25}}, "ok", "the run")
