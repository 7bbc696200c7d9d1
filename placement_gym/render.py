"""A picture of a placement: the computation graph drawn in layers, each op coloured by its device, cut edges marked.

The layout is `networkx`'s layered (multipartite) layout: an op's column is its depth (the longest path from a
graph input), so data flows left to right and parallel branches stack vertically. Edges between ops on different
devices (the tensors that cross submodels) are drawn thick and red. Graphs of more than `max_nodes` ops are shown
coarser: runs of consecutive ops (topological order) become one node coloured by the device most of its ops use.

    >>> image = placement_image(graph, placement, ["CPU", "GPU"], latency_s=0.0105)   # (H, W, 3) uint8
    >>> save_placement("placement.png", graph, placement, ["CPU", "GPU"])

Used by ``DevicePlacementEnv(render_mode="rgb_array").render()``, ``placement-gym show`` and ``placement-gym train``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from .graph import ComputationGraph
from .files import save_figure

__all__ = ["draw_placement", "placement_image", "save_placement"]

#: Device colours, in device order (a placement's device d gets DEVICE_COLOURS[d % len]).
DEVICE_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22")
#: Above this many ops the drawing groups consecutive ops (a coarser view stays readable).
MAX_NODES = 400


def _depths(n: int, edge_index: np.ndarray) -> np.ndarray:
    """(n,) longest-path depth of every node of a DAG whose edges go from lower to higher index."""
    depth = np.zeros(n, dtype=np.int64)
    for s, d in edge_index.T[np.argsort(edge_index[0], kind="stable")]:  # all edges into s come before s's
        depth[d] = max(depth[d], depth[s] + 1)
    return depth


def _coarsen(graph: ComputationGraph, placement: np.ndarray, max_nodes: int):
    """``(n, edges (2, E'), device per node, ops per node)``: the graph itself, or runs of consecutive ops."""
    n = graph.n_ops
    if n <= max_nodes:
        return n, graph.edge_index, placement, np.ones(n, dtype=np.int64)
    k = max(max_nodes // 2, 1)
    chunk = np.arange(n) * k // n  # consecutive ops in topological order
    src, dst = chunk[graph.edge_index[0]], chunk[graph.edge_index[1]]
    keep = src != dst
    edges = np.unique(np.stack([src[keep], dst[keep]]), axis=1) if keep.any() else np.zeros((2, 0), np.int64)
    devices = np.array([np.bincount(placement[chunk == c]).argmax() for c in range(k)], dtype=np.int64)
    return k, edges, devices, np.bincount(chunk, minlength=k)


def draw_placement(graph: ComputationGraph, placement: np.ndarray, device_names: Sequence[str], *,
                   latency_s: float | None = None, reference_latency_s: float | None = None,
                   n_submodels: int | None = None, simulated: bool | None = None, title: str | None = None,
                   max_nodes: int = MAX_NODES):
    """A matplotlib ``Figure`` of `placement` ((N,) device index per op) on `graph` (see the module docstring).

    `latency_s`, `reference_latency_s` (the first device alone), `n_submodels` and `simulated` go into the
    legend when given."""
    import networkx as nx
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    placement = np.asarray(placement, dtype=np.int64)
    if placement.shape != (graph.n_ops,):
        raise ValueError(f"placement has shape {placement.shape}; the graph has {graph.n_ops} ops")
    n, edges, devices, sizes = _coarsen(graph, placement, max_nodes)
    depth = _depths(n, edges)
    dag = nx.DiGraph()
    dag.add_nodes_from((i, {"layer": int(depth[i])}) for i in range(n))
    dag.add_edges_from(map(tuple, edges.T.tolist()))
    pos = nx.multipartite_layout(dag, subset_key="layer", align="vertical")

    layers, widest = int(depth.max()) + 1 if n else 1, int(np.bincount(depth).max()) if n else 1
    fig = Figure(figsize=(float(np.clip(3 + 0.09 * layers, 8, 40)), float(np.clip(2.5 + 0.45 * widest, 3.5, 12))),
                 dpi=100)
    top = 1.0 - 0.75 / fig.get_figheight()  # room for the title and the legend above the drawing
    ax = fig.add_axes((0.01, 0.01, 0.98, top - 0.02))
    ax.set_axis_off()
    cut = [tuple(e) for e in edges.T.tolist() if devices[e[0]] != devices[e[1]]]
    kept = [tuple(e) for e in edges.T.tolist() if devices[e[0]] == devices[e[1]]]
    nx.draw_networkx_edges(dag, pos, edgelist=kept, ax=ax, edge_color="#b0b0b0", width=0.6, arrows=False)
    nx.draw_networkx_edges(dag, pos, edgelist=cut, ax=ax, edge_color="#d62728", width=2.0, arrows=False)
    colours = [DEVICE_COLOURS[d % len(DEVICE_COLOURS)] for d in devices]
    node_size = 40.0 if n <= 150 else 18.0
    at_cut = {v for e in cut for v in e}  # ops at either end of a cut edge get a red ring: visible at any size
    nx.draw_networkx_nodes(dag, pos, ax=ax, node_color=colours, node_size=node_size * np.sqrt(sizes),
                           edgecolors=["#d62728" if v in at_cut else "none" for v in range(n)], linewidths=1.2)

    counts = np.bincount(placement, minlength=len(device_names))
    handles = [Line2D([], [], marker="o", linestyle="", color=DEVICE_COLOURS[d % len(DEVICE_COLOURS)],
                      label=f"{name}: {counts[d]} ops") for d, name in enumerate(device_names)]
    handles.append(Line2D([], [], color="#d62728", linewidth=2.0,
                          label=f"cut edge: a tensor crossing devices ({len(cut)}; ends ringed)"))
    fig.legend(handles=handles, loc="upper left", bbox_to_anchor=(0.005, 1.0 - 0.3 / fig.get_figheight()),
               ncol=min(len(handles), 4), frameon=False, fontsize="small")
    facts = [f"{graph.n_ops} ops"]
    if n < graph.n_ops:
        facts.append(f"drawn as {n} runs of consecutive ops")
    if latency_s is not None:
        speed = f" (x{reference_latency_s / latency_s:.2f} vs {device_names[0]}-only)" if reference_latency_s else ""
        facts.append(f"latency {latency_s * 1e3:.3f} ms{speed}" + (", SIMULATED" if simulated else ""))
    if n_submodels is not None:
        facts.append(f"{n_submodels} submodel{'s' if n_submodels != 1 else ''}")
    fig.suptitle(f"{title or graph.name}: " + ", ".join(facts), x=0.01, y=0.995, ha="left", va="top",
                 fontsize="medium")
    return fig


def placement_image(graph: ComputationGraph, placement: np.ndarray, device_names: Sequence[str],
                    **kwargs) -> np.ndarray:
    """`draw_placement` as an ``(H, W, 3)`` uint8 RGB array (what ``env.render()`` returns in rgb_array mode)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = draw_placement(graph, placement, device_names, **kwargs)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()


def save_placement(path: "str | Path", graph: ComputationGraph, placement: np.ndarray, device_names: Sequence[str],
                   *, overwrite: bool = False, **kwargs) -> Path:
    """Write `draw_placement` as a PNG (never over an existing file unless `overwrite`)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = draw_placement(graph, placement, device_names, **kwargs)
    FigureCanvasAgg(fig)
    return save_figure(path, fig, overwrite=overwrite, dpi=None)
