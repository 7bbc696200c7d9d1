"""The command line under stress: SIGTERM and Ctrl-C keep the finished runs, outputs are checked up front
(none over another, none over an input, none over an existing file without --overwrite), a PPO run leaves
nothing in the temp folder, a user's agent that does not load is one line, and calibrate's counts are bounded.

Real parts: the CLI run as a subprocess and stopped with real signals, the simulated backend on tiny models,
real files.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from agents.core.run import RunAgent
from placement_gym import cli, evaluation

REPO = Path(__file__).resolve().parent.parent
#: The env var naming the file `WaitsOnSeed1` creates when its seed 1 starts (seed 0 has finished by then).
MARKER_ENV = "PLACEMENT_GYM_TEST_MARKER"
#: How long a test waits for an event of a command it started (seed 1 starting, the command ending): only a
#: ceiling for a command that hangs, far above what a busy machine takes (Ray's start included), so that no
#: outcome depends on the machine being idle; twice of it stays below pytest's timeout (setup.cfg, 900 s).
CEILING_S = 300


class WaitsOnSeed1(RunAgent):
    """Measures one placement, except on seed 1, where it creates the file named by `MARKER_ENV` (so a test
    knows seed 0's run has finished) and waits, as a long run does, until a signal stops it, or until the test
    removes the file (a Ray worker may outlive the command the test signalled)."""

    name = "waits-on-seed-1"

    def train(self, run, seed):
        if seed == 1:
            marker = Path(os.environ[MARKER_ENV])
            marker.touch()
            deadline = time.monotonic() + CEILING_S  # never outlive a test by much, whatever happened to it
            while marker.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        run.env.reset(seed=seed)
        run.env.step(np.zeros(run.base.graph.n_ops, dtype=np.int64))

    def predict(self, obs, deterministic=True):
        return np.zeros(len(obs["placement"]), dtype=np.int64)


def _run_and_signal(signum: int, command: str, tmp_path: Path, *extra: str) -> tuple[int, str]:
    """Run ``placement-gym COMMAND`` with `WaitsOnSeed1` on tiny_chain (seeds 0, 1, 2) in a subprocess, send it
    `signum` once seed 0's run has finished, and return its exit status and stderr."""
    marker = tmp_path / "seed1-started"
    agent = ["--agents" if command == "compare" else "--agent", "tests.test_reliability_cli:WaitsOnSeed1"]
    model = ["--models" if command == "compare" else "--model", "tiny_chain"]
    argv = [sys.executable, "-m", "placement_gym.cli", command, *agent, *model, "--backend", "simulated",
            "--budget", "3", "--seeds", "3", "--json", str(tmp_path / "partial.json"), *extra]
    env = {**os.environ, MARKER_ENV: str(marker),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    # SIGINT as a terminal's foreground command has it: a suite started in the background (``cmd &`` in a script)
    # passes SIGINT on ignored, which the CLI leaves alone by design
    # (`placement_gym.commands.signals.signals_interrupt`)
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        # Waits on events (the marker, the command's end), each under a ceiling only a hung command reaches.
        deadline = time.monotonic() + CEILING_S
        while not marker.exists():
            assert proc.poll() is None, f"the command ended before seed 1 started: {proc.communicate()}"
            assert time.monotonic() < deadline, f"seed 1 did not start within {CEILING_S} s"
            time.sleep(0.05)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=CEILING_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        marker.unlink(missing_ok=True)  # ends seed 1's wait wherever it still runs
    return proc.returncode, err


@pytest.mark.parametrize("command", ["train", "evaluate", "compare"])
def test_sigterm_keeps_the_finished_runs(tmp_path, command):
    rc, err = _run_and_signal(signal.SIGTERM, command, tmp_path, "--no-progress")
    assert rc == 143  # 128 + SIGTERM, as a shell reports it
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"placement-gym {command}: interrupted by SIGTERM after 1 finished run(s) of 3" \
        in lines[0], err
    data = json.loads((tmp_path / "partial.json").read_text())
    assert data["incomplete"] is True and data["interrupted"]["finished_runs"] == 1
    assert [r["seed"] for r in data["records"]] == [0]
    assert (tmp_path / "partial.csv").exists()
    if command == "train":  # the finished seed's checkpoint is kept
        assert (tmp_path / "partial.seed0.pt").exists() and not (tmp_path / "partial.seed1.pt").exists()


def test_sigterm_keeps_the_finished_runs_of_compare_on_ray(tmp_path):
    # Starting Ray gives the process SIGTERM handlers of Ray's own, which exit at once.
    rc, err = _run_and_signal(signal.SIGTERM, "compare", tmp_path, "--no-progress", "--ray", "local:1")
    assert rc == 143
    assert err.strip().splitlines()[-1].startswith(
        "placement-gym compare: interrupted by SIGTERM after 1 finished run(s) of 3"), err  # Ray says more before
    data = json.loads((tmp_path / "partial.json").read_text())
    assert data["incomplete"] is True and [r["seed"] for r in data["records"]] == [0]


@pytest.fixture
def default_signal_handlers():
    """SIGINT and SIGTERM handled Python's default way while the test runs (as in a fresh `placement-gym`
    process; a test before may have left Ray's SIGTERM handler in this one), the earlier handlers after."""
    defaults = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}
    previous = {signum: signal.signal(signum, handler) for signum, handler in defaults.items()}
    yield
    for signum, handler in previous.items():
        signal.signal(signum, handler)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_the_results_are_written_waits_until_they_are(tmp_path, capsys, monkeypatch, signum,
                                                                    default_signal_handlers):
    # The signal is real, sent to this process from inside the report (after the records' JSON is written,
    # before the curves' picture is); before, its KeyboardInterrupt ended the command with "nothing saved".
    plot_curves = cli.results.plot_curves

    def signalled_midway(*args, **kwargs):
        os.kill(os.getpid(), signum)
        return plot_curves(*args, **kwargs)

    monkeypatch.setattr(cli.results, "plot_curves", signalled_midway)
    out = tmp_path / "r.json"
    assert cli.main(["compare", "--models", "tiny_chain", "--agents", "random", *RUN, "--json", str(out)]) \
        == 128 + signum
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith("while writing the results; they were written in full"), err
    assert json.loads(out.read_text())["records"] and out.with_suffix(".png").exists()
    assert "incomplete" not in json.loads(out.read_text())
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers put back after main


@pytest.mark.parametrize("command", ["train", "compare"])
def test_the_interrupt_message_starts_its_own_line_after_the_progress_bar(tmp_path, command):
    rc, err = _run_and_signal(signal.SIGINT, command, tmp_path)  # progress bars on
    assert rc == 130
    message = f"placement-gym {command}: interrupted after 1 finished run(s) of 3"
    assert message in err
    assert any(line.startswith(message) for line in err.splitlines()), err[-300:]


# --------------------------------------------------------------------------------------- output paths
RUN = ["--backend", "simulated", "--budget", "2", "--seeds", "1", "--no-progress"]


@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]])
def test_compare_refuses_a_json_path_its_curves_would_replace(tmp_path, capsys, overwrite):
    out = tmp_path / "r.png"
    argv = ["compare", "--models", "tiny_chain", "--agents", "random", *RUN, "--json", str(out), *overwrite]
    assert cli.main(argv) == 2
    printed = capsys.readouterr()
    assert printed.out == ""  # refused before any run: no table
    err = printed.err.strip()
    assert "\n" not in err and "--json and the curves PNG beside --json (--plot moves it) are both" in err
    assert str(out) in err and not out.exists()


@pytest.mark.parametrize("command, flags, named", [
    ("compare", ["--json", "x.json", "--csv", "x.json"], "--json and --csv are both"),
    ("evaluate", ["--json", "x.json", "--plot", "x.json"], "--json and --plot are both"),
    ("train", ["--json", "x.pt"], "--json and the checkpoint beside --json (--save moves it) are both"),
    ("train", ["--json", "x.json", "--seeds", "2", "--plot", "x.seed1.placement.png"],
     "--plot and the seed 1 best-placement picture beside --json (--save moves it) are both"),
])
def test_two_outputs_at_one_path_are_refused_even_with_overwrite(tmp_path, capsys, command, flags, named):
    agent = ["--agents" if command == "compare" else "--agent", "random"]
    model = ["--models" if command == "compare" else "--model", "tiny_chain"]
    flags = [str(tmp_path / f) if f.startswith("x.") else f for f in flags]
    assert cli.main([command, *agent, *model, *RUN, *flags, "--overwrite"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and named in err and "even with --overwrite" in err
    assert list(tmp_path.iterdir()) == []  # nothing ran, nothing was written


def test_evaluate_refuses_to_write_over_the_agent_it_loads(tmp_path, capsys):
    saved = tmp_path / "agent.pt"
    saved.write_bytes(b"a checkpoint")
    argv = ["evaluate", "--agent", "random", "--model", "tiny_chain", "--load", str(saved), *RUN,
            "--json", str(saved), "--overwrite"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"--load and --json are both {saved}: the output would replace the input" in err
    assert saved.read_bytes() == b"a checkpoint"


@pytest.mark.parametrize("agent, extra, named", [
    ("hsdag", ["--agent-option", "hidden_channels=8"], "--agent-option applies only to an agent built here"),
    ("hybrid:hsdag", [], "the 'hybrid:' prefix applies only to an agent built here"),
])
def test_evaluate_load_refuses_settings_it_would_ignore(tmp_path, capsys, agent, extra, named):
    """A saved agent runs with its saved settings: options it would not use are refused, not silently dropped."""
    saved = tmp_path / "agent.pt"
    saved.write_bytes(b"a checkpoint")
    argv = ["evaluate", "--agent", agent, "--model", "tiny_chain", "--load", str(saved), *RUN, *extra]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "evaluate --load runs the saved agent with the settings it was saved with" in err
    assert named in err and list(tmp_path.iterdir()) == [saved]


def test_an_existing_folder_is_refused_before_the_run_even_with_overwrite(tmp_path, capsys):
    folder = tmp_path / "results"
    folder.mkdir()
    argv = ["evaluate", "--agent", "random", "--model", "tiny_chain", *RUN, "--json", str(folder), "--overwrite"]
    assert cli.main(argv) == 2
    printed = capsys.readouterr()
    assert printed.out == "" and printed.err.strip() == f"placement-gym evaluate: error: --json: {folder} is a " \
        "folder; give a file path"


def test_show_refuses_to_draw_over_the_file_it_reads(tmp_path, capsys):
    results_file = tmp_path / "r.json"
    assert cli.main(["compare", "--models", "tiny_chain", "--agents", "random", *RUN, "--json",
                     str(results_file)]) == 0
    before = results_file.read_bytes()
    capsys.readouterr()
    assert cli.main(["show", str(results_file), "--out", str(results_file), "--overwrite"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"FILE and --out are both {results_file}" in err
    assert results_file.read_bytes() == before


def test_calibrate_refuses_to_write_its_profile_over_a_model_it_reads(tmp_path, capsys):
    model = tmp_path / "model.onnx"
    model.write_bytes(b"a model")
    assert cli.main(["calibrate", "--model", str(model), "--out", str(model), "--overwrite"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"--model {model} and --out are both {model}" in err
    assert model.read_bytes() == b"a model"


@pytest.mark.parametrize("command", ["train", "evaluate", "compare"])
def test_a_seed_given_twice_is_refused_in_one_line_before_any_run(tmp_path, capsys, command):
    # Before, train ran both runs, then refused its results file at the end (rc 2, nothing written); with
    # --overwrite the second seed's checkpoint replaced the first's.
    agent = ["--agents" if command == "compare" else "--agent", "random"]
    model = ["--models" if command == "compare" else "--model", "tiny_branch"]
    out = tmp_path / "t.json"
    with pytest.raises(SystemExit) as stopped:
        cli.main([command, *agent, *model, *RUN, "--seed", "0", "1", "0", "--json", str(out), "--overwrite"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err == f"placement-gym {command}: error: argument --seed: seed 0 is given twice (seeds [0, 1, 0]); " \
                  "expected each seed once", err
    assert list(tmp_path.iterdir()) == []  # nothing ran, nothing was written
    with pytest.raises(ValueError, match="seed 0 is given twice"):  # the library refuses it too
        evaluation.seed_list([0, 1, 0])


@pytest.mark.parametrize("command", ["train", "evaluate", "compare", "place"])
@pytest.mark.parametrize("flag, value, said", [
    ("--budget", "-1", "argument --budget: found -1; expected placements to measure, an integer >= 0"),
    ("--budget", "abc", "argument --budget: 'abc' is not an integer; expected placements to measure, an integer >= 0"),
    ("--budget", "1.5", "argument --budget: '1.5' is not an integer; expected placements to measure, an integer >= 0"),
    ("--seeds", "0", "argument --seeds: found 0; expected a number of seeds, an integer >= 1"),
], ids=["budget -1", "budget abc", "budget 1.5", "seeds 0"])
def test_a_bad_budget_or_seed_count_is_refused_in_one_line_before_any_run(tmp_path, capsys, command, flag, value,
                                                                         said):
    agent = ["--agents" if command == "compare" else "--agent", "random"]
    model = ["--models" if command == "compare" else "--model", "tiny_branch"]
    out = ["--out", str(tmp_path / "placed")] if command == "place" else ["--json", str(tmp_path / "t.json")]
    with pytest.raises(SystemExit) as stopped:
        cli.main([command, *agent, *model, *RUN, *out, flag, value])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.strip() == f"placement-gym {command}: error: {said}"
    assert list(tmp_path.iterdir()) == []  # nothing ran, nothing was written


# --------------------------------------------------------------------------------------------- litter
def test_ppo_training_leaves_no_sb3_folder_in_the_temp_folder(tmp_path, monkeypatch):
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))  # where SB3's default logger would make its folder
    assert cli.main(["train", "--agent", "ppo", "--model", "tiny_branch", *RUN]) == 0
    assert [p.name for p in temp.iterdir() if p.name.startswith("SB3-")] == []


def test_a_graph_network_agent_leaves_nothing_in_the_temp_folder(tmp_path):
    """PyG writes the source of every MessagePassing class's ``propagate`` to the temp folder and never removed
    it: every process that built a graph-network agent left an ``agents.nn.gnn_EdgeMessage_propagate_*.py``."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    argv = [sys.executable, "-m", "placement_gym.cli", "train", "--agent", "hsdag", "--model", "tiny_branch", *RUN,
            "--json", str(tmp_path / "t.json")]
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=CEILING_S)
    assert done.returncode == 0, done.stderr[-2000:]
    # torch makes its own cache folder there on import (torchinductor_USER: one per user, reused, not per process)
    assert [p.name for p in temp.iterdir() if not p.name.startswith("torchinductor_")] == []


# --------------------------------------------------------------------------------------- custom agents (issue 82)
#: (the agent file's source, the class asked for, what the one line says): each was a traceback of 26-29 lines, an
#: exit 0 having done nothing, or an AttributeError after seconds of work.
LOADER_CASES = [
    pytest.param("class Good(:\n    pass\n", "Good", "a syntax error in {file}, line 1: invalid syntax",
                 id="syntax error"),
    pytest.param("raise RuntimeError('boom at import')\n", "Good", "its module raised RuntimeError: boom at import "
                 "(at {file}:1)", id="exception at import"),
    pytest.param("import sys\nsys.exit(0)\n", "Good", "its module raised sys.exit(0)", id="sys.exit(0) at import"),
    pytest.param("class NotAnAgent:\n    pass\n", "NotAnAgent", "class NotAnAgent has no learn or predict method; "
                 "expected an agent", id="not an agent"),
    pytest.param("from agents.baselines import CheapestDevice\n"
                 "class Team(CheapestDevice):\n    name = 'team/agent-v2'\n", "Team", "field name: found 'team/agent-v2'; expected a name of 1 to 500 characters without / or",
                 id="a name with a slash"),
]


@pytest.mark.parametrize("source, cls, said", LOADER_CASES)
@pytest.mark.parametrize("command", ["evaluate", "place", "benchmark"])
def test_a_custom_agent_that_does_not_load_is_one_line_and_exit_2_before_any_run(tmp_path, capsys, source, cls,
                                                                                 said, command):
    file = tmp_path / f"agent_{abs(hash(source))}.py"
    file.write_text(source)
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps({"format": 1, "suite": "tiny", "version": 1, "description": "",
                                 "backend": "simulated", "models": ["tiny_chain"], "cases": ["paper:latency"],
                                 "budgets": [2], "seeds": [0], "metrics": ["gap_pct"]}))
    agent = f"{file}:{cls}"
    argv = {"evaluate": ["evaluate", "--agent", agent, "--model", "tiny_branch", *RUN],
            "place": ["place", "--agent", agent, "--model", "tiny_branch", *RUN, "--out", str(tmp_path / "p")],
            "benchmark": ["benchmark", "--agent", agent, "--suite", str(suite), "--out", str(tmp_path / "b"),
                          "--no-progress"]}[command]
    assert cli.main(argv) == 2
    printed = capsys.readouterr()
    err = printed.err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    assert err.startswith(f"placement-gym {command}: error: agent {agent!r}") and said.format(file=file) in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([file.name, suite.name])  # nothing ran or written


@pytest.mark.parametrize("agent, said", [(":Good", "names no module"), ("agent_file.py:", "names no class")])
def test_an_agent_path_without_a_module_or_a_class_says_so(capsys, agent, said):
    """``--agent :Good`` said "Empty module name"."""
    assert cli.main(["evaluate", "--agent", agent, "--model", "tiny_branch", *RUN]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"placement-gym evaluate: error: agent {agent!r} {said}; expected 'package.module:Class' or " \
                  "'path/to/file.py:Class'", err


# --------------------------------------------------------------------------------------- calibrate's arguments
@pytest.mark.parametrize("argv, said", [
    (["--placements", str(10**9)], "argument --placements: found 1000000000; expected placements from 0 to 1000"),
    (["--placements", "many"], "argument --placements: 'many' is not an integer"),
    (["--repeats", "0"], "argument --repeats: found 0; expected timed inferences from 1 to 10000"),
    (["--segments", "1", "0"], "argument --segments: found 0; expected segment counts from 1 to"),
    (["--name", "n" * 300], "argument --name: found text of 300 characters"),
    (["--out", "p" * 230 + ".json"], "the profile is named after --out's file name (no --name given): found text "
                                     "of 230 characters"),
], ids=["placements 10**9", "placements text", "repeats 0", "segment 0", "name of 300", "out's name of 230"])
def test_calibrate_refuses_arguments_beyond_its_scale_in_one_line(tmp_path, capsys, argv, said):
    """``--placements 10**9`` grew to 9.9 GB in 5 minutes; a 300-character ``--name`` gave a profile ``--profile``
    refuses (its schema takes names of at most 200 characters)."""
    argv = [a if not a.startswith("p" * 230) else str(tmp_path / a) for a in argv]
    out = [] if "--out" in argv else ["--out", str(tmp_path / "profile.json")]
    with pytest.raises(SystemExit) as stopped:
        cli.main(["calibrate", "--models", "tiny_branch", *out, *argv])
    assert stopped.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("placement-gym calibrate: error: ") and said in err, err
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------------------- place, interrupted
def test_place_interrupted_after_writing_says_what_it_wrote(tmp_path):
    """An interrupted ``place`` said "nothing was finished, nothing saved" when the folder and the records existed
    (Ctrl-C while it timed the written folder against each device, on the real backend)."""
    import placement_gym

    argv = [sys.executable, "-u", "-m", "placement_gym.cli", "place", "--model", "tiny_branch", "--agent",
            "cheapest", "--backend", "openvino", "--devices", *placement_gym.two_cpu_devices(), "--warmup", "1",
            "--repeats", "200", "--out", str(tmp_path / "p"), "--json", str(tmp_path / "r.json"), "--no-progress"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + CEILING_S
        for line in proc.stdout:  # the line that says the folder is written; the timing against devices follows
            assert time.monotonic() < deadline, "place did not write its folder in time"
            if "compile it with placement_gym.deploy.compile_placed" in line:
                break
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=CEILING_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    if proc.returncode == 0:  # the timing ended before the signal came: nothing to check
        pytest.skip("the written folder was timed before the signal arrived")
    assert proc.returncode == 130
    lines = err.strip().splitlines()
    assert lines[-1] == f"placement-gym place: interrupted after {tmp_path / 'p'} and the records were written in " \
        "full", err
    assert (tmp_path / "p" / "placement.json").is_file() and json.loads((tmp_path / "r.json").read_text())["records"]
