"""`python -m ccbench.backends.linux.emu_proc CONFIG RESULT READY`: runs ccbench._core.emu_run.

Started by the linux backend inside a network namespace (see proc_main.py).
"""

import sys

from ccbench.backends.linux.proc_main import main

if __name__ == "__main__":
    sys.exit(main("emu_run"))
