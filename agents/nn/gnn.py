"""Directed message-passing blocks over computation DAGs (small composable PyG modules).

A computation graph is directed: an op's *producers* (what it waits for) and its *consumers* (who waits for it)
play different roles in a placement, so every layer here passes messages both ways with separate weights:

    h_i' = W_self h_i + AGG_{j -> i} W_fwd [h_j, e_ji] + AGG_{i -> k} W_bwd [h_k, e_ik]

(forward = producer -> consumer along ``edge_index``, backward = along its flip). Symmetrising the adjacency,
as the HSDAG authors' code did, would lose which side of an edge an op is on.

Blocks::

    `MLP`               a plain multi-layer perceptron.
    `EdgeMessage`       one direction of message passing (a PyG `MessagePassing`), edge features optional.
    `DirectedConv`      forward + backward + self, summed: one directed layer.
    `DirectedGNN`       input projection + a stack of `DirectedConv` layers with residuals and LayerNorm:
                        the node encoder every graph agent shares.

Shapes: N nodes, E edges, F input features, Fe edge features, H hidden width. Everything runs on plain
torch-geometric (no torch-scatter / pyg-lib needed).
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch
from torch import Tensor, nn
from torch_geometric.nn import MessagePassing

__all__ = ["MLP", "EdgeMessage", "DirectedConv", "DirectedGNN"]


class MLP(nn.Sequential):
    """Linear layers with an activation between them (none after the last one).

    Args:
        in_channels: input width.
        hidden_channels: width of the hidden layers.
        out_channels: output width.
        num_layers: number of Linear layers (>= 1).
        activation: activation module class.
        layer_norm: put a LayerNorm before each hidden activation.
        dropout: dropout after each hidden activation.

    Shapes: (*, in_channels) -> (*, out_channels).
    """

    def __init__(self, in_channels: int, hidden_channels: int, out_channels: int, num_layers: int = 2,
                 activation: type[nn.Module] = nn.ReLU, layer_norm: bool = False, dropout: float = 0.0) -> None:
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers}")
        widths = [in_channels] + [hidden_channels] * (num_layers - 1) + [out_channels]
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(zip(widths[:-1], widths[1:])):
            layers.append(nn.Linear(a, b))
            if i < num_layers - 1:
                if layer_norm:
                    layers.append(nn.LayerNorm(b))
                layers.append(activation())
                if dropout:
                    layers.append(nn.Dropout(dropout))
        super().__init__(*layers)


def _remove_generated_source(cls: type[MessagePassing]) -> None:
    """Remove the source file PyG wrote for `cls`'s ``propagate``, once it has been imported.

    The first `MessagePassing` of a class built in a process renders ``propagate`` from PyG's jinja template into
    a module it writes to the temp folder (``$TMPDIR/<module>_<Class>_propagate_*.py``, ``delete=False``) and
    imports; PyG has no setting to keep it elsewhere or remove it, so every process left one behind. The
    imported module lives on in ``sys.modules`` (the next layers of the class reuse it, nothing reads the file
    again: it is not scripted with TorchScript here), so the file goes as soon as it is there; tracebacks through
    ``propagate`` then show no source lines."""
    module = sys.modules.get(getattr(cls.propagate, "__module__", ""))
    source = getattr(module, "__file__", None)
    if source and Path(source).parent == Path(tempfile.gettempdir()) and Path(source).name.endswith(".py"):
        Path(source).unlink(missing_ok=True)


class EdgeMessage(MessagePassing):
    """Messages along one direction of the edges: ``out_i = AGG_{(j, i) in edges} Linear([x_j, e_ji])``.

    Args:
        in_channels: node feature width F.
        out_channels: message width H.
        edge_dim: edge feature width Fe (0: edge features are not used).
        aggr: PyG aggregation (``"mean"``, ``"sum"``, ``"max"``).

    Shapes: x (N, F), edge_index (2, E) source -> target, edge_attr (E, Fe) or None -> (N, H); a node with no
    incoming edge gets zeros.
    """

    def __init__(self, in_channels: int, out_channels: int, edge_dim: int = 0, aggr: str = "mean") -> None:
        super().__init__(aggr=aggr)
        _remove_generated_source(type(self))
        self.edge_dim = edge_dim
        self.lin = nn.Linear(in_channels + edge_dim, out_channels, bias=False)

    def forward(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor | None = None) -> Tensor:
        if self.edge_dim and edge_attr is None:
            raise ValueError(f"this layer was built with edge_dim={self.edge_dim}; pass edge_attr (E, {self.edge_dim})")
        return self.propagate(edge_index, x=x, edge_attr=edge_attr if self.edge_dim else None)

    def message(self, x_j: Tensor, edge_attr: Tensor | None) -> Tensor:
        return self.lin(x_j if edge_attr is None else torch.cat([x_j, edge_attr], dim=-1))


class DirectedConv(nn.Module):
    """One directed layer: self term + messages from producers + messages from consumers, summed.

    Args:
        in_channels, out_channels: widths F -> H.
        edge_dim: edge feature width (0 = ignore edge features).
        aggr: aggregation of each direction.
        directed: False symmetrises (one set of weights for both directions, the HSDAG code's behaviour;
            kept for ablations).

    Shapes: x (N, F), edge_index (2, E) producer -> consumer, edge_attr (E, Fe) or None -> (N, H).
    """

    def __init__(self, in_channels: int, out_channels: int, edge_dim: int = 0, aggr: str = "mean",
                 directed: bool = True) -> None:
        super().__init__()
        self.directed = directed
        self.root = nn.Linear(in_channels, out_channels)
        self.forward_msg = EdgeMessage(in_channels, out_channels, edge_dim, aggr)
        self.backward_msg = EdgeMessage(in_channels, out_channels, edge_dim, aggr) if directed else self.forward_msg

    def forward(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor | None = None) -> Tensor:
        reverse = edge_index.flip(0)
        if not self.directed:  # one neighbourhood: predecessors and successors pooled together
            both = torch.cat([edge_index, reverse], dim=1)
            attr = None if edge_attr is None else torch.cat([edge_attr, edge_attr], dim=0)
            return self.root(x) + self.forward_msg(x, both, attr)
        return self.root(x) + self.forward_msg(x, edge_index, edge_attr) + self.backward_msg(x, reverse, edge_attr)


class DirectedGNN(nn.Module):
    """The shared node encoder: ``Linear(F -> H)``, then `num_layers` x (DirectedConv, residual, LayerNorm, act).

    Args:
        in_channels: node feature width F.
        hidden_channels: embedding width H.
        num_layers: message-passing layers (each widens the receptive field by one hop each way; 0 = MLP only).
        edge_dim: edge feature width Fe (0 = ignore edge features).
        aggr: aggregation of each direction.
        directed: separate forward/backward weights (True) or symmetrised (False).
        dropout: dropout after each layer.

    Shapes: x (N, F), edge_index (2, E), edge_attr (E, Fe) or None -> (N, H).
    """

    def __init__(self, in_channels: int, hidden_channels: int = 64, num_layers: int = 3, edge_dim: int = 0,
                 aggr: str = "mean", directed: bool = True, dropout: float = 0.0) -> None:
        super().__init__()
        self.in_channels, self.hidden_channels, self.edge_dim = in_channels, hidden_channels, edge_dim
        self.input = nn.Sequential(nn.Linear(in_channels, hidden_channels), nn.LayerNorm(hidden_channels), nn.ReLU())
        self.convs = nn.ModuleList(
            DirectedConv(hidden_channels, hidden_channels, edge_dim, aggr, directed) for _ in range(num_layers)
        )
        self.norms = nn.ModuleList(nn.LayerNorm(hidden_channels) for _ in range(num_layers))
        self.dropout = nn.Dropout(dropout) if dropout else nn.Identity()

    def forward(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor | None = None) -> Tensor:
        if x.shape[-1] != self.in_channels:
            raise ValueError(f"node features have width {x.shape[-1]}, this encoder was built for {self.in_channels}")
        h = self.input(x)
        attr = edge_attr if self.edge_dim else None
        for conv, norm in zip(self.convs, self.norms):
            h = norm(h + self.dropout(torch.relu(conv(h, edge_index, attr))))
        return h
