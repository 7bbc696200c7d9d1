"""The benchmark scripts, one folder per kind (benchmarks/README.md); a package so that a script imports another
kind's by its module path (``benchmarks.leaderboard.leaderboard_table``), run as a file or with ``python -m``."""
