"""What a command writes, under a careless or hostile user (issue 82): every output checked up front against the
others, the inputs and the placed folder's own files, and where it can be created; the placed folder written whole
and swapped in atomically, only over a placed folder placement-gym wrote, with no race; an OS error while writing
is one line and exit 2 with the finished run's records kept; the folder readable as the user's umask says.

Real parts: the command line in this process (the simulated backend on the tiny models), real files, folders and
symlinks; a real file-size limit (``RLIMIT_FSIZE``, what a full disk does to a write) in a subprocess.
"""
from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from placement_gym import cli, deploy
from placement_gym.models import load_graph, load_model

REPO = Path(__file__).resolve().parent.parent
SIM = ["--backend", "simulated", "--no-progress"]
PLACE = ["place", "--model", "tiny_branch", "--agent", "cheapest", *SIM]
#: A ceiling for a subprocess that hangs: far above what a busy machine takes.
CEILING_S = 300


def one_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, f"expected one line, got: {err!r}"
    return lines[0]


def listing(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (hidden ones too), by relative path, with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def placed(tmp_path_factory) -> tuple[Path, Path]:
    """``place`` on the simulator: (the placed folder, its results file); copy them before changing anything."""
    root = tmp_path_factory.mktemp("placed")
    assert cli.main([*PLACE, "--out", str(root / "placed"), "--json", str(root / "run.json")]) == 0
    return root / "placed", root / "run.json"


def run_cli(argv: list[str], cwd: Path, *, max_file_bytes: int | None = None) -> subprocess.CompletedProcess:
    """``placement-gym ARGV`` in a subprocess in `cwd`; with `max_file_bytes`, no file it writes may grow beyond
    that (``RLIMIT_FSIZE``, SIGXFSZ ignored: a write past it fails with EFBIG, as one to a full disk fails)."""
    def limit() -> None:
        if max_file_bytes is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "placement_gym.cli", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=CEILING_S, preexec_fn=limit)


# ------------------------------------------------------------------------ 3: where an output cannot be created
def _file_where_a_folder_goes(d: Path) -> list[str]:
    (d / "afile").write_text("a file")
    return ["--out", str(d / "afile" / "sub")]


def _json_under_a_file(d: Path) -> list[str]:
    (d / "afile").write_text("a file")
    return ["--out", str(d / "p"), "--json", str(d / "afile" / "r.json")]


def _dangling_symlink(d: Path) -> list[str]:
    (d / "link").symlink_to(d / "nowhere" / "x")
    return ["--out", str(d / "link")]


def _in_a_read_only_folder(d: Path) -> list[str]:
    (d / "ro").mkdir()
    (d / "ro").chmod(0o555)
    return ["--out", str(d / "ro" / "p")]


CREATABLE = [
    pytest.param(_file_where_a_folder_goes, "is a file, so", id="--out under a file"),
    pytest.param(_json_under_a_file, "is a file, so", id="--json under a file"),
    pytest.param(_dangling_symlink, "is a symbolic link", id="--out a dangling symlink"),
    pytest.param(lambda d: ["--out", str(d / ("n" * 300))], "is 300 bytes long", id="--out of 300 characters"),
    pytest.param(lambda d: ["--out", str(d / "p"), "--json", str(d / ("n" * 295 + ".json"))], "is 300 bytes long",
                 id="--json of 300 characters"),
    pytest.param(_in_a_read_only_folder, "is not writable by this user", id="--out in a read-only folder",
                 marks=pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")),
]


@pytest.mark.parametrize("make, said", CREATABLE)
def test_an_output_that_cannot_be_created_is_refused_in_one_line_before_any_run(tmp_path, capsys, make, said):
    """Before: a traceback after the whole run (a read-only folder, a temp name past 255 bytes, a file where a
    folder goes), or a late ``File exists``, and the run's record lost with it."""
    argv = [*PLACE, *make(tmp_path)]
    before = sorted(p.name for p in tmp_path.iterdir())
    assert cli.main(argv) == 2
    printed = capsys.readouterr()
    assert said in one_line(printed.err) and printed.out == ""  # no table: refused before the run
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_calibrate_refuses_a_profile_path_it_cannot_create_before_measuring(tmp_path, capsys):
    (tmp_path / "afile").write_text("a file")
    out = tmp_path / "afile" / "profile.json"
    assert cli.main(["calibrate", "--models", "tiny_branch", "--out", str(out)]) == 2
    printed = capsys.readouterr()
    assert f"{tmp_path / 'afile'} is a file, so {out} cannot be created" in one_line(printed.err)
    assert printed.out == ""  # nothing measured


def test_names_of_250_characters_are_written(tmp_path):
    """A legal name whose temporary name (name + suffix) was not: ``File name too long`` after the run."""
    out, run = tmp_path / ("p" * 250), tmp_path / ("r" * 245 + ".json")
    assert cli.main([*PLACE, "--out", str(out), "--json", str(run)]) == 0
    assert (out / "placement.json").is_file() and json.loads(run.read_text())["records"]


def test_a_write_that_fails_midway_keeps_the_records_and_leaves_no_half_folder(tmp_path, placed):
    """A file-size limit fails the model's write as a full disk does (OpenVINO said ``basic_ios::clear: iostream
    error``, a traceback, the record lost): one line naming the folder, exit 2, the records written, nothing of
    the folder left; without --json the records go to a file of their own, and the message says where."""
    limit = 30_000  # the model's weights (45 kB) do not fit; the records (a few kB) do
    done = run_cli([*PLACE, "--out", "p", "--json", "r.json"], tmp_path, max_file_bytes=limit)
    line = one_line(done.stderr)
    assert done.returncode == 2 and line.startswith("placement-gym place: error: cannot write the placed folder "
                                                    "--out p"), done.stderr
    assert line.endswith("the finished runs' records are in r.json"), line
    records = json.loads((tmp_path / "r.json").read_text())["records"]
    assert records[0]["agent"] == "cheapest" and len(records[0]["placement"]) == load_graph("tiny_branch").n_ops
    assert not (tmp_path / "p").exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".p.")]

    done = run_cli([*PLACE, "--out", "q"], tmp_path, max_file_bytes=limit)  # no --json: kept all the same
    line = one_line(done.stderr)
    kept = Path(line.rsplit("the finished runs' records are in ", 1)[1])
    assert done.returncode == 2 and (tmp_path / kept).parent == tmp_path, line
    assert json.loads((tmp_path / kept).read_text())["records"][0]["agent"] == "cheapest"
    # the records it kept rebuild the folder
    assert cli.main(["export", str(tmp_path / kept), "--model", "tiny_branch", "--out", str(tmp_path / "q")]) == 0


def test_a_failed_overwrite_leaves_the_old_placed_folder_whole(tmp_path, placed):
    """``save_placed`` replaced the files one by one: a failure midway left new and old files mixed (and said
    nothing was saved)."""
    folder, _ = placed
    shutil.copytree(folder, tmp_path / "p")
    before = listing(tmp_path / "p")
    done = run_cli([*PLACE, "--agent", "single-device", "--out", "p", "--overwrite"], tmp_path,
                   max_file_bytes=30_000)
    assert done.returncode == 2 and "cannot write the placed folder --out p" in one_line(done.stderr)
    assert listing(tmp_path / "p") == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


# ------------------------------------------------------------------------ 4: outputs against the placed folder
def _existing(placed: tuple[Path, Path], d: Path, name: str) -> Path:
    shutil.copytree(placed[0], d / name)
    return d / name


COLLISIONS = [
    ("--json inside --out, overwriting", lambda pl, d: [*PLACE, "--out", str(_existing(pl, d, "pj")), "--json",
                                                       str(d / "pj" / "placement.json"), "--overwrite"],
     "--json ({d}/pj/placement.json) is inside --out ({d}/pj)"),
    ("--json inside a new --out", lambda pl, d: [*PLACE, "--out", str(d / "pj2"), "--json",
                                                str(d / "pj2" / "placement.json")],
     "--json ({d}/pj2/placement.json) is inside --out ({d}/pj2)"),
    ("--csv the model of --out", lambda pl, d: [*PLACE, "--out", str(d / "pc"), "--json", str(d / "r.json"),
                                               "--csv", str(d / "pc" / "model.xml")],
     "--csv ({d}/pc/model.xml) is inside --out ({d}/pc)"),
    ("--plot the README of --out", lambda pl, d: [*PLACE, "--out", str(d / "pe"), "--json", str(d / "r.json"),
                                                 "--plot", str(d / "pe" / "README.md")],
     "--plot ({d}/pe/README.md) is inside --out ({d}/pe)"),
    ("--model inside --out", lambda pl, d: ["place", "--model", str(_existing(pl, d, "orig") / "model.xml"),
                                           "--agent", "cheapest", *SIM, "--out", str(d / "orig"), "--overwrite"],
     "is inside --out ({d}/orig): the folder would replace it"),
    ("show's --out over the folder's model", lambda pl, d: ["show", str(_existing(pl, d, "ps")), "--out",
                                                           str(d / "ps" / "model.xml"), "--overwrite"],
     "FILE's model.xml and --out are both {d}/ps/model.xml"),
    ("show's --out over the folder's README", lambda pl, d: ["show", str(_existing(pl, d, "pr")), "--out",
                                                            str(d / "pr" / "README.md"), "--overwrite"],
     "FILE's README.md and --out are both {d}/pr/README.md"),
    ("export's --out over its own input", lambda pl, d: ["export", str(_existing(pl, d, "px")), "--model",
                                                        "tiny_branch", "--out", str(d / "px"), "--overwrite"],
     "FILE ({d}/px) is inside --out ({d}/px)"),
]


@pytest.mark.parametrize("make, said", [c[1:] for c in COLLISIONS], ids=[c[0] for c in COLLISIONS])
def test_an_output_over_the_placed_folder_or_an_input_is_refused_before_any_run(tmp_path, capsys, placed, make,
                                                                               said):
    """Before: ``--json pj/placement.json --overwrite`` exited 0 with the records as the folder's placement.json;
    the CSV, plot or ``show --out`` replaced the model or README; the placed folder replaced its own input model;
    without --overwrite the collision was found after the run, and the record lost."""
    argv = make(placed, tmp_path)
    before = listing(tmp_path)
    assert cli.main(argv) == 2
    printed = capsys.readouterr()
    assert said.format(d=tmp_path) in one_line(printed.err) and "even with --overwrite" in printed.err
    assert printed.out == "" and listing(tmp_path) == before  # refused before anything ran or was written


# ------------------------------------------------------------------------ 5: --overwrite, whole and only ours
def test_an_empty_out_is_refused_and_the_current_folder_is_left_alone(tmp_path, capsys, placed, monkeypatch):
    """``--out ""`` was the current folder: ``export ... --out "" --overwrite`` replaced a project's README.md."""
    _, run = placed
    (tmp_path / "README.md").write_text("# my project\n")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["export", str(run), "--model", "tiny_branch", "--out", "", "--overwrite"]) == 2
    assert "--out is empty" in one_line(capsys.readouterr().err)
    assert cli.main(["export", str(run), "--model", "tiny_branch", "--out", ".", "--overwrite"]) == 2
    assert ". is not a placed folder placement-gym wrote (it has no placement.json)" in \
        one_line(capsys.readouterr().err)
    assert [p.name for p in tmp_path.iterdir()] == ["README.md"] and \
        (tmp_path / "README.md").read_text() == "# my project\n"


def test_overwrite_replaces_a_placed_folder_whole_and_nothing_else(tmp_path, capsys, placed):
    folder, run = placed
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("the user's")
    (mine / "placement.json").write_text("{}")
    assert cli.main(["export", str(run), "--model", "tiny_branch", "--out", str(mine), "--overwrite"]) == 2
    assert "is not a placed folder placement-gym wrote (it holds notes.txt)" in one_line(capsys.readouterr().err)
    (mine / "notes.txt").unlink()
    assert cli.main(["export", str(run), "--model", "tiny_branch", "--out", str(mine), "--overwrite"]) == 2
    assert "its placement.json is not one" in one_line(capsys.readouterr().err)
    assert listing(mine) == {"placement.json": b"{}"}
    # a placed folder (with the picture show draws into it) is swapped for the new one, whole
    shutil.copytree(folder, tmp_path / "ours")
    assert cli.main(["show", str(tmp_path / "ours")]) == 0
    assert (tmp_path / "ours" / "placement.png").is_file()
    assert cli.main([*PLACE, "--agent", "single-device", "--out", str(tmp_path / "ours"), "--overwrite"]) == 0
    assert sorted(p.name for p in (tmp_path / "ours").iterdir()) == sorted(deploy.FILES)
    assert json.loads((tmp_path / "ours" / "placement.json").read_text())["agent"] == "CPU-only"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "ours"]  # no temporary folder left


# ------------------------------------------------------------------------ 6: no race
def test_a_folder_that_appears_while_the_placed_folder_is_written_is_never_replaced(tmp_path, placed):
    """Two ``place --out same``: the folder appearing between the check and the move took the replace branch,
    and one run silently replaced the other (1 of 4 trials). Here the other writer's folder appears at the
    worst moment, deterministically: while `save_placed` reads the placement (after its check, before its move)."""
    other, _ = placed
    out = tmp_path / "same"
    graph = load_graph("tiny_branch")

    class AppearsMeanwhile(dict):
        def __getitem__(self, op: str):
            if not out.exists():
                shutil.copytree(other, out)  # the other writer's folder, moved into place
            return super().__getitem__(op)

    placement = AppearsMeanwhile({op: "CPU" for op in graph.op_names})
    before = listing(other)
    with pytest.raises(FileExistsError, match="exists and is not empty"):
        deploy.save_placed(out, load_model("tiny_branch"), placement, ["CPU", "GPU"])
    assert listing(out) == before  # the other writer's folder, as it wrote it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["same"]  # this one's temporary folder removed


# ------------------------------------------------------------------------ 12, 13: permissions and litter
@pytest.mark.parametrize("umask, mode", [(0o022, 0o755), (0o027, 0o750)])
def test_a_placed_folder_is_as_readable_as_the_umask_says(tmp_path, umask, mode):
    """It was 0700 (``mkdtemp``'s): a folder meant to ship was unreadable to other users."""
    previous = os.umask(umask)
    try:
        out = deploy.save_placed(tmp_path / "p", load_model("tiny_branch"), np.zeros(24, dtype=np.int64),
                                 ["CPU", "GPU"])
    finally:
        os.umask(previous)
    assert out.stat().st_mode & 0o777 == mode
    assert all(p.stat().st_mode & 0o777 == mode & 0o666 for p in out.iterdir())


def test_the_temporary_folder_a_killed_writer_left_is_removed_by_the_next_write(tmp_path):
    """``kill -9`` runs no clean-up: a model-sized ``.p.placing-PID-...`` folder stayed beside the output."""
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)
    left = tmp_path / f".p.placing-{dead_pid}-x1y2z3"
    left.mkdir()
    (left / "model.bin").write_bytes(b"\0" * 1000)
    alive = tmp_path / f".p.placing-{os.getpid()}-a1b2c3"  # a live writer's (this process): kept
    alive.mkdir()
    deploy.save_placed(tmp_path / "p", load_model("tiny_branch"), np.zeros(24, dtype=np.int64), ["CPU", "GPU"])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["p", alive.name])


def test_a_placement_by_op_must_name_devices_not_fractions():
    """A float in a mapping was truncated: ``{op: 1.7}`` put the op on device 1."""
    graph = load_graph("tiny_branch")
    placement = {op: 0 for op in graph.op_names}
    placement[graph.op_names[3]] = 1.7
    with pytest.raises(ValueError, match=rf"puts op '{graph.op_names[3]}' on 1.7; expected a device name of "
                                         r"\['CPU', 'GPU'\] or an index from 0 to 1"):
        deploy.read_placement(placement, graph, devices=["CPU", "GPU"])
    placement[graph.op_names[3]] = True
    with pytest.raises(ValueError, match="on True; expected a device name"):
        deploy.as_placement(placement, graph, ["CPU", "GPU"])
