"""`python -m ccbench.backends.linux.iperf3_proc CONFIG RESULT READY`: an iperf3 server or client.

Started by the linux backend inside a network namespace (see proc_main.py and iperf3.py).
"""

import sys

from ccbench.backends.linux.proc_main import main

if __name__ == "__main__":
    sys.exit(main("run", impl="ccbench.backends.linux.iperf3"))
