"""The hosts backend: a study on real machines over SSH (docs/hosts-backend.md).

inventory.py reads the ``[hosts]`` table (of the study or of an
``--inventory`` file); ssh.py is OpenSSH's client driven by argument lists;
deploy.py copies the standalone ``ccbench-load`` / ``ccbench-emu`` binaries
into a run directory on each host; preflight.py checks every host before any
run; remote.py sets up and removes what a run creates on a host; backend.py
is the backend; cleanup.py finds what a killed controller left
(``ccbench doctor --cleanup --inventory FILE``). Importing this package
imports none of them.
"""
