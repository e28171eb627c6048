"""ccbench: controlled, repeated experiments on TCP congestion control."""

__version__ = "0.1.0"
