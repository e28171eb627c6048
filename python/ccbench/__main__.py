"""``python -m ccbench``: the same as the ``ccbench`` command."""

from ccbench.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
