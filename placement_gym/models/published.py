"""The field's published placement benchmarks as models, each with the costs its authors published.

Two peers publish their inputs together with the exact semantics of their costs, so that a number measured here
can be set beside theirs:

* **Tarnawski et al.**, "Efficient Algorithms for Device Placement of DNN Graph Operators" (NeurIPS 2020),
  github.com/msr-fiddle/dnn-partitioning (MIT). An input is a JSON file: ``maxSizePerFPGA`` (bytes per
  accelerator), ``maxFPGAs`` (accelerators, k), ``maxCPUs`` (CPUs, l), ``nodes`` (``id``, ``supportedOnFpga``,
  ``cpuLatency``, ``fpgaLatency``, ``isBackwardNode``, optional ``colorClass`` and ``size``) and ``edges``
  (``sourceId``, ``destId``, ``cost``: the time to move the source's output between an accelerator and CPU DRAM,
  the same for every edge out of one node). Their time values are milliseconds here. The layer-granularity inputs,
  the smallest operator graphs and the human-expert splits ship with this package (``placement_gym/data/tarnawski``,
  with their licence): ``"tarnawski:throughput-inputs/LayerGraphs/bert24_inference"`` names one.
* **DOPPLER** (Yao et al., ICLR 2026), github.com/xinyuyao/Doppler. A graph is a text file: line 1 the number of
  nodes including input nodes, line 2 the input nodes, lines 3 and 4 the sources and targets of the edges, then one
  line per (non-input) node with its computation cost and its communication cost (integers) and an optional op
  type. A cost / 1e10 is seconds. That repository has no licence, so none of its graphs ship here: give the path of
  a graph file you have.

`load_published(spec)` returns a `PublishedGraph`: a `ComputationGraph` that also carries the file's costs
(`TarnawskiCosts` or `DopplerCosts`). The env and the CLI see it and price it with the matching cost model
(`placement_gym.backends.published`), never the simulator's profile. Every input file is checked against a schema
(`placement_gym.schema`) before anything is built from it.
"""
from __future__ import annotations

import heapq
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from ..graph import ComputationGraph
from ..schema import (MAX_OPS, Boolean, Found, Integer, ListOf, Number, OneOf, Record, Text, check, mismatch,
                      read_json, read_text, repeated)

#: ``model`` names of a shipped Tarnawski input start with this.
TARNAWSKI_PREFIX = "tarnawski:"
#: Where the shipped Tarnawski inputs are (`ATTRIBUTION.md` there says what and from where).
TARNAWSKI_DIR = Path(__file__).resolve().parent.parent / "data" / "tarnawski"
#: The largest input file read (bytes), far above any of their inputs.
MAX_FILE_BYTES = 64 << 20
#: The most edges an input may have.
MAX_EDGES = 2_000_000
#: A DOPPLER cost divided by this is seconds (the repository's `Simulator.get_cost` returns makespan / 1e10).
DOPPLER_COST_PER_SECOND = 1e10
#: Tarnawski's time values are milliseconds: divided by this they are seconds.
TARNAWSKI_MS_PER_SECOND = 1e3
#: The largest time value (ms, about 30 years) and memory size (bytes, an exabyte) a Tarnawski input may give:
#: far above any real op, low enough that sums over the largest graph stay finite.
TARNAWSKI_MAX_MS = 1e12
TARNAWSKI_MAX_BYTES = 1e18
#: The largest cost a DOPPLER graph may give (1e8 s once divided by `DOPPLER_COST_PER_SECOND`), and so its
#: most digits: a longer number is refused before it is converted (Python's int refuses 4,300 digits, int64 19).
DOPPLER_MAX_COST = 10 ** 18
_DOPPLER_DIGITS = len(str(DOPPLER_MAX_COST))

_MS, _BYTES = Number(0, TARNAWSKI_MAX_MS), Number(0, TARNAWSKI_MAX_BYTES)
_NODE = Record(
    {"id": Integer(-(2 ** 31), 2 ** 31 - 1), "supportedOnFpga": OneOf(Boolean(), Integer(0, 1)),
     "cpuLatency": _MS, "fpgaLatency": _MS, "isBackwardNode": OneOf(Boolean(), Integer(0, 1))},
    {"colorClass": Integer(-(2 ** 31), 2 ** 31 - 1), "size": _BYTES, "name": Text(max_len=1000)},
    what="a node with id, supportedOnFpga, cpuLatency, fpgaLatency, isBackwardNode (colorClass, size optional)")
_EDGE = Record({"sourceId": Integer(-(2 ** 31), 2 ** 31 - 1), "destId": Integer(-(2 ** 31), 2 ** 31 - 1),
                "cost": _MS}, {"size": _BYTES},
               what="an edge with sourceId, destId, cost (size optional)")
#: Tarnawski et al.'s input format (their README's "Input format"); other debug fields are accepted and ignored.
TARNAWSKI_SCHEMA = Record({
    "maxSizePerFPGA": _BYTES, "maxFPGAs": Integer(0, 63), "maxCPUs": Integer(0, 63),
    "nodes": ListOf(_NODE, min_len=1, max_len=MAX_OPS), "edges": ListOf(_EDGE, max_len=MAX_EDGES),
}, what="a Tarnawski et al. input (maxSizePerFPGA, maxFPGAs, maxCPUs, nodes, edges)")
#: A human-expert split / a result file of their programs: node ids per CPU and per accelerator.
_MACHINE = Record({"nodes": ListOf(Integer(-(2 ** 31), 2 ** 31 - 1), max_len=MAX_OPS)})
SPLIT_SCHEMA = Record({"cpus": ListOf(_MACHINE, max_len=63), "fpgas": ListOf(_MACHINE, max_len=63)},
                      what="a split (cpus and fpgas, each a list of {\"nodes\": [ids]})")


@dataclass(frozen=True, eq=False)
class TarnawskiCosts:
    """A Tarnawski et al. input's costs, one entry per op of the graph (in the graph's op order).

    Attributes (N ops):
        node_ids: (N,) int64, each op's ``id`` in the file.
        cpu_ms, accelerator_ms: (N,) float64, its time on a CPU / on an accelerator (milliseconds).
        out_cost_ms: (N,) float64, the cost of its outgoing edges (ms; 0 when it has none).
        size_bytes: (N,) float64, its memory on an accelerator.
        on_accelerator: (N,) bool, ``supportedOnFpga``.
        color_class: (N,) int64, ops of one class must share a device (a fresh class where the file gives none).
        backward: (N,) bool, ``isBackwardNode``.
        n_accelerators, n_cpus: ``maxFPGAs``, ``maxCPUs``.
        memory_bytes: ``maxSizePerFPGA``, the memory of each accelerator.
        source: the file read.
    """

    node_ids: np.ndarray
    cpu_ms: np.ndarray
    accelerator_ms: np.ndarray
    out_cost_ms: np.ndarray
    size_bytes: np.ndarray
    on_accelerator: np.ndarray
    color_class: np.ndarray
    backward: np.ndarray
    n_accelerators: int
    n_cpus: int
    memory_bytes: float
    source: str

    family = "tarnawski"


@dataclass(frozen=True, eq=False)
class DopplerCosts:
    """A DOPPLER graph's costs, one entry per op (in the graph's op order, which is the file's node order).

    Attributes (N ops):
        node_ids: (N,) int64, each op's node number in the file (its line is 5 + that number).
        compute: (N,) float64, the op's computation cost (the same on every device; / 1e10 = seconds).
        communication: (N,) float64, the cost of sending its output to another device (/ 1e10 = seconds).
        successors: per op, the ops it feeds, in the order the file first lists each edge (the order their
            simulator starts the transfers in, which decides ties).
        source: the file read.
    """

    node_ids: np.ndarray
    compute: np.ndarray
    communication: np.ndarray
    successors: tuple[tuple[int, ...], ...]
    source: str

    family = "doppler"


@dataclass(frozen=True, eq=False)
class PublishedGraph(ComputationGraph):
    """A `ComputationGraph` read from a published benchmark file, with that file's costs (`costs`)."""

    costs: "TarnawskiCosts | DopplerCosts | None" = field(default=None, repr=False)

    @property
    def family(self) -> str:
        """``"tarnawski"`` or ``"doppler"``: which cost model prices this graph."""
        return self.costs.family


def is_published(spec: object) -> bool:
    """Whether model spec `spec` names a published benchmark file: ``"tarnawski:..."``, a ``.json`` file (a
    Tarnawski input) or a ``.txt`` file (a DOPPLER graph)."""
    if isinstance(spec, PublishedGraph):
        return True
    if not isinstance(spec, (str, os.PathLike)):
        return False
    text = os.fspath(spec)
    return text.startswith(TARNAWSKI_PREFIX) or text.lower().endswith((".json", ".txt"))


def tarnawski_names(kind: str = "throughput") -> list[str]:
    """The shipped Tarnawski inputs of `kind` (``"throughput"`` or ``"latency"``) as ``model`` names."""
    root = TARNAWSKI_DIR / f"{kind}-inputs"
    return [TARNAWSKI_PREFIX + p.relative_to(TARNAWSKI_DIR).with_suffix("").as_posix()
            for p in sorted(root.glob("*/*.json"))]


def tarnawski_path(spec: str) -> Path:
    """The shipped file a ``"tarnawski:PATH"`` name stands for (``.json`` optional)."""
    rest = spec[len(TARNAWSKI_PREFIX):].strip().removesuffix(".json")
    path = (TARNAWSKI_DIR / f"{rest}.json").resolve()
    if TARNAWSKI_DIR not in path.parents or not path.is_file():
        shipped = ", ".join(n[len(TARNAWSKI_PREFIX):] for n in tarnawski_names() + tarnawski_names("latency"))
        raise ValueError(f"{spec!r} is not a shipped Tarnawski input; expected 'tarnawski:' followed by one of: "
                         f"{shipped}")
    return path


def expert_split_path(graph: "PublishedGraph") -> Path | None:
    """The shipped human-expert split for a Tarnawski layer graph (training inputs use their inference split, as
    their README says), or None when there is none."""
    stem = Path(graph.costs.source).stem
    model = stem.rsplit("_", 1)[0]
    for name in (stem, f"{model}_inference"):
        path = TARNAWSKI_DIR / "human-experts" / f"{name}_expert.json"
        if path.is_file() and "LayerGraphs" in graph.costs.source:
            return path
    return None


def load_published(spec: "str | os.PathLike", name: str | None = None) -> PublishedGraph:
    """The `PublishedGraph` of a shipped ``"tarnawski:..."`` name, a Tarnawski ``.json`` input or a DOPPLER
    ``.txt`` graph; named `name`, or by the spec as given."""
    text = os.fspath(spec)
    if text.startswith(TARNAWSKI_PREFIX):
        return load_tarnawski(tarnawski_path(text), name=name or text)
    if text.lower().endswith(".json"):
        return load_tarnawski(text, name=name)
    if text.lower().endswith(".txt"):
        return load_doppler(text, name=name)
    raise ValueError(f"{text!r} is not a published benchmark; expected 'tarnawski:PATH', a Tarnawski et al. input "
                     "(.json) or a DOPPLER graph (.txt)")


def _topological_order(n: int, src: np.ndarray, dst: np.ndarray, source: str) -> np.ndarray:
    """(N,) node positions in a topological order, ties kept in file order; ValueError naming the file on a
    cycle."""
    indegree = np.bincount(dst, minlength=n)
    successors: list[list[int]] = [[] for _ in range(n)]
    for u, v in zip(src.tolist(), dst.tolist()):
        successors[u].append(v)
    ready = [i for i in range(n) if indegree[i] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        u = heapq.heappop(ready)
        order.append(u)
        for v in successors[u]:
            indegree[v] -= 1
            if indegree[v] == 0:
                heapq.heappush(ready, v)
    if len(order) != n:
        raise ValueError(f"{source}: the edges form a cycle; expected a DAG")
    return np.array(order, dtype=np.int64)


def _graph(name: str, op_names: Sequence[str], op_types: Sequence[str], src: np.ndarray, dst: np.ndarray,
           edge_bytes: np.ndarray, costs, source: str) -> tuple[PublishedGraph, np.ndarray]:
    """The graph of N file nodes in topological order (edges deduplicated, self-loops refused) and, (N,), the file
    position of each op; `costs` is built by the caller from that order."""
    n = len(op_names)
    if np.any(src == dst):
        raise ValueError(f"{source}: node {int(src[src == dst][0])} has an edge to itself; expected a DAG")
    order = _topological_order(n, src, dst, source)
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    pairs: dict[tuple[int, int], int] = {}
    for u, v, b in zip(position[src].tolist(), position[dst].tolist(), edge_bytes.tolist()):
        pairs[(u, v)] = max(pairs.get((u, v), 0), int(b))  # one edge per pair (a file may repeat one)
    edges = sorted(pairs)
    graph = PublishedGraph(
        name=name, op_names=tuple(op_names[i] for i in order), op_types=tuple(op_types[i] for i in order),
        output_shapes=tuple(() for _ in range(n)), bytes_out=np.zeros(n, dtype=np.int64), flops=np.zeros(n),
        edge_index=np.array(edges, dtype=np.int64).T.reshape(2, -1),
        edge_bytes=np.array([pairs[e] for e in edges], dtype=np.int64), costs=costs(order))
    return graph, order


def load_tarnawski(path: "str | os.PathLike", name: str | None = None) -> PublishedGraph:
    """A Tarnawski et al. input file as a `PublishedGraph` with `TarnawskiCosts`.

    The file is checked against `TARNAWSKI_SCHEMA` first; then: unique node ids, edges between known nodes, one
    cost for all edges out of a node (their program refuses two), a DAG."""
    data = read_json(path, TARNAWSKI_SCHEMA, max_bytes=MAX_FILE_BYTES, what="Tarnawski et al. input (.json)")
    source = os.fspath(path)
    nodes, edges = data["nodes"], data["edges"]
    ids = [int(node["id"]) for node in nodes]
    twice = repeated(ids)
    if twice is not None:
        first, second = twice
        raise mismatch(source, f"nodes[{second}].id", ids[second], f"unique node ids (nodes[{first}] has it too)")
    index = {node_id: i for i, node_id in enumerate(ids)}
    n = len(ids)
    out_cost = np.zeros(n)
    has_out = np.zeros(n, dtype=bool)
    src, dst, sizes = [], [], []
    for k, edge in enumerate(edges):
        for key in ("sourceId", "destId"):
            if edge[key] not in index:
                raise mismatch(source, f"edges[{k}].{key}", edge[key], "the id of a node in nodes")
        u, v = index[edge["sourceId"]], index[edge["destId"]]
        if has_out[u] and abs(out_cost[u] - float(edge["cost"])) > 1e-6:
            raise mismatch(source, f"edges[{k}].cost", edge["cost"],
                           f"{out_cost[u]:g}, the cost of the other edges out of node {edge['sourceId']}")
        out_cost[u], has_out[u] = float(edge["cost"]), True
        src.append(u), dst.append(v), sizes.append(float(edge.get("size", 0.0)))
    names = [str(node.get("name", "")) for node in nodes]
    if len(set(names)) != n or "" in names:
        names = [f"node{i}" for i in ids]
    # A node without a colour class is in a class of its own (their program gives it a fresh number).
    classes = [node.get("colorClass") for node in nodes]
    fresh = max([c for c in classes if c is not None], default=0) + 1
    color = np.array([c if c is not None else fresh + i for i, c in enumerate(classes)], dtype=np.int64)
    backward = np.array([bool(node["isBackwardNode"]) for node in nodes])

    def costs(order: np.ndarray) -> TarnawskiCosts:
        return TarnawskiCosts(
            node_ids=np.array(ids, dtype=np.int64)[order],
            cpu_ms=np.array([float(nd["cpuLatency"]) for nd in nodes])[order],
            accelerator_ms=np.array([float(nd["fpgaLatency"]) for nd in nodes])[order],
            out_cost_ms=out_cost[order], size_bytes=np.array([float(nd.get("size", 0.0)) for nd in nodes])[order],
            on_accelerator=np.array([bool(nd["supportedOnFpga"]) for nd in nodes])[order],
            color_class=color[order], backward=backward[order], n_accelerators=int(data["maxFPGAs"]),
            n_cpus=int(data["maxCPUs"]), memory_bytes=float(data["maxSizePerFPGA"]), source=source)

    if data["maxFPGAs"] + data["maxCPUs"] < 1:
        raise mismatch(source, "maxFPGAs", data["maxFPGAs"], "maxFPGAs + maxCPUs >= 1 (at least one device)")
    types = ["TarnawskiBackward" if b else "TarnawskiForward" for b in backward]
    graph, _ = _graph(name or Path(source).stem, names, types, np.array(src, dtype=np.int64).reshape(-1),
                      np.array(dst, dtype=np.int64).reshape(-1), np.array(sizes).reshape(-1), costs, source)
    return graph


def read_split(path: "str | os.PathLike", graph: PublishedGraph) -> np.ndarray:
    """A split file (their human-expert format: ``cpus`` and ``fpgas``, each a list of ``{"nodes": [ids]}``) as a
    placement of `graph`: (N,) int64 device index (accelerator i = ``ACCi``, every CPU entry = ``CPU0``).

    As their ``-expert`` option does, an op the split leaves out takes the device of the ops of its colour class
    that the split places (how a forward split covers a training graph's backward ops); ValueError naming the op
    when none or two devices can be inferred."""
    data = read_json(path, SPLIT_SCHEMA, max_bytes=MAX_FILE_BYTES, what="split (.json)")
    costs: TarnawskiCosts = graph.costs
    position = {int(i): p for p, i in enumerate(costs.node_ids.tolist())}
    placement = np.full(graph.n_ops, -1, dtype=np.int64)
    machines = [(costs.n_accelerators, m) for m in data["cpus"]] + \
               [(d, m) for d, m in enumerate(data["fpgas"])]
    if len(data["fpgas"]) > costs.n_accelerators:
        raise mismatch(path, "fpgas", f"{len(data['fpgas'])} accelerators",
                       f"at most {costs.n_accelerators} (maxFPGAs of {costs.source})")
    for device, machine in machines:
        for node_id in machine["nodes"]:
            if node_id not in position:
                raise mismatch(path, "nodes", node_id, f"ids of nodes of {costs.source}")
            placement[position[node_id]] = device
    for p in np.flatnonzero(placement < 0):
        devices = set(placement[(costs.color_class == costs.color_class[p]) & (placement >= 0)].tolist())
        if len(devices) != 1:
            raise ValueError(f"{path}: node {int(costs.node_ids[p])} is not placed and its colour class places "
                             f"{'no node' if not devices else 'nodes on several devices'}; expected every node "
                             "placed, directly or through its colour class")
        placement[p] = devices.pop()
    return placement


def load_doppler(path: "str | os.PathLike", name: str | None = None) -> PublishedGraph:
    """A DOPPLER graph file (module docstring) as a `PublishedGraph` with `DopplerCosts`.

    Read as their ``utils._read_compute_graph`` reads it (every run of digits on a line is a number); checked
    before anything is built: a bounded size, the node count, edge lists of equal length between known nodes, and
    two non-negative costs per node."""
    source = os.fspath(path)
    lines = read_text(path, max_bytes=MAX_FILE_BYTES, what="DOPPLER graph (.txt)").splitlines()

    def numbers(k: int) -> list[int]:
        """The numbers on line k + 1, each checked to be at most `DOPPLER_MAX_COST` before it is converted."""
        # Leading zeros dropped first: Python's int refuses a string of over 4,300 digits, zeros or not.
        found = [x.lstrip("0") or "0" for x in re.findall(r"\d+", lines[k])] if k < len(lines) else []
        for x in found:
            if len(x) > _DOPPLER_DIGITS or int(x) > DOPPLER_MAX_COST:
                raise mismatch(source, f"line {k + 1}", Found(x if len(x) <= 24 else f"a number of {len(x)} digits"),
                               f"integers from 0 to {DOPPLER_MAX_COST:.0e} (node numbers, counts and costs)")
        return [int(x) for x in found]

    if len(lines) < 4 or not re.fullmatch(r"\s*\d+\s*", lines[0]):
        found = f"line 1 is {lines[0][:40]!r}" if lines else "the file is empty"
        raise ValueError(f"{source}: {found}; expected a DOPPLER graph: the node count, the input nodes, the edge "
                         "sources, the edge targets, then one 'compute,communication' line per node")
    n = numbers(0)[0] - len(numbers(1))
    check(n, Integer(1, MAX_OPS), source, at="line 1 (nodes) minus line 2 (input nodes)")
    src, dst = np.array(numbers(2), dtype=np.int64), np.array(numbers(3), dtype=np.int64)
    if src.size != dst.size:
        raise ValueError(f"{source}: line 3 has {src.size} edge sources and line 4 {dst.size} targets; expected "
                         "as many of each")
    check(src.size, Integer(0, MAX_EDGES), source, at="line 3 (edges)")
    if src.size and max(src.max(), dst.max()) >= n:
        raise ValueError(f"{source}: an edge names node {int(max(src.max(), dst.max()))}; expected nodes 0 to "
                         f"{n - 1} ({n} non-input nodes)")
    if len(lines) < 4 + n:
        raise ValueError(f"{source}: {len(lines) - 4} cost lines; expected one per node ({n})")
    costs_of = [numbers(4 + i) for i in range(n)]
    for i, values in enumerate(costs_of):
        if len(values) < 2:
            raise ValueError(f"{source}: line {5 + i} is {lines[4 + i][:60]!r}; expected 'compute,communication' "
                             f"costs of node {i}")
    op_types = [(re.search(r"[a-zA-Z_]+$", lines[4 + i].strip()) or [None])[0] or "op" for i in range(n)]
    compute = np.array([float(v[0]) for v in costs_of])
    communication = np.array([float(v[1]) for v in costs_of])

    def costs(order: np.ndarray) -> DopplerCosts:
        position = np.empty(n, dtype=np.int64)
        position[order] = np.arange(n)
        successors: list[dict[int, None]] = [{} for _ in range(n)]
        for u, v in zip(position[src].tolist(), position[dst].tolist()):
            successors[u].setdefault(v)  # a dict keeps first appearances in order
        return DopplerCosts(node_ids=order.copy(), compute=compute[order], communication=communication[order],
                            successors=tuple(tuple(s) for s in successors), source=source)

    graph, _ = _graph(name or Path(source).stem, [f"node{i}" for i in range(n)], op_types, src, dst,
                      np.zeros(src.size), costs, source)
    return graph


def placement_from_file_order(graph: PublishedGraph, devices: Sequence[int]) -> np.ndarray:
    """(N,) placement of `graph` from `devices` listed per node in the file's order (node i's device is
    ``devices[i]``, as their programs list a placement)."""
    placement = np.empty(graph.n_ops, dtype=np.int64)
    placement[:] = np.asarray(devices, dtype=np.int64)[graph.costs.node_ids]
    return placement
