"""``python -m ccbench`` and the ``ccbench`` command.

The CLI is imported here, inside the entry point, so that a Ctrl-C while it
loads (a tenth of a second or so: DuckDB, the analysis) ends as one during a
command does, "ccbench: interrupted" and exit 130, not with a traceback.
"""

import sys


def main() -> int:
    try:
        from ccbench.cli import main as cli_main
    except KeyboardInterrupt:
        print("ccbench: interrupted", file=sys.stderr)
        return 130
    return cli_main()


if __name__ == "__main__":
    raise SystemExit(main())
