"""What the root tests need, checked in one place.

A missing capability fails the test loudly (CI runs as root and must not
skip silently); CCBENCH_SKIP_ROOT_TESTS=1 skips them instead, saying why.
The linux backend's tests also record the run tokens they draw, so that the
leftover check looks only at their own runs when other ccbench runs share
the machine.
"""

from __future__ import annotations

import os

import pytest

SKIP_ENV = "CCBENCH_SKIP_ROOT_TESTS"

#: Run tokens this test session drew (in this process, or seen owned by a runner it started).
OURS: set[str] = set()


def need_root(why: str) -> None:
    """Fail (or skip under CCBENCH_SKIP_ROOT_TESTS=1) unless root; ``why`` says what needs it."""
    if os.geteuid() == 0:
        return
    if os.environ.get(SKIP_ENV) == "1":
        pytest.skip(f"{why}; skipped because {SKIP_ENV}=1")
    pytest.fail(f"{why}: run pytest as root, or set {SKIP_ENV}=1 to skip them", pytrace=False)


def need_linux_backend(why: str = "the linux backend tests need root (network namespaces, veth, TUN)") -> None:
    """Root, and a machine the linux backend can run on, with its Rust emulator and load generator."""
    need_root(why)
    from ccbench.backends.linux.backend import core_problem, environment_problems

    problems = environment_problems()
    if problems:
        pytest.fail("this machine cannot run the linux backend: " + "; ".join(problems), pytrace=False)
    problem = core_problem()
    if problem:
        # ccbench always builds them in: their absence is a broken install, not a reason to skip.
        pytest.fail(f"the Rust emulator and load generator are missing: {problem}", pytrace=False)


@pytest.fixture(autouse=True, scope="module")
def record_run_tokens():
    """Record every run token drawn while the module's tests run (import this fixture to use it)."""
    from ccbench.backends.linux import netns

    real = netns.new_token

    def recording():
        t = real()
        OURS.add(t)
        return t

    netns.new_token = recording
    yield
    netns.new_token = real


def leftovers() -> list:
    """Our runs that left something behind."""
    from ccbench.backends.linux import cleanup

    return [r for r in cleanup.find(include_live=True) if r.token in OURS and not r.empty()]


def assert_nothing_left() -> None:
    left = leftovers()
    assert not left, "left behind: " + "; ".join(f"ccb{r.token}: {r.describe()} {r.namespaces} {r.pids}"
                                                 for r in left)
