"""The leaderboard and sample efficiency: every agent on every case, its tables, the suites' reference results."""
