"""The linux backend: real kernel TCP in network namespaces (see docs/linux-backend.md).

netns.py builds and tears down a run's namespaces, links and TUN device;
procs.py starts and stops its processes (emulator, load server and clients,
the *_proc.py modules); backend.py is the backend; cleanup.py finds and
removes what killed runs left behind. Importing this package imports none of
them (the *_proc.py modules start fast).
"""
