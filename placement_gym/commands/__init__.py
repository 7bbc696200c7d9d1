"""The work of each `placement-gym` command; `placement_gym.cli` parses the arguments and calls it.

One module per command or small group, each command a function ``cmd_NAME(args) -> exit status``:

* `info`: ``info``; `calibrate`: ``calibrate``; `benchmark`: ``benchmark``;
* `run`: ``train`` and ``evaluate`` (one agent on one model), and the running of one agent that ``place`` shares;
* `compare`: ``compare`` (its Ray workers' side, the jobs and their plan, is in `placement_gym.distributed`);
* `deploy`: ``show``, ``place`` and ``export``, the commands around placements as files.

What the commands share, once: `settings` (``KEY=VALUE`` options, the backend and env factory, compare's agents
and their options: also what ``compare --ray``'s workers rebuild), `report` (output paths, the printed tables,
the files written, what is kept when a signal stops a run) and `signals` (SIGINT and SIGTERM handling: one
place for the state of which signal stopped the command).

Nothing is imported here: `placement_gym.cli` imports the command modules, and a Ray worker only what it needs.
"""
