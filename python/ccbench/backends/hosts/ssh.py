"""OpenSSH's client, driven by argument lists.

Why OpenSSH and not a Python SSH library: it is on every machine that has
hosts to test, it reads the keys, agents and known_hosts files people
already have (``ssh_config`` in the inventory for jump hosts), it is the
implementation whose host-key checking everybody trusts, and it adds no
dependency. One master connection per host and run (``ControlMaster``)
carries every command of the run, so a command costs a channel, not a
handshake.

Security:

* host keys are verified against the inventory's known_hosts file
  (``StrictHostKeyChecking=yes``; ``accept-new`` only with the explicit
  ``accept_new_host_keys`` option); no global known_hosts, no user config
  unless the inventory names one (``-F none``), no password prompts
  (``BatchMode=yes``), no agent or port forwarding;
* every remote command is an argument list; ssh sends one string to the
  remote shell, so it is ``shlex.join(argv)`` — each argument quoted — and
  never a string assembled from study or inventory values; the destination
  comes after ``--`` (a host name can never be an ssh option; inventory.py
  also refuses names starting with '-');
* nothing here logs or stores keys: messages name the identity *file*.

Every ssh process dies with the controller (PR_SET_PDEATHSIG): the remote
processes then see the end of their stdin and stop.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

from .inventory import Host

SERVER_ALIVE_S = 2  # keepalive every 2 s; 3 missed = the connection is lost
SERVER_ALIVE_COUNT = 3


class SshError(RuntimeError):
    """A host could not be reached or a command on it failed; the message names the host."""

    def __init__(self, host: Host, problem: str, kind: str = "command"):
        super().__init__(f"host {host.label}: {problem}")
        self.host = host
        self.kind = kind  # "hostkey" | "auth" | "unreachable" | "lost" | "command"


@functools.lru_cache(maxsize=None)
def _setpriv() -> Optional[str]:
    return shutil.which("setpriv")


def _dying_with_parent(argv: list[str]) -> list[str]:
    """``argv`` run so that it gets SIGTERM when the thread that started it
    ends (PR_SET_PDEATHSIG, set by util-linux's setpriv before it execs the
    command): an ssh never outlives ccbench. Not a ``preexec_fn``: Python
    code between fork and exec can deadlock while other threads run (a
    Ctrl-C left `ccbench run` hung for good while its cleanup threads
    started ssh). Each ssh also runs in a session of its own (the callers):
    a terminal's Ctrl-C reaches ccbench only, which stops them itself, so a
    second Ctrl-C cannot kill its cleanup's ssh commands half-way."""
    setpriv = _setpriv()
    return [setpriv, "--pdeathsig", "TERM", "--", *argv] if setpriv else argv


def _option_path(path: str) -> str:
    """A file path as one value of an ssh ``-o`` option: ssh splits a value
    at spaces (UserKnownHostsFile takes several files) unless it is quoted,
    and expands %-tokens in it (the inventory refuses double quotes)."""
    return '"' + path.replace("%", "%%") + '"'


def classify(host: Host, stderr: str, accept_new: bool) -> SshError:
    """An ssh failure (exit status 255) as one line saying what to do."""
    text = " ".join((stderr or "").split())
    low = text.lower()
    kh = host.known_hosts
    if "host key verification failed" in low or "host identification has changed" in low \
            or "no matching host key" in low or "host key is known" in low:
        if "changed" in low:
            return SshError(host, f"its host key does not match the one in {kh} (changed key: check the machine, "
                                  "then replace the entry)", "hostkey")
        return SshError(host, f"its host key is not in {kh}: check its fingerprint and add it "
                              f"({shlex.join(['ssh-keyscan', '-p', str(host.port), host.ssh_host])} >> "
                              f"{shlex.quote(kh)}), or set "
                              "accept_new_host_keys = true in the inventory", "hostkey")
    if "permission denied" in low or "too many authentication failures" in low:
        who = host.user or "the login user"
        ident = f"the key {host.identity}" if host.identity else "the keys ssh offers by default (~/.ssh/id_*)"
        return SshError(host, f"refused {ident} for {who}: add the public key to {who}'s "
                              "~/.ssh/authorized_keys there (or fix identity/user in the inventory)", "auth")
    if any(s in low for s in ("connection refused", "timed out", "no route to host", "could not resolve",
                              "network is unreachable", "name or service not known")):
        return SshError(host, f"unreachable ({text or 'no answer'}): check that it is up, sshd runs on port "
                              f"{host.port} and the address is right", "unreachable")
    if any(s in low for s in ("read from master failed", "connection closed", "broken pipe", "timeout, server",
                              "connection reset", "master is dead", "control socket connect", "mux_client")):
        return SshError(host, f"connection lost ({text})", "lost")
    return SshError(host, f"ssh failed: {text or 'exit status 255'}", "unreachable")


class Connection:
    """One host: a master connection and commands over it."""

    def __init__(self, host: Host, *, accept_new: bool = False, connect_timeout_s: int = 10):
        self.host = host
        self.accept_new = accept_new
        self.connect_timeout_s = connect_timeout_s
        self.sudo: list[str] = []  # ["sudo", "-n", "--"] when the login user is not root
        self._dir: Optional[str] = None
        self._master: Optional[subprocess.Popen] = None
        self._ready = False
        self._errf: Any = None
        self._deadline = 0.0

    # -- argv

    def _control(self) -> str:
        """The master's socket (made by :meth:`start`); "none" before: no multiplexing."""
        return "none" if self._dir is None else os.path.join(self._dir, self.host.role)

    def base_argv(self) -> list[str]:
        h = self.host
        argv = ["ssh", "-F", h.ssh_config or "none", "-T",
                "-o", "BatchMode=yes",
                "-o", f"StrictHostKeyChecking={'accept-new' if self.accept_new else 'yes'}",
                "-o", f"UserKnownHostsFile={_option_path(h.known_hosts)}",
                "-o", "GlobalKnownHostsFile=/dev/null",
                "-o", "UpdateHostKeys=no",
                "-o", "PasswordAuthentication=no",
                "-o", "KbdInteractiveAuthentication=no",
                "-o", "ForwardAgent=no", "-o", "ForwardX11=no", "-o", "ClearAllForwardings=yes",
                "-o", f"ConnectTimeout={self.connect_timeout_s}",
                "-o", f"ServerAliveInterval={SERVER_ALIVE_S}", "-o", f"ServerAliveCountMax={SERVER_ALIVE_COUNT}",
                "-o", "LogLevel=ERROR",
                "-o", f"ControlPath={self._control()}",
                "-p", str(h.port)]
        if h.identity:
            argv += ["-i", h.identity.replace("%", "%%"), "-o", "IdentitiesOnly=yes"]  # -i expands %-tokens
        if h.user:
            argv += ["-l", h.user]
        return argv

    def command_argv(self, argv: list[str], *, sudo: bool = True) -> list[str]:
        remote = (self.sudo if sudo else []) + [str(a) for a in argv]
        return self.base_argv() + ["-o", "ControlMaster=no", "--", self.host.ssh_host, shlex.join(remote)]

    # -- the master connection

    def open(self) -> None:
        """Connect (host key, authentication); SshError says what is wrong."""
        self.start()
        self.wait_open()

    def start(self) -> None:
        """Start the master connection (returns at once; :meth:`wait_open` waits for it)."""
        if self._master is not None and self._master.poll() is None:
            return
        if shutil.which("ssh") is None:
            raise SshError(self.host, "this machine has no ssh client: install OpenSSH (apt-get install openssh-client)")
        for f, what in ((self.host.known_hosts, "known_hosts"), (self.host.identity, "identity")):
            if f and not (self.accept_new and what == "known_hosts") and not Path(f).is_file():
                raise SshError(self.host, f"its {what} file {f} does not exist: fix {what} in the inventory",
                               "hostkey" if what == "known_hosts" else "auth")
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="ccbh-", dir="/tmp")  # short: a socket path has ~100 bytes
        argv = self.base_argv() + ["-o", "ControlMaster=yes", "-N", "--", self.host.ssh_host]
        self._errf = tempfile.TemporaryFile()
        self._ready = False
        self._master = subprocess.Popen(_dying_with_parent(argv), stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=self._errf, start_new_session=True)
        self._deadline = time.monotonic() + self.connect_timeout_s + 5

    def wait_open(self) -> None:
        if self._ready and self.alive():
            return
        while True:
            assert self._master is not None
            if os.path.exists(self._control()):
                chk = subprocess.run(self.base_argv() + ["-O", "check", "--", self.host.ssh_host],
                                     capture_output=True, text=True, stdin=subprocess.DEVNULL)
                if chk.returncode == 0:
                    self._ready = True
                    return
            if self._master.poll() is not None:
                self._errf.seek(0)
                err = self._errf.read().decode(errors="replace")
                self._master = None
                raise classify(self.host, err, self.accept_new)
            if time.monotonic() > self._deadline:
                self.close()
                raise SshError(self.host, f"no connection within {self.connect_timeout_s + 5} s", "unreachable")
            time.sleep(0.02)

    def alive(self) -> bool:
        return self._master is not None and self._master.poll() is None

    def close(self) -> None:
        m, self._master = self._master, None
        if m is not None and m.poll() is None:
            m.terminate()
            try:
                m.wait(timeout=3)
            except subprocess.TimeoutExpired:
                m.kill()
                m.wait()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    # -- commands

    def run(self, argv: list[str], *, input: Optional[bytes] = None, timeout: float = 60.0, check: bool = True,
            sudo: bool = True, raw: bool = False) -> subprocess.CompletedProcess:
        """Run a command on the host; its output as text (``raw``: stdout as bytes)."""
        self.open()
        try:
            p = subprocess.run(_dying_with_parent(self.command_argv(argv, sudo=sudo)),
                               input=input if input is not None else b"", capture_output=True, timeout=timeout,
                               start_new_session=True)
        except subprocess.TimeoutExpired:
            raise SshError(self.host, f"`{shlex.join(argv)}` did not finish within {timeout:.0f} s", "lost") from None
        out = subprocess.CompletedProcess(p.args, p.returncode, p.stdout if raw else p.stdout.decode(errors="replace"),
                                          p.stderr.decode(errors="replace"))
        if p.returncode == 255 and not self.alive():
            raise classify(self.host, out.stderr or "the master connection is gone", self.accept_new)
        if check and p.returncode != 0:
            err = " ".join((out.stderr or ("" if raw else out.stdout)).split())[-300:]
            if p.returncode == 255:
                raise classify(self.host, err, self.accept_new)
            raise SshError(self.host, f"`{shlex.join(argv)}` failed (exit {p.returncode}): {err}")
        return out

    def popen(self, argv: list[str], *, stdout=subprocess.PIPE, stderr=None) -> subprocess.Popen:
        """A long-running remote command; its stdin is a pipe (closing it = the end of the remote stdin)."""
        self.open()
        return subprocess.Popen(_dying_with_parent(self.command_argv(argv)), stdin=subprocess.PIPE, stdout=stdout,
                                stderr=stderr, start_new_session=True)


def open_all(conns: list["Connection"]) -> None:
    """Connect to every host at once (from this thread: the masters live as long as it does)."""
    errors = []
    for c in conns:
        try:
            c.start()
        except SshError as e:
            errors.append(e)
    for c in conns:
        if c._master is not None:
            try:
                c.wait_open()
            except SshError as e:
                errors.append(e)
    if errors:
        raise errors[0]


__all__ = ["Connection", "SshError", "classify", "open_all"]
