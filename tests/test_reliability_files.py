"""Files we read back are checked before anything is built from them: a damaged model-cache manifest is rebuilt,
and ``placement-gym show`` refuses a malformed results or placement file in one line naming the file and the field;
numbers beyond range in any file (a JSON integer of 400 digits, ``1e400``) are refused the same way, a graph that
no device holds is a one-line refusal, and the largest published input allowed is checked in one pass.

Reading is bounded (issue 82): a regular file only (a FIFO is refused at once), its text capped as it is unpacked,
its values counted before they are built and their nesting capped, so a refused file costs at most its text.

Real parts: the model cache's own files (written by a real build), results and placement files written by
``placement-gym train``, the real command line.
"""
from __future__ import annotations

import gzip
import json
import os
import re
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

from placement_gym import cli
from placement_gym.backends.profiles import PRESETS
from placement_gym.models import load_graph, load_model
from placement_gym.models.zoo import ZOO_VERSION
from placement_gym.results import MAX_RECORDS
from placement_gym.files import MAX_RESULTS_BYTES
from placement_gym.schema import (
    MAX_DEPTH, MAX_DEVICES, MAX_ITEMS, MAX_OPS, Integer, Number, Plain, Record, SchemaError, read_json,
)

from .cached_zoo import count_cached_tiny_builds
from .refusals import BUILT_NOTHING_BYTES, peak_rss_bytes


# ----------------------------------------------------------------------------------------- cache manifests
@pytest.mark.parametrize("content", ["[]", "5", '"text"', "null", '{".xml": [], ".bin": {}}',
                                     '{".xml": {"size": "big", "sampled_sha256": 5}, ".bin": {}}'])
def test_a_manifest_of_valid_json_but_the_wrong_shape_is_damage_and_the_model_is_rebuilt(monkeypatch, tmp_path,
                                                                                          content):
    """A torch-kind zoo entry (built from the tiny opset model, so the test is fast) goes through the real cache."""
    builds = count_cached_tiny_builds(monkeypatch, tmp_path)
    load_model("cached_tiny")
    manifest = tmp_path / f"cached_tiny-{ZOO_VERSION}.manifest.json"
    assert isinstance(json.loads(manifest.read_text()), dict) and len(builds) == 1
    manifest.write_text(content)
    with pytest.warns(UserWarning, match=r"damaged: its manifest is damaged .*manifest\.json: field .*rebuilding"):
        load_model("cached_tiny")
    assert len(builds) == 2 and isinstance(json.loads(manifest.read_text()), dict)  # rebuilt, manifest rewritten
    load_model("cached_tiny")
    assert len(builds) == 2  # and read from the cache again


# ----------------------------------------------------------------------------------------- show FILE
@pytest.fixture(scope="module")
def written(tmp_path_factory) -> dict[str, Any]:
    """A results file (two records: seeds 0 and 1) and a placement file written by ``placement-gym train``, as
    they are (each case below changes one thing in them): ``show`` draws both."""
    folder = tmp_path_factory.mktemp("train")
    argv = ["train", "--agent", "random", "--model", "tiny_branch", "--backend", "simulated", "--budget", "3",
            "--seeds", "2", "--json", str(folder / "run.json"), "--no-progress"]
    assert cli.main(argv) == 0
    assert cli.main(["show", str(folder / "run.json")]) == 0
    assert cli.main(["show", str(folder / "run.seed0.placement.json"), "--overwrite"]) == 0
    # --seed takes several seeds, as in the run commands; a seed with no record matches nothing
    assert cli.main(["show", str(folder / "run.json"), "--seed", "0", "1", "--overwrite"]) == 0
    assert cli.main(["show", str(folder / "run.json"), "--seed", "7"]) == 2
    return {"results": json.loads((folder / "run.json").read_text()),
            "placement": json.loads((folder / "run.seed0.placement.json").read_text())}


DELETE = object()


def record(index: int = 0, **changes: Any) -> Callable[[dict], dict]:
    """A change to a results file: fields of record `index` set (or removed, with DELETE)."""
    def change(data: dict) -> dict:
        for key, value in changes.items():
            if value is DELETE:
                del data["records"][index][key]
            else:
                data["records"][index][key] = value(data["records"][index][key]) if callable(value) else value
        return data
    return change


def placed(op: int, device: Any) -> Callable[[list], list]:
    """A change to a placement list: op `op` given `device`."""
    return lambda p: p[:op] + [device] + p[op + 1:]


@dataclass(frozen=True)
class Raw:
    """A change that is not JSON any more: the file's text -> the bytes written."""

    make: Callable[[str], bytes]


def top(value: Any) -> Callable[[dict], Any]:
    return lambda data: value


def records(value: Any) -> Callable[[dict], dict]:
    return lambda data: {**data, "records": value}


#: (name, which file, change: data -> data, or text -> bytes for the cases that are not JSON, field named).
CASES = [
    ("truncated", "results", Raw(lambda text: text[: len(text) // 2].encode()), "line"),
    ("empty", "results", Raw(lambda text: b""), "line 1"),
    ("not utf-8", "results", Raw(lambda text: b"\xff\xfe" + text.encode()), "UTF-8"),
    ("NaN", "results", Raw(lambda text: text.replace('"latency_s": ', '"latency_s": NaN, "x": ', 1).encode()), "NaN"),
    ("nested deep", "results", Raw(lambda text: b"[" * 200_000 + b"]" * 200_000), "nested"),
    ("top level a list", "results", top([]), "field (the whole file)"),
    ("top level a number", "results", top(5), "field (the whole file)"),
    ("records an object", "results", records({}), "field records:"),
    ("records text", "results", records("records"), "field records:"),
    ("record a number", "results", records([5]), "field records[0]:"),
    ("too many records", "results", records([{}] * (MAX_RECORDS + 1)), "field records:"),
    ("model missing", "results", record(model=DELETE), "field records[0].model:"),
    ("model a number", "results", record(model=5), "field records[0].model:"),
    ("model a path", "results", record(model="../../elsewhere"), "field records[0].model:"),
    ("agent missing", "results", record(agent=DELETE), "field records[0].agent:"),
    ("agent null", "results", record(agent=None), "field records[0].agent:"),
    ("seed text", "results", record(seed="0"), "field records[0].seed:"),
    ("seed fractional", "results", record(seed=0.5), "field records[0].seed:"),
    ("seed negative", "results", record(seed=-1), "field records[0].seed:"),
    ("seed boolean", "results", record(seed=True), "field records[0].seed:"),
    ("devices missing", "results", record(devices=DELETE), "field records[0].devices:"),
    ("devices text", "results", record(devices="CPU"), "field records[0].devices:"),
    ("devices empty", "results", record(devices=[]), "field records[0].devices:"),
    ("device a number", "results", record(devices=[0, 1]), "field records[0].devices[0]:"),
    ("too many devices", "results", record(devices=[f"D{i}" for i in range(MAX_DEVICES + 1)]),
     "field records[0].devices:"),
    ("placement missing", "results", record(placement=DELETE), "field records[0].placement:"),
    ("placement text", "results", record(placement="0 1 0"), "field records[0].placement:"),
    ("placement empty", "results", record(placement=[]), "field records[0].placement:"),
    ("placement of floats", "results", record(placement=lambda p: [float(d) for d in p]),
     "field records[0].placement[0]:"),
    ("placement fractional", "results", record(placement=placed(3, 0.5)), "field records[0].placement[3]:"),
    ("device 7 of 2", "results", record(placement=placed(3, 7)), "field records[0].placement[3]:"),
    ("device negative", "results", record(placement=placed(3, -1)), "field records[0].placement[3]:"),
    ("device boolean", "results", record(placement=placed(3, True)), "field records[0].placement[3]:"),
    ("device by name", "results", record(placement=placed(3, "CPU")), "field records[0].placement[3]:"),
    ("placement one op short", "results", record(placement=lambda p: p[:-1]), "field records[0].placement:"),
    ("placement too long", "results", record(placement=[0] * (MAX_OPS + 1)), "field records[0].placement:"),
    ("huge synthetic graph", "results", record(model="synthetic:20000000"), "field records[0].model:"),
    ("unknown model", "results", record(model="no_such_model"), "field records[0].model:"),
    ("model_path missing", "results", record(model_path="missing_model.xml"), "field records[0].model_path:"),
    ("model_path a number", "results", record(model_path=5), "field records[0].model_path:"),
    ("latency zero", "results", record(latency_s=0), "field records[0].latency_s:"),
    ("latency text", "results", record(latency_s="fast"), "field records[0].latency_s:"),
    ("reference latency a list", "results", record(reference_latency_s=[1.0]),
     "field records[0].reference_latency_s:"),
    ("submodels text", "results", record(n_submodels="2"), "field records[0].n_submodels:"),
    ("simulated text", "results", record(simulated="yes"), "field records[0].simulated:"),
    ("second record bad", "results", record(1, placement=placed(0, 2)), "field records[1].placement[0]:"),
    ("placement file: devices text", "placement", lambda data: {**data, "devices": "CPU"}, "field devices:"),
    ("placement file: device 7 of 2", "placement", lambda data: {**data, "placement": placed(2, 7)(data["placement"])},
     "field placement[2]:"),
    ("placement file: seed missing", "placement", lambda data: {k: v for k, v in data.items() if k != "seed"},
     "field seed:"),
    ("placement file: a list of records", "placement", lambda data: [data], "field (the whole file)"),
]


@pytest.mark.parametrize("kind, change, field", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_show_refuses_a_malformed_file_in_one_line_naming_the_file_and_the_field(tmp_path, capsys, written, kind,
                                                                                 change, field):
    path = tmp_path / ("run.json" if kind == "results" else "run.placement.json")
    text = json.dumps(written[kind])
    if isinstance(change, Raw):
        path.write_bytes(change.make(text))
    else:
        path.write_text(json.dumps(change(json.loads(text))))
    peak = peak_rss_bytes()
    assert cli.main(["show", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    assert err.startswith(f"placement-gym show: error: {path}") and field in err and "expected" in err, err
    assert not list(tmp_path.glob("*.png"))  # nothing drawn, not even the good records' pictures
    assert peak_rss_bytes() - peak < BUILT_NOTHING_BYTES  # refused before anything big is built


def test_show_refuses_an_oversized_file_before_reading_it(tmp_path, capsys):
    path = tmp_path / "huge.json"
    with open(path, "wb") as f:
        f.truncate(MAX_RESULTS_BYTES + 1)  # a sparse file: its size, without writing it
    assert cli.main(["show", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"placement-gym show: error: {path}: {MAX_RESULTS_BYTES + 1} bytes; expected a results or "
                   f"placement file of at most {MAX_RESULTS_BYTES} bytes")


# ----------------------------------------------------------------------------------------- numbers beyond range
def tarnawski_input(path: Path, n: int = 3, **top_level: Any) -> Path:
    """A Tarnawski et al. input of a chain of `n` nodes (two accelerators and a CPU), its top-level fields
    changed by `top_level`; returns `path`."""
    nodes = [{"id": i, "supportedOnFpga": 1, "cpuLatency": 1.0, "fpgaLatency": 0.5, "isBackwardNode": 0, "size": 1.0}
             for i in range(n)]
    edges = [{"sourceId": i, "destId": i + 1, "cost": 0.25} for i in range(n - 1)]
    path.write_text(json.dumps({"maxSizePerFPGA": 1e9, "maxFPGAs": 2, "maxCPUs": 1, "nodes": nodes, "edges": edges,
                                **top_level}))
    return path


def doppler_graph(path: Path) -> Path:
    """A DOPPLER graph of three nodes (one input node; two computing nodes fed by it)."""
    path.write_text("3\n0,\n0,\n1,\n5,1\n6,2 Add\n")
    return path


def profile_file(path: Path, **device: Any) -> Path:
    """The ``paper`` preset as a profile file, its first device's fields changed by `device`."""
    data = PRESETS["paper"]().to_dict()
    data["devices"][0].update(device)
    path.write_text(json.dumps(data))
    return path


def edit(path: Path, old: str, new: str) -> Path:
    """`path` with the first `old` in its text replaced by `new` (numbers json.dumps cannot write: 1e400)."""
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    return path


HUGE = "1" + "0" * 400  # an integer literal JSON allows: 10^400
EVALUATE = ["evaluate", "--agent", "random", "--budget", "2", "--seeds", "1", "--no-progress"]
#: (name, the file: tmp folder -> path, the command's arguments after it (the path is put at {}), field named).
NUMBER_CASES = [
    ("tarnawski cost 10^400", lambda d: edit(tarnawski_input(d / "t.json"), '"cost": 0.25', f'"cost": {HUGE}'),
     EVALUATE + ["--model", "{}"], "field edges[0].cost:"),
    ("tarnawski cost 1e400", lambda d: edit(tarnawski_input(d / "t.json"), '"cost": 0.25', '"cost": 1e400'),
     EVALUATE + ["--model", "{}"], "field edges[0].cost:"),
    ("tarnawski latency of 30,000 years", lambda d: edit(tarnawski_input(d / "t.json"), '"cpuLatency": 1.0',
                                                         '"cpuLatency": 1e15'),
     EVALUATE + ["--model", "{}"], "field nodes[0].cpuLatency:"),
    ("tarnawski memory 10^400", lambda d: tarnawski_input(d / "t.json", maxSizePerFPGA=10 ** 400),
     EVALUATE + ["--model", "{}"], "field maxSizePerFPGA:"),
    ("profile peak 10^400", lambda d: profile_file(d / "p.json", peak_flops=10 ** 400),
     EVALUATE + ["--model", "tiny_branch", "--backend", "simulated", "--profile", "{}"],
     "field devices[0].peak_flops:"),
    ("profile peak 1e-300 FLOP/s", lambda d: profile_file(d / "p.json", peak_flops=1e-300),
     EVALUATE + ["--model", "tiny_branch", "--backend", "simulated", "--profile", "{}"],
     "field devices[0].peak_flops:"),
    ("profile memory 10^30 integer", lambda d: profile_file(d / "p.json", memory_bytes=10 ** 30),
     EVALUATE + ["--model", "tiny_branch", "--backend", "simulated", "--profile", "{}"],
     "field devices[0].memory_bytes:"),
    ("profile calibration 10^400", lambda d: edit(profile_file(d / "p.json"), '"calibration": {}',
                                                  f'"calibration": {{"runs": {HUGE}}}'),
     EVALUATE + ["--model", "tiny_branch", "--backend", "simulated", "--profile", "{}"],
     "field calibration.runs:"),
    ("doppler edge id beyond int64", lambda d: edit(doppler_graph(d / "g.txt"), "\n1,\n", f"\n{2 ** 64},\n"),
     EVALUATE + ["--model", "{}"], "field line 4:"),
    ("doppler cost of 400 digits", lambda d: edit(doppler_graph(d / "g.txt"), "5,1", f"{HUGE},1"),
     EVALUATE + ["--model", "{}"], "field line 5:"),
    ("doppler node count beyond int64", lambda d: edit(doppler_graph(d / "g.txt"), "3\n", f"{HUGE}\n"),
     EVALUATE + ["--model", "{}"], "field line 1:"),
    ("doppler 5,000 leading zeros", lambda d: edit(doppler_graph(d / "g.txt"), "5,1", "0" * 5000 + "5,1"),
     EVALUATE + ["--model", "{}", "--json", "{}.json"], None),
]


@pytest.mark.parametrize("make, argv, field", [c[1:] for c in NUMBER_CASES], ids=[c[0] for c in NUMBER_CASES])
def test_numbers_beyond_range_in_a_file_are_one_line_errors_naming_the_file_and_the_field(tmp_path, capsys, make,
                                                                                          argv, field):
    path = make(tmp_path)
    argv = [a.replace("{}", str(path)) for a in argv]
    if field is None:  # a number in range however it is written: read as it is
        assert cli.main(argv) == 0
        assert json.loads(Path(argv[-1]).read_text())["records"][0]["ok"]
        return
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    assert err.startswith(f"placement-gym evaluate: error: {path}: {field}") and "expected" in err, err


def test_a_suite_naming_a_file_of_huge_numbers_is_refused_in_one_line(tmp_path, capsys):
    graph = edit(tarnawski_input(tmp_path / "t.json"), '"cost": 0.25', f'"cost": {HUGE}')
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps({"format": 1, "suite": "huge", "version": 1, "description": "", "backend": "simulated",
                                 "models": [str(graph)], "cases": ["paper:latency"], "budgets": [2], "seeds": [0],
                                 "metrics": ["gap_pct"]}))
    argv = ["benchmark", "--suite", str(suite), "--agent", "random", "--out", str(tmp_path / "b"), "--no-progress"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"placement-gym benchmark: error: {graph}: field edges[0].cost:") and "expected" in err, err


@pytest.mark.parametrize("spec, literal, found", [
    (Integer(), str(2 ** 63), "an integer of 64 bits"),
    (Integer(0), HUGE, "an integer of 1329 bits"),
    (Number(), HUGE, "an integer of 1329 bits"),
    (Number(), "1e400", "1e400 (beyond the range of a float)"),
    (Number(finite=False), "-1e400", "-1e400 (beyond the range of a float)"),
    (Plain(), f"[[{HUGE}]]", "an integer of 1329 bits"),
    (Plain(), '{"a": 1e999}', "1e999 (beyond the range of a float)"),
], ids=["integer 2^63", "integer 10^400", "number 10^400", "number 1e400", "unbounded number -1e400",
        "plain 10^400", "plain 1e999"])
def test_every_spec_bounds_its_numbers_so_nothing_read_overflows_later(tmp_path, spec, literal, found):
    """JSON integers have no limit and ``1e400`` parses as infinity: unbounded, either would pass a check and
    crash later (an OverflowError converting it to a float or an array). Every spec refuses them, naming the field."""
    path = tmp_path / "n.json"
    path.write_text(f'{{"x": {literal}}}')
    with pytest.raises(SchemaError, match=re.escape(f"{path}: field x") + r".*: found " + re.escape(found)):
        read_json(path, Record({"x": spec}), max_bytes=1 << 16)
    path.write_text('{"x": 9223372036854775807, "y": 1e308}')  # the largest that are accepted
    assert read_json(path, Record({"x": spec, "y": Number()}), max_bytes=1 << 16)["x"] == 2 ** 63 - 1


# ----------------------------------------------------------------------------------------- graphs nothing holds
def test_a_graph_no_single_device_can_hold_is_refused_in_one_line_naming_the_memory(tmp_path, capsys):
    """There is no reference placement (every op on one device) when no device holds the whole graph: bad input
    (a profile's or a published file's memory), refused in one line with each device's limit and the need."""
    tiny_memory = profile_file(tmp_path / "p.json", memory_bytes=1)
    data = json.loads(tiny_memory.read_text())
    data["devices"][1]["memory_bytes"] = 1
    tiny_memory.write_text(json.dumps(data))
    argv = EVALUATE + ["--model", "tiny_branch", "--backend", "simulated", "--profile", str(tiny_memory)]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    assert err.startswith("placement-gym evaluate: error: no single device can run all of 'tiny_branch'"), err
    assert "out of memory on CPU: 439.0 kB > 1 B" in err and "out of memory on GPU" in err and "expected" in err

    small = tarnawski_input(tmp_path / "small.json", maxSizePerFPGA=0.5, maxCPUs=0)
    assert cli.main(EVALUATE + ["--model", str(small)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    assert "ACC0 holds 3 bytes, more than its 0.5 (maxSizePerFPGA)" in err and "expected" in err, err


# ----------------------------------------------------------------------------------------- big inputs
def test_a_tarnawski_input_of_the_most_nodes_allowed_is_checked_in_one_pass(tmp_path):
    """200,000 nodes (`MAX_OPS`, what the loader allows): the duplicate-id check is one pass over them (it
    was quadratic: minutes), and names both nodes."""
    path = tarnawski_input(tmp_path / "big.json", n=1)
    data = json.loads(path.read_text())
    data["nodes"] = [{**data["nodes"][0], "id": i} for i in range(MAX_OPS)]
    path.write_text(json.dumps(data))
    graph = load_graph(str(path))
    assert graph.n_ops == MAX_OPS and sorted(graph.costs.node_ids.tolist()) == list(range(MAX_OPS))
    data["nodes"][-1]["id"] = MAX_OPS - 2  # the last two share an id: the worst case of the old check
    path.write_text(json.dumps(data))
    with pytest.raises(SchemaError, match=re.escape(f"{path}: field nodes[{MAX_OPS - 1}].id: found {MAX_OPS - 2}; "
                                                    f"expected unique node ids (nodes[{MAX_OPS - 2}] has it too)")):
        load_graph(str(path))


# ----------------------------------------------------------------------------------------- bounded reading
def _with_junk(data: dict, path: Path, n_values: int, *, packed: bool = False) -> Path:
    """`data` written to `path` with a field no reader reads holding ``[{},{},...]`` of `n_values` objects (3 bytes
    of text each, ~70 bytes each once parsed), gzip-compressed where `packed` (a few hundred kB for 250 MB)."""
    head = json.dumps(data)[:-1].encode() + b', "junk": ['
    chunk = b"{}," * 1_000_000
    with (gzip.open(path, "wb", compresslevel=1) if packed else open(path, "wb")) as f:
        f.write(head)
        for _ in range(n_values // 1_000_000):
            f.write(chunk)
        f.write(b"{}]}")
    return path


def test_a_compressed_results_file_of_250_mb_of_tiny_values_is_refused_at_its_text_cap(tmp_path, capsys, written):
    """Issue 82: a 243 kB ``.json.gz`` of ``[{},{},...]`` in a field no one reads made ``show`` peak at 6.2 GB
    and exit 0. Unpacked no further than the cap, refused in one line."""
    path = _with_junk(written["results"], tmp_path / "run.json.gz", 83_000_000, packed=True)
    assert path.stat().st_size < 2_000_000
    peak = peak_rss_bytes()
    assert cli.main(["show", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "expected a results or placement file of at most 67108864 bytes" in err, err
    assert peak_rss_bytes() - peak < BUILT_NOTHING_BYTES and not list(tmp_path.glob("*.png"))


def test_millions_of_tiny_values_within_the_text_cap_are_refused_before_they_are_built(tmp_path, capsys, written):
    """30 MB of ``{},`` is 10 million objects (~700 MB once parsed; counted as 20 million: each opens with a brace
    and follows a comma): counted before parsing, refused in one line,
    for every reader (``show``, ``benchmark --reference``, a placed folder's placement.json)."""
    results = _with_junk(written["results"], tmp_path / "run.json", 10_000_000)
    peak = peak_rss_bytes()
    assert cli.main(["show", str(results)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and re.match(rf"placement-gym show: error: {re.escape(str(results))}: holds up to "
                                              r"200\d{5} values", err) and f"at most {MAX_ITEMS} values" in err, err
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps({"format": 1, "suite": "tiny", "version": 1, "description": "",
                                 "backend": "simulated", "models": ["tiny_chain"], "cases": ["paper:latency"],
                                 "budgets": [2], "seeds": [0], "metrics": ["gap_pct"]}))
    argv = ["benchmark", "--suite", str(suite), "--agent", "random", "--reference", str(results), "--out",
            str(tmp_path / "bench"), "--no-progress"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "values (counting its commas" in err and not (tmp_path / "bench").exists()
    assert peak_rss_bytes() - peak < BUILT_NOTHING_BYTES


def test_a_placed_folder_whose_placement_json_holds_millions_of_values_is_refused_before_they_are_built(tmp_path):
    """A 63 MB placement.json cost ``compile_placed`` 3.0 GB."""
    from placement_gym import deploy

    folder = tmp_path / "placed"
    deploy.save_placed(folder, load_model("tiny_branch"), [0] * load_graph("tiny_branch").n_ops, ["CPU", "GPU"])
    document = json.loads((folder / "placement.json").read_text())
    _with_junk(document, folder / "placement.json", 20_000_000)
    peak = peak_rss_bytes()
    for read in (deploy.compile_placed, deploy.read_placed):
        with pytest.raises(SchemaError, match=r"placement.json: holds up to 400\d{5} values"):
            read(folder)
    assert peak_rss_bytes() - peak < BUILT_NOTHING_BYTES


def test_values_nested_deeper_than_any_file_of_ours_are_refused(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"records": [], "junk": ' + "[" * 40 + "]" * 40 + "}")
    with pytest.raises(SchemaError, match=f"deep.json is nested too deeply; expected a .* nested at most {MAX_DEPTH}"):
        read_json(path, Record({}), max_bytes=1 << 16)


# ----------------------------------------------------------------------------------------- not regular files
class Blocked(Exception):
    """A read still blocked when `_Within`'s time ran out (not an OSError: code that swallows those, as the old
    `deploy._is_zip` did, cannot hide it)."""


class _Within:
    """A block that raises `Blocked` after `seconds` (SIGALRM): a read that blocks forever fails the test."""

    def __init__(self, seconds: int) -> None:
        self.seconds = seconds

    def __enter__(self) -> None:
        def expire(signum, frame):
            raise Blocked(f"still blocked after {self.seconds} s")

        self.previous = signal.signal(signal.SIGALRM, expire)
        signal.alarm(self.seconds)

    def __exit__(self, *exc) -> None:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, self.previous)


def test_a_fifo_where_a_file_is_read_is_refused_at_once(tmp_path, capsys):
    """``export`` hung forever on a placed folder whose placement.json was a FIFO (``deploy.read_placement`` opened
    it before checking it was a regular file); ``show`` and ``compile_placed`` refused it."""
    from placement_gym import deploy

    folder = tmp_path / "d"
    folder.mkdir()
    os.mkfifo(folder / "placement.json")
    graph = load_graph("tiny_branch")
    with _Within(60):
        assert cli.main(["export", str(folder), "--model", "tiny_branch", "--out", str(tmp_path / "x")]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and f"{folder / 'placement.json'} is not a regular file (a FIFO" in err, err
        with pytest.raises(ValueError, match="is not a regular file"):
            deploy.read_placement(folder / "placement.json", graph)
        with pytest.raises(SchemaError, match="is not a regular file"):
            read_json(folder / "placement.json", Record({}), max_bytes=1 << 16)
        assert cli.main(["show", str(folder / "placement.json")]) == 2
        assert "is not a regular file" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_a_suite_listing_a_model_twice_is_refused(tmp_path):
    """Its runs would be written to one file each and counted twice in the table."""
    from placement_gym import benchmark

    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps({"format": 1, "suite": "tiny", "version": 1, "description": "",
                                 "backend": "simulated", "models": ["tiny_chain", "tiny_branch", "tiny_chain"],
                                 "cases": ["paper:latency"], "budgets": [2], "seeds": [0], "metrics": ["gap_pct"]}))
    with pytest.raises(SchemaError, match=re.escape(f"{suite}: field models[2]: found 'tiny_chain'; expected each "
                                                    "model once (models[0] is the same)")):
        benchmark.load_suite(suite)
