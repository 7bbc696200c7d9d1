"""Files we read back are checked before anything is built from them: a damaged model-cache manifest is rebuilt,
and ``placement-gym show`` refuses a malformed results or placement file in one line naming the file and the field.

Real parts: the model cache's own files (written by a real build), results and placement files written by
``placement-gym train``, the real command line.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Callable

import pytest

from placement_gym import cli
from placement_gym.models import ZOO, load_model
from placement_gym.models.zoo import ZOO_VERSION, ZooEntry
from placement_gym.results import MAX_RECORDS, MAX_RESULTS_BYTES
from placement_gym.schema import MAX_DEVICES, MAX_OPS


# ----------------------------------------------------------------------------------------- cache manifests
@pytest.mark.parametrize("content", ["[]", "5", '"text"', "null", '{".xml": [], ".bin": {}}',
                                     '{".xml": {"size": "big", "sampled_sha256": 5}, ".bin": {}}'])
def test_a_manifest_of_valid_json_but_the_wrong_shape_is_damage_and_the_model_is_rebuilt(monkeypatch, tmp_path,
                                                                                          content):
    """A torch-kind zoo entry (built from the tiny opset model, so the test is fast) goes through the real cache."""
    monkeypatch.setenv("PLACEMENT_GYM_CACHE", str(tmp_path))
    builds = []

    def build():
        builds.append(1)
        return load_model("tiny_branch")

    monkeypatch.setitem(ZOO, "cached_tiny", ZooEntry(build, "tiny_branch through the cache", "x", "torch"))
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
    start = time.perf_counter()
    assert cli.main(["show", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    assert err.startswith(f"placement-gym show: error: {path}") and field in err and "expected" in err, err
    assert not list(tmp_path.glob("*.png"))  # nothing drawn, not even the good records' pictures
    assert time.perf_counter() - start < 30  # refused before anything big is built


def test_show_refuses_an_oversized_file_before_reading_it(tmp_path, capsys):
    path = tmp_path / "huge.json"
    with open(path, "wb") as f:
        f.truncate(MAX_RESULTS_BYTES + 1)  # a sparse file: its size, without writing it
    assert cli.main(["show", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"placement-gym show: error: {path}: {MAX_RESULTS_BYTES + 1} bytes; expected a results or "
                   f"placement file of at most {MAX_RESULTS_BYTES} bytes")
