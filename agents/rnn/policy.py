"""The RNN placer of Mirhoseini et al. (ICML 2017): a seq2seq LSTM with attention over groups of ops.

The ops are first put into G groups that always share a device (here: G contiguous chunks of the topological
order; the paper used TensorFlow co-location groups or a fixed number of groups). Each group is embedded from
what the paper used: its ops' types and output shapes (the mean of their node features; the env's default
features hold the op-type one-hot and output-shape families, plus position, degree and cost) and its
adjacency (how many edges come in from / go out to every other group). An LSTM encoder reads the groups in
topological order; an LSTM decoder with content-based attention over the encoder states emits one device per
group, fed back the device it chose for the previous group.

No graph size or device count is built into the weights: each step's device comes from the shared device head
(`agents.nn.device_head.DeviceScorer`: the decoder state against the device features, the group's summed op
costs and the AND of its ops' action masks), and the device fed back is described by its device features, not
its index.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import torch
from torch import Tensor, nn

from agents.core.base import PolicySpec
from agents.nn.groups import split_groups
from agents.nn.device_head import DeviceScorer, Devices, device_input_width, device_inputs
from agents.nn.graph_batch import obs_to_batch
from agents.nn.policy import PolicySample, group_majority
from agents.nn.refine import OpRefiner
from placement_gym.wrappers import contiguous_groups

__all__ = ["RNNPolicy", "group_inputs"]

#: Most (K x steps x G x H) entries of one block of the teacher-forced attention (`RNNPolicy._decode`): 4M floats,
#: 16 MB.
ATTENTION_BLOCK = 1 << 22


def group_inputs(x: Tensor, edge_index: Tensor, groups: Tensor, n_groups: int, max_groups: int,
                 columns: Tensor | None = None) -> Tensor:
    """(G, F + 2 * max_groups) group embeddings' inputs.

    Args:
        x: (N, F) node features.
        edge_index: (2, E) producer -> consumer.
        groups: (N,) int64 group of every node, values 0..n_groups-1.
        n_groups: G (the groups of this graph).
        max_groups: width of the adjacency part (the rest is zero).
        columns: (N,) int64 adjacency column of every node, values < max_groups (None: its group, then
            G <= max_groups). Coarse to fine passes the node's coarse group: the adjacency keeps its width (the
            weights' input) while the groups halve.

    Columns: mean node features of the group's ops; log2(1 + edges into the group from column j) for every j;
    log2(1 + edges out of the group into column j) for every j (edges inside one group are left out).
    """
    f = x.shape[1]
    columns = groups if columns is None else columns
    counts = torch.zeros(n_groups, device=x.device).index_add_(0, groups, torch.ones_like(groups, dtype=x.dtype))
    mean = torch.zeros(n_groups, f, device=x.device).index_add_(0, groups, x) / counts.clamp_min(1).unsqueeze(1)
    src, dst = groups[edge_index[0]], groups[edge_index[1]]
    src_col, dst_col = columns[edge_index[0]], columns[edge_index[1]]
    between = src != dst
    ones = torch.ones(int(between.sum()), device=x.device)
    adjacency = torch.zeros(n_groups, max_groups, device=x.device)
    adjacency.index_put_((dst[between], src_col[between]), ones, accumulate=True)
    incoming = torch.log2(1 + adjacency)
    adjacency = torch.zeros(n_groups, max_groups, device=x.device)
    adjacency.index_put_((src[between], dst_col[between]), ones, accumulate=True)
    outgoing = torch.log2(1 + adjacency)
    return torch.cat([mean, incoming, outgoing], dim=1)


class RNNPolicy(nn.Module):
    """Seq2seq placer: group embeddings -> LSTM encoder -> attentional LSTM decoder -> a device per group.

    Args:
        spec: sizes from the env (`PolicySpec`).
        n_groups: G, the number of op groups (at most the number of ops of the graph).
        hidden_channels: LSTM and embedding width H.

    refine: add the per-op refinement stage (`agents.nn.refine.OpRefiner`) after the group decoder.
    refine_boundary: its boundary moves (`OpRefiner`'s ``boundary``).

    Coarse to fine (`split`, `agents.search.coarse_to_fine`): the groups can be halved during training, down to
    one per op; the decoder then decodes 2G steps. Unlike Post's free distributions the decoder's distribution
    changes at a split (each step reads another encoder state), so the agent re-fits the run's best placement
    right after one (`agents.rnn.RNNAgent`, ``split_patience``). The number of groups now (``n_groups_now``)
    is a buffer: a split policy reloads with its groups. The weights do not depend on it: the adjacency inputs
    of a fine group count edges per coarse group (`group_inputs`'s ``columns``).

    ``act(obs, K)`` decodes K placements in parallel (a batch of K decoder runs over the same encoding) and
    returns actions (K, N) (each op takes its group's device), the summed log-probability of the G decisions
    (K,) and the mean entropy per decision ().
    """

    def __init__(self, spec: PolicySpec, n_groups: int = 8, hidden_channels: int = 64, refine: bool = False,
                 refine_boundary: bool = True) -> None:
        super().__init__()
        if n_groups < 1:
            raise ValueError(f"n_groups must be >= 1, got {n_groups}")
        self.n_groups, self.device_features, self.default_devices = n_groups, spec.device_features, spec.n_devices
        self.register_buffer("n_groups_now", torch.tensor(n_groups))  # > n_groups after coarse-to-fine splits
        self.embed = nn.Sequential(nn.Linear(spec.node_features + 2 * n_groups, hidden_channels), nn.Tanh())
        self.encoder = nn.LSTM(hidden_channels, hidden_channels, batch_first=True)
        # The previous group's device, fed back: what it is (its device features), not its index; and a learned
        # vector for "no previous group".
        self.device_embedding = nn.Linear(device_input_width(spec.device_features), hidden_channels)
        self.no_device = nn.Parameter(torch.zeros(hidden_channels))
        self.decoder = nn.LSTMCell(2 * hidden_channels, hidden_channels)  # input: [encoder state of the group, previous device]
        self.attn_enc = nn.Linear(hidden_channels, hidden_channels, bias=False)
        self.attn_dec = nn.Linear(hidden_channels, hidden_channels)
        self.attn_v = nn.Linear(hidden_channels, 1, bias=False)
        self.out = DeviceScorer(2 * hidden_channels, spec.device_features, hidden_channels)  # near-uniform devices at first
        # Optional per-op refinement (`OpRefiner`): an op's embedding = its features and its group's state.
        self.op_embed = nn.Sequential(nn.Linear(spec.node_features + hidden_channels, hidden_channels),
                                      nn.Tanh()) if refine else None
        self.refiner = OpRefiner(hidden_channels, hidden_channels, spec.device_features,
                                 boundary=refine_boundary) if refine else None
        self._groups_cache: dict[int, np.ndarray] = {}
        self._largest = 0  # ops of the largest graph placed so far: where splitting ends

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # Checkpoints from before coarse to fine have no n_groups_now: they never split.
        state_dict.setdefault(prefix + "n_groups_now", torch.tensor(self.n_groups))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self._groups_cache = {}

    def groups_for(self, n_ops: int) -> np.ndarray:
        """(N,) int64 group of every op of an `n_ops`-op graph (G = min(n_groups_now, n_ops) contiguous chunks)."""
        self._largest = max(self._largest, n_ops)
        if n_ops not in self._groups_cache:
            self._groups_cache[n_ops] = contiguous_groups(n_ops, min(int(self.n_groups_now), n_ops))
        return self._groups_cache[n_ops]

    def coarse_groups_for(self, n_ops: int) -> np.ndarray:
        """(N,) int64 the op's group before any split (min(n_groups, n_ops) chunks): the adjacency columns."""
        return contiguous_groups(n_ops, min(self.n_groups, n_ops))

    @torch.no_grad()
    def split(self) -> bool:
        """Halve every group (coarse to fine); False when there are already as many groups as ops of the largest
        graph seen (or, before any, when the groups cannot grow)."""
        largest = self._largest
        if largest and int(self.n_groups_now) >= largest:
            return False
        self.n_groups_now.fill_(int(self.n_groups_now) * 2 if not largest
                                else split_groups(largest, int(self.n_groups_now))[1])
        self._groups_cache = {}
        return True

    def encode(self, obs: Mapping[str, Any]) -> tuple[Tensor, Tensor, tuple[Tensor, Tensor], Tensor | None, Devices, Tensor]:
        """Encoder states (G, H), the op -> group map (N,), the final LSTM state, with refinement the op
        embeddings (N, H) (else None), the ops' `Devices` and their edges (2, E)."""
        device = next(self.parameters()).device
        batch = obs_to_batch(obs, device=device)
        if batch.num_graphs != 1:
            raise ValueError(f"act() takes one observation, got a batch of {batch.num_graphs}")
        groups_np = self.groups_for(batch.num_nodes)
        groups = torch.as_tensor(groups_np, device=device)
        g = int(groups_np.max()) + 1
        columns = None
        if g > self.n_groups:  # split: adjacency counted per coarse group, the embedding's input width
            columns = torch.as_tensor(self.coarse_groups_for(batch.num_nodes), device=device)
        inputs = self.embed(group_inputs(batch.x, batch.edge_index, groups, g, self.n_groups, columns))  # (G, H)
        states, (h, c) = self.encoder(inputs.unsqueeze(0))
        ops = None if self.op_embed is None else self.op_embed(torch.cat([batch.x, states[0][groups]], dim=-1))
        return states[0], groups, (h[0], c[0]), ops, Devices.of_ops(batch, self.default_devices), batch.edge_index

    def act(self, obs: Mapping[str, Any], num_samples: int = 1, deterministic: bool = False) -> PolicySample:
        """Decode K placements: actions (K, N), log_prob (K,), entropy (), the group devices (K, G) as
        ``replay["group_actions"]`` and the encoder's final state (H,) as ``embedding``."""
        return self._decode(obs, num_samples, deterministic)

    def evaluate(self, obs: Mapping[str, Any], taken: PolicySample) -> PolicySample:
        """`taken`'s group devices scored under the current weights (the decoder fed them, teacher-forced)."""
        forced = taken.replay["group_actions"]
        return self._decode(obs, int(forced.shape[0]), forced=forced, taken_path=taken.replay.get("refine_path"))

    def placement_log_prob(self, obs: Mapping[str, Any], placement: np.ndarray) -> Tensor:
        """() log-likelihood, per group, of decoding `placement` (N,): each group's device is the one most of
        its ops have (all of them, for the decoder's own placements), teacher-forced."""
        d = int(np.shape(obs["action_mask"])[-1]) if "action_mask" in obs else self.default_devices
        majority = group_majority(self.groups_for(len(placement)), placement, d, obs.get("action_mask"))
        forced = torch.as_tensor(majority, device=next(self.parameters()).device).unsqueeze(0)
        decoded = self._decode(obs, 1, forced=forced, refined=False)
        log_prob = decoded.log_prob[0] / len(majority)
        if self.refiner is None:
            return log_prob
        target = torch.as_tensor(np.asarray(placement), dtype=torch.long, device=forced.device)
        return log_prob + self.refiner.mean_log_prob(decoded.replay["ops"], decoded.actions[0], target,
                                                     decoded.replay["devices"], decoded.replay["edge_index"])

    def _decode(self, obs: Mapping[str, Any], k: int, deterministic: bool = False, forced: Tensor | None = None,
                taken_path: Tensor | None = None, refined: bool = True) -> PolicySample:
        """K decoder runs over one encoding; each group's device is drawn (or, with `forced` (K, G), given);
        then, with refinement, each op's (or, with `taken_path` (K, R, N), the refinement rounds re-scored)."""
        enc, groups, (h, c), ops, op_devices, edge_index = self.encode(obs)
        embedding = h.reshape(-1)  # (H,): the encoder's final state
        g = enc.shape[0]
        chunks = op_devices.grouped(groups, g)  # (G, D) summed costs, AND of the masks
        d = chunks.n_devices
        # The cost term once for all G groups, so each group's cost share is taken over the whole graph.
        cost_logits = None if chunks.cost is None else self.out.cost_logits(chunks.cost)  # (G, D)
        total = None if chunks.cost is None else chunks.cost.clamp_min(1e-9).sum(0)  # (D,) the whole graph's
        features = (chunks.features if chunks.features is not None and self.device_features
                    else enc.new_zeros(d, max(self.device_features, 1)))
        fed_back = self.device_embedding(device_inputs(features))  # (D, H): what each device is, to feed back
        h, c = h.expand(k, -1).contiguous(), c.expand(k, -1).contiguous()
        keys = self.attn_enc(enc)  # (G, H), computed once for every decoding step

        def log_probs_at(states: Tensor, first: int) -> Tensor:
            """(K, T, H) decoder states of steps first..first+T-1 -> (K, T, D) log-probabilities of the devices."""
            t = states.shape[1]
            scores = self.attn_v(torch.tanh(keys + self.attn_dec(states).unsqueeze(2))).squeeze(-1)  # (K, T, G)
            context = torch.softmax(scores, dim=-1) @ enc  # (K, T, H)
            steps = slice(first, first + t)
            per_item = [None if x is None else x[steps].expand(k, -1, -1).reshape(k * t, d)  # (K x T, D)
                        for x in (chunks.mask, cost_logits)]
            logits = self.out(torch.cat([states, context], dim=-1).reshape(k * t, -1), chunks.features, None,
                              per_item[0], n_devices=d, cost_logits=per_item[1], graph_total=total)
            return torch.log_softmax(logits, dim=-1).view(k, t, d)

        previous = self.no_device.expand(k, -1)
        if forced is None:  # each step feeds back the device it drew: one step at a time
            choices, step_log_probs = [], []
            for t in range(g):
                h, c = self.decoder(torch.cat([enc[t].expand(k, -1), previous], dim=-1), (h, c))
                log_p = log_probs_at(h.unsqueeze(1), t)[:, 0]  # (K, D)
                device_t = log_p.argmax(-1) if deterministic else torch.multinomial(log_p.exp(), 1).squeeze(-1)
                choices.append(device_t)
                step_log_probs.append(log_p)
                previous = fed_back[device_t]
            group_devices = torch.stack(choices, dim=1)  # (K, G)
            log_p = torch.stack(step_log_probs, dim=1)  # (K, G, D)
        else:  # teacher-forced: every step's input is known, so only the LSTM recurrence runs step by step and
            # the attention and the device head score all G steps at once (in blocks that bound the memory)
            group_devices = forced
            states = []
            for t in range(g):
                h, c = self.decoder(torch.cat([enc[t].expand(k, -1), previous], dim=-1), (h, c))
                states.append(h)
                previous = fed_back[forced[:, t]]
            states = torch.stack(states, dim=1)  # (K, G, H)
            block = max(1, ATTENTION_BLOCK // (k * g * keys.shape[1]))
            log_p = torch.cat([log_probs_at(states[:, i:i + block], i) for i in range(0, g, block)], dim=1)
        taken_log_p = log_p.gather(2, group_devices.unsqueeze(2)).squeeze(2)  # (K, G)
        entropy = -(log_p.exp() * log_p).sum(-1).mean()
        actions = group_devices[:, groups]  # (K, N): every op takes its group's device ...
        log_prob = taken_log_p.sum(1)
        replay = {"group_actions": group_devices, "ops": ops, "devices": op_devices, "edge_index": edge_index}
        if self.refiner is not None and refined:  # ... unless it overrides it
            actions, op_log_prob, replay["refine_path"] = self.refiner(ops, actions, op_devices, deterministic,
                                                                       taken_path, edge_index)
            log_prob = log_prob + op_log_prob
        return PolicySample(actions=actions, log_prob=log_prob, entropy=entropy,
                            info={"n_groups": float(g)}, replay=replay, embedding=embedding, decisions=float(g))
