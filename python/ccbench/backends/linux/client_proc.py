"""`python -m ccbench.backends.linux.client_proc CONFIG RESULT READY`: runs ccbench._core.load_client.

Started by the linux backend inside a network namespace (see proc_main.py).
"""

import sys

from ccbench.backends.linux.proc_main import main

if __name__ == "__main__":
    sys.exit(main("load_client"))
