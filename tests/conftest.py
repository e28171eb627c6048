"""Settings every test process needs.

The Ctrl-C tests send SIGINT to a child ccbench, as a terminal would. A
child inherits an ignored SIGINT from its parent (a suite started under
`nohup`, or as `cmd &` from a script, has it ignored), and Python then
never turns it into KeyboardInterrupt: those tests would fail on how the
suite was launched, not on ccbench. So the suite restores the terminal's
default for its own children.
"""

import signal

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    # A Python-level handler is reset to the default at exec: children see SIGINT.
    signal.signal(signal.SIGINT, signal.default_int_handler)
