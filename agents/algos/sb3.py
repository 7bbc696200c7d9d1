"""Stable-Baselines3 on the graph observation: a GNN actor-critic policy and a vectorised multi-categorical.

>>> from stable_baselines3 import PPO
>>> from agents.algos.sb3 import GraphPolicy
>>> env = gym.make("DevicePlacement-v0", model="bert")
>>> PPO(GraphPolicy, env, n_steps=32, batch_size=32, learning_rate=1e-3, target_kl=0.05).learn(2_000)

Why not SB3's defaults:

* SB3's ``MultiInputPolicy`` flattens the Dict and ends in ``Linear(hidden, N * D)``: one set of weights per node
  *position*, blind to the graph and unable to carry over to another graph. Here a directed GNN
  (`agents.nn.gnn.DirectedGNN`, the encoder every agent shares) embeds each node, and the shared device head
  (`DeviceActionHead`, `agents.nn.device_head.DeviceScorer`) scores every node's embedding against the
  devices the observation describes (device features, the node's costs, its action mask). No graph size or
  device count is in the weights: the policy runs on any graph and device set (`GraphActorCriticPolicy` builds
  the distribution for the observation's N and D; SB3's own ``predict`` and ``set_env`` still check shapes
  against the spaces it was built with, so `agents.ppo.SB3Agent` calls the policy directly and rebuilds the
  algorithm around the same weights for another env).
* SB3's ``MultiCategoricalDistribution`` builds one torch ``Categorical`` per node and loops over them in
  Python: at 1,000 nodes that dominates the update (see ``benchmarks/performance/sb3_distribution.py``).
  `VectorizedMultiCategoricalDistribution` is one ``Categorical`` over a (B, N, D) logits tensor, with the same
  log-probabilities.

The policy also accepts the node-by-node variant (``DevicePlacementNode-v0``: ``Discrete(D)`` action and a
``current_node`` mask): the actor then reads the current node's embedding (plus the graph's) and SB3's own
``CategoricalDistribution`` picks its device.

PPO on whole placements: the log-probability of an action is the SUM over N nodes, so the importance ratio moves
a lot for a small change per node: keep ``target_kl`` on (without it PPO ended worse than the all-CPU placement
on a 1,000-op graph; with ``target_kl=0.05`` it reached the best single device). The entropy of
`VectorizedMultiCategoricalDistribution` is the MEAN over nodes (``entropy_per_node=True``, as the shared
REINFORCE trainer reports it), so the logged entropy and ``ent_coef`` have the same scale on a 24-node and a
1,000-node graph. Its gradient per node is then 1/N of a summed entropy's, while the policy gradient per node
does not shrink with N: for a bonus of the same strength per node at any N, pass ``entropy_per_node=False``.
"""
from __future__ import annotations

import sys
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.distributions import MultiCategoricalDistribution
from stable_baselines3.common.logger import HumanOutputFormat, Logger
from stable_baselines3.common.policies import ActorCriticPolicy, BasePolicy
from stable_baselines3.common.preprocessing import preprocess_obs
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import Tensor, nn
from torch.distributions import Categorical

from placement_gym.wrappers import contiguous_groups

from agents.nn.groups import split_groups

from agents.nn.device_head import DeviceScorer, device_input_width, placed_device_inputs
from agents.nn.gnn import MLP, DirectedGNN
from agents.nn.graph_batch import obs_to_batch

__all__ = [
    "GraphFeaturesExtractor", "GraphLatentHeads", "DeviceActionHead", "VectorizedMultiCategoricalDistribution",
    "GroupedMultiCategoricalDistribution",
    "StockMultiCategoricalDistribution", "GraphActorCriticPolicy", "GraphPolicy", "placement_input_features",
    "placement_input_width", "policy_action", "log_without_folder",
]

#: Logit given to the devices a padded node cannot take (it always takes device 0, with log-prob 0).
_MASKED_LOGIT = -1e9


def log_without_folder(model: BaseAlgorithm) -> None:
    """Give `model` a logger that keeps its statistics in memory and creates no folder, unless the model logs
    somewhere on purpose (a ``tensorboard_log``, or a logger set with ``set_logger``), which it keeps.

    Without a logger of its own, every ``learn`` call configures SB3's default one, and that creates an
    ``SB3-<date>`` folder in the system temp folder even when nothing is written there
    (``stable_baselines3.common.logger.configure`` with no folder). A model set up this way is not reconfigured
    by later ``learn`` calls (``set_logger`` marks the logger as the caller's). With ``verbose >= 1`` SB3's
    table of statistics still goes to stdout.
    """
    # `_custom_logger` is SB3's own mark of a logger given with `set_logger` (`BaseAlgorithm._setup_learn`).
    if getattr(model, "_custom_logger", False) or model.tensorboard_log is not None:
        return
    formats = [HumanOutputFormat(sys.stdout)] if model.verbose >= 1 else []
    model.set_logger(Logger(folder=None, output_formats=formats))


def n_devices_of(observation_space: spaces.Dict) -> int:
    """Number of devices D, read from the ``placement`` Box (values 0..D-1)."""
    return int(observation_space["placement"].high.max()) + 1


def placement_input_features(batch, obs: dict, device_features: int) -> Tensor:
    """(sumN, F + `device_input_width`(K) + 1 [+ 2]) the node features a placement policy reads: the env's features, what
    the device each op sits on is (`agents.nn.device_head.placed_device_inputs`: its device features and a
    "placed" flag, no device index, so no device count in the reader's weights; node by node, of the visited
    ops only), and for the node-by-node variant the ``current_node`` and ``visited`` marks.

    `batch` is the `GraphBatch` of `obs` (`agents.nn.graph_batch.obs_to_batch`); `device_features` is the
    width K the reader was built for (`placement_input_width`); extra per-node keys are flattened the same way
    (padded nodes dropped with ``node_mask``).
    """
    parts = [batch.x]
    if batch.placement is not None:
        # Node by node, only the devices this episode chose are shown; the ops not visited yet read "no
        # device", whatever the episode's start placement put there. So the decisions cannot depend on the
        # start (which would favour whichever device it uses), and ``predict`` is the same from any start.
        known = _per_node(obs, "visited", batch.x.device) if "visited" in obs else None
        parts.append(placed_device_inputs(batch.device_features, batch.placement, batch.batch, known, device_features))
    for key in ("current_node", "visited"):
        if key in obs:
            parts.append(_per_node(obs, key, batch.x.device).unsqueeze(-1))
    return torch.cat(parts, dim=-1)


def placement_input_width(node_features: int, device_features: int, node_level: bool) -> int:
    """Width of `placement_input_features` for F node features, K device features, node by node or not."""
    return node_features + device_input_width(device_features) + 1 + (2 if node_level else 0)


def _per_node(obs: dict, key: str, device) -> Tensor:
    """(sumN,) float values of a per-node key ((N,) or (B, N)), padded nodes dropped."""
    value = torch.as_tensor(obs[key], device=device).float().reshape(-1)
    if obs.get("node_mask") is not None:
        value = value[torch.as_tensor(obs["node_mask"], device=device).reshape(-1).bool()]
    return value


class GraphFeaturesExtractor(BaseFeaturesExtractor):
    """Dict graph observation -> per-node embeddings, in SB3's dense layout.

    Output (B, N, H + 2): columns ``[:H]`` the node embeddings of `DirectedGNN`, column ``H`` 1 for real nodes
    (0 for padding, when the observation has a ``node_mask``), column ``H + 1`` the ``current_node`` mark of the
    node-by-node variant (0 when absent). ``features_dim`` is H (the per-node width).

    Args:
        observation_space: the env's Dict space (``node_features``, ``edge_index``, ``placement``,
            optionally ``edge_features``, ``current_node``, ``visited``, ``node_mask``, ``edge_mask``).
        hidden_channels: embedding width H.
        num_layers: message-passing layers.
        use_edge_features: feed ``edge_features`` (log tensor bytes) to the messages.
        directed: separate producer/consumer weights (see `agents.nn.gnn.DirectedConv`).
    """

    def __init__(self, observation_space: spaces.Dict, hidden_channels: int = 64, num_layers: int = 3,
                 use_edge_features: bool = True, directed: bool = True) -> None:
        _check_observation_space(observation_space)
        super().__init__(observation_space, features_dim=hidden_channels)
        n_features = observation_space["node_features"].shape[-1]
        self.device_features = device_feature_width(observation_space)
        self.node_level = "current_node" in observation_space.spaces
        in_channels = placement_input_width(n_features, self.device_features, self.node_level)
        edge_dim = observation_space["edge_features"].shape[-1] if use_edge_features and "edge_features" in observation_space.spaces else 0
        self.use_edge_features = edge_dim > 0
        self.encoder = DirectedGNN(in_channels, hidden_channels, num_layers, edge_dim=edge_dim, directed=directed)

    def forward(self, observations: dict[str, Tensor]) -> Tensor:
        obs = dict(observations)
        if not self.use_edge_features:
            obs.pop("edge_features", None)
        batch = obs_to_batch(obs)
        h = self.encoder(placement_input_features(batch, obs, self.device_features), batch.edge_index, batch.edge_attr)
        b, n = batch.num_graphs, obs["node_features"].shape[-2]  # N of this observation, not of the space
        if obs.get("node_mask") is None:  # fixed-size graphs: a reshape, no scatter
            real = torch.ones(b, n, 1, device=h.device)
            dense = h.view(b, n, -1)
        else:
            dense, mask = batch.to_dense(h)
            pad = n - dense.shape[1]  # graphs in this batch may all be shorter than N
            dense = nn.functional.pad(dense, (0, 0, 0, pad))
            real = nn.functional.pad(mask, (0, pad)).unsqueeze(-1).float()
        current = obs["current_node"].float().view(b, n, 1) if self.node_level else torch.zeros_like(real)
        return torch.cat([dense, real, current], dim=-1)


class GraphLatentHeads(nn.Module):
    """SB3's ``mlp_extractor`` for graphs: node embeddings -> (actor latent, critic latent).

    Input: `GraphFeaturesExtractor`'s (B, N, H + 2). The graph summary g is the masked mean and max of the
    node embeddings (B, 2H).

    * per-node actor (MultiDiscrete action): ``latent_pi`` (B, N, L + 1) = MLP([h_i, g]) for every node, plus
      the real-node mask as last column (`PerNodeActionHead` uses it);
    * current-node actor (Discrete action): ``latent_pi`` (B, L) = MLP([mean of h over current_node, g]);
    * critic: ``latent_vf`` (B, L) = MLP(g).
    """

    def __init__(self, node_dim: int, latent_dim: int = 64, per_node: bool = True) -> None:
        super().__init__()
        self.node_dim, self.per_node = node_dim, per_node
        self.latent_dim_pi = self.latent_dim_vf = latent_dim
        self.policy_net = nn.Sequential(MLP(3 * node_dim, latent_dim, latent_dim, num_layers=2), nn.ReLU())
        self.value_net = nn.Sequential(MLP(2 * node_dim, latent_dim, latent_dim, num_layers=2), nn.ReLU())

    def _split(self, features: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        h, real, current = features[..., : self.node_dim], features[..., self.node_dim:self.node_dim + 1], features[..., -1:]
        count = real.sum(1).clamp_min(1.0)
        mean = (h * real).sum(1) / count
        maximum = h.masked_fill(real == 0, float("-inf")).amax(1)
        maximum = torch.where(torch.isfinite(maximum), maximum, torch.zeros_like(maximum))
        return h, real, current, torch.cat([mean, maximum], dim=-1)

    def forward(self, features: Tensor) -> tuple[Tensor, Tensor]:
        return self.forward_actor(features), self.forward_critic(features)

    def forward_actor(self, features: Tensor) -> Tensor:
        h, real, current, graph = self._split(features)
        if self.per_node:
            context = graph.unsqueeze(1).expand(-1, h.shape[1], -1)
            return torch.cat([self.policy_net(torch.cat([h, context], dim=-1)), real], dim=-1)
        node = (h * current).sum(1) / current.sum(1).clamp_min(1.0)
        return self.policy_net(torch.cat([node, graph], dim=-1))

    def forward_critic(self, features: Tensor) -> Tensor:
        return self.value_net(self._split(features)[3])


class DeviceActionHead(nn.Module):
    """SB3's ``action_net`` for graphs: actor latents and the observation -> device logits, through the shared
    device head (`agents.nn.device_head.DeviceScorer`), so no N or D is in its weights.

    * per node (MultiDiscrete action): latents (B, N, L + 1) (last column: real-node mask) -> logits (B, N, D),
      every node scored with its own costs and action mask, cost shares within its own graph; a padded node
      gets logits that force device 0 (log-probability 0, entropy 0), so padding never adds noise to the
      gradient;
    * current node (Discrete action): latents (B, L) -> logits (B, D), the current node (a group of ops) scored
      with its ops' summed costs and the AND of their masks.

    Args:
        latent_dim: L.
        device_features: K, width of ``obs["device_features"]`` (0: none).
        per_node: which of the two.
    """

    def __init__(self, latent_dim: int, device_features: int, per_node: bool = True) -> None:
        super().__init__()
        self.per_node = per_node
        self.scorer = DeviceScorer(latent_dim, device_features, latent_dim)

    def forward(self, latent: Tensor, obs: dict[str, Tensor], n_devices: int) -> Tensor:
        """Logits (B, N, D) or (B, D); `n_devices` is D where the observation describes no devices."""
        features = obs.get("device_features")
        cost, mask = obs.get("node_device_cost"), obs.get("action_mask")
        mask = None if mask is None else mask > 0.5
        if self.per_node:
            latent, real = latent[..., :-1], latent[..., -1] > 0.5  # (B, N, L), (B, N)
            b, n = real.shape
            graph = torch.arange(b, device=latent.device).view(b, 1).expand(b, n)[real]
            scored = self.scorer(latent[real], features, None if cost is None else cost[real],
                                 None if mask is None else mask[real], n_devices, graph=graph)  # (M, D)
            logits = torch.full((b, n, scored.shape[-1]), _MASKED_LOGIT, device=latent.device, dtype=scored.dtype)
            logits[..., 0] = 0.0
            logits[real] = scored
            return logits
        current = obs["current_node"].float()  # (B, N): the ops of the node placed this step
        if obs.get("node_mask") is not None:
            current = current * obs["node_mask"].float()
        b = current.shape[0]
        graph = torch.arange(b, device=latent.device)
        # The whole graph's cost per device (B, D) for the whole-graph term, padding left out
        total = None
        if cost is not None:
            real = obs["node_mask"].float() if obs.get("node_mask") is not None else torch.ones_like(current)
            total = (cost * real.unsqueeze(-1)).sum(1)
        cost = None if cost is None else (cost * current.unsqueeze(-1)).sum(1)  # (B, D)
        mask = None if mask is None else (mask | (current.unsqueeze(-1) < 0.5)).all(1)  # (B, D)
        return self.scorer(latent, features, cost, mask, n_devices, graph=graph, graph_total=total)


def _equal_dims(action_dims) -> int:
    dims = {int(d) for d in action_dims}
    if len(dims) != 1:
        raise ValueError(f"the per-node distribution needs the same number of devices for every node, got {sorted(dims)}")
    return dims.pop()


class VectorizedMultiCategoricalDistribution(MultiCategoricalDistribution):
    """N independent categoricals over D devices as ONE ``Categorical(logits=(B, N, D))``.

    Same log-probabilities as SB3's `MultiCategoricalDistribution` (summed over nodes); ``entropy()`` is the
    mean over nodes when `entropy_per_node` (default), the sum otherwise (SB3's convention).
    """

    distribution: Categorical  # type: ignore[assignment]

    def __init__(self, action_dims: list[int], entropy_per_node: bool = True) -> None:
        super().__init__(list(action_dims))
        self.n_nodes, self.n_choices = len(action_dims), _equal_dims(action_dims)
        self.entropy_per_node = entropy_per_node

    def proba_distribution(self, action_logits: Tensor) -> "VectorizedMultiCategoricalDistribution":
        self.distribution = Categorical(logits=action_logits.view(-1, self.n_nodes, self.n_choices))
        return self

    def log_prob(self, actions: Tensor) -> Tensor:
        return self.distribution.log_prob(actions.view(-1, self.n_nodes).long()).sum(-1)

    def entropy(self) -> Tensor:
        per_node = self.distribution.entropy()
        return per_node.mean(-1) if self.entropy_per_node else per_node.sum(-1)

    def sample(self) -> Tensor:
        return self.distribution.sample()

    def mode(self) -> Tensor:
        return self.distribution.logits.argmax(-1)


class GroupedMultiCategoricalDistribution(VectorizedMultiCategoricalDistribution):
    """One device per GROUP of nodes: G independent categoricals, each group's device copied to its nodes.

    A group's logits are the mean of its nodes' per-node logits (`DeviceActionHead`), so the head and its
    weights are the same as per-node placement; only what is sampled changes. The action stays the env's
    (B, N) per-node placement; its log-probability is read at one node per group (all nodes of a group carry
    the same device in every action this distribution samples). Entropy is per group (mean over groups when
    `entropy_per_node`, the sum otherwise).

    Why: sampling every node independently moves scattered single ops, and on the zoo models any op moved
    alone adds cuts and loses (PPO then ends exactly at the best single device); the better placements move a
    run of consecutive ops at once (e.g. ResNet-50's last stages on the other device), which one group decision
    does.

    Args:
        action_dims: the MultiDiscrete ``nvec`` (N entries, all equal to D).
        groups: (N,) int64 group label 0..G-1 of every node.
        entropy_per_node: see `VectorizedMultiCategoricalDistribution`.
    """

    def __init__(self, action_dims: list[int], groups: Tensor, entropy_per_node: bool = True) -> None:
        super().__init__(action_dims, entropy_per_node)
        groups = torch.as_tensor(groups, dtype=torch.long)
        if groups.shape != (self.n_nodes,):
            raise ValueError(f"groups must give one label per node ({self.n_nodes}), got shape {tuple(groups.shape)}")
        self.groups = groups
        self.n_groups = int(groups.max()) + 1
        sizes = torch.bincount(groups, minlength=self.n_groups)
        if (sizes == 0).any():
            raise ValueError(f"group labels must be 0..G-1 with no gaps, got {sorted(set(groups.tolist()))}")
        self.group_size = sizes.float()
        first = torch.full((self.n_groups,), self.n_nodes, dtype=torch.long)
        self.representative = first.scatter_reduce(0, groups, torch.arange(self.n_nodes), reduce="amin")

    def proba_distribution(self, action_logits: Tensor) -> "GroupedMultiCategoricalDistribution":
        node_logits = action_logits.view(-1, self.n_nodes, self.n_choices)
        groups = self.groups.to(node_logits.device)
        summed = node_logits.new_zeros(node_logits.shape[0], self.n_groups, self.n_choices)
        summed.index_add_(1, groups, node_logits)
        self.distribution = Categorical(logits=summed / self.group_size.to(node_logits.device).view(1, -1, 1))
        return self

    def _to_nodes(self, group_actions: Tensor) -> Tensor:
        return group_actions[:, self.groups.to(group_actions.device)]

    def log_prob(self, actions: Tensor) -> Tensor:
        per_group = actions.view(-1, self.n_nodes)[:, self.representative.to(actions.device)].long()
        return self.distribution.log_prob(per_group).sum(-1)

    def sample(self) -> Tensor:
        return self._to_nodes(self.distribution.sample())

    def mode(self) -> Tensor:
        return self._to_nodes(self.distribution.logits.argmax(-1))


class StockMultiCategoricalDistribution(MultiCategoricalDistribution):
    """SB3's own `MultiCategoricalDistribution` (one ``Categorical`` per node) behind the same per-node head:
    kept to measure what the vectorised one saves (``GraphPolicy(..., distribution="stock")``)."""

    def __init__(self, action_dims: list[int]) -> None:
        super().__init__(list(action_dims))
        self.n_choices = _equal_dims(action_dims)


DISTRIBUTIONS = ("vectorized", "stock")


def device_feature_width(space: spaces.Dict) -> int:
    """K, the width of ``device_features`` in an observation space (0 when it has none)."""
    return int(space["device_features"].shape[-1]) if "device_features" in space.spaces else 0


def policy_action(policy: "GraphActorCriticPolicy", obs: dict, deterministic: bool = True) -> "np.ndarray":
    """The action of a `GraphActorCriticPolicy` for ONE observation of any graph size and device count ((N,)
    devices, or the current node's device as a 0-d array), without SB3's ``predict``, which checks the
    observation's shapes against the space the policy was built with."""
    import numpy as np

    policy.set_training_mode(False)
    batch = {k: torch.as_tensor(np.asarray(v), device=policy.device).unsqueeze(0) for k, v in obs.items()}
    with torch.no_grad():
        actions = policy.get_distribution(batch).get_actions(deterministic=deterministic)
    return actions[0].cpu().numpy().astype(np.int64)


def _check_observation_space(space: spaces.Space) -> None:
    needed = ("node_features", "edge_index", "placement")
    if not isinstance(space, spaces.Dict) or any(k not in space.spaces for k in needed):
        raise ValueError(
            f"GraphPolicy needs the DevicePlacement-v0 Dict observation (keys {', '.join(needed)}[, edge_features, "
            f"current_node, visited, node_mask]); got {space}"
        )


class GraphActorCriticPolicy(ActorCriticPolicy):
    """SB3 actor-critic for placement envs: `GraphFeaturesExtractor` (directed GNN) + `GraphLatentHeads` +
    a per-node action head.

    Works with ``DevicePlacement-v0`` (``MultiDiscrete([D] * N)``: one device per node, from
    `VectorizedMultiCategoricalDistribution`) and ``DevicePlacementNode-v0`` (``Discrete(D)``: the current
    node's device). Use it as ``PPO(GraphPolicy, env, policy_kwargs=dict(hidden_channels=64, ...))``.

    Args (besides SB3's ``ActorCriticPolicy`` ones):
        hidden_channels: GNN embedding width H and latent width.
        num_layers: message-passing layers.
        use_edge_features: feed tensor sizes to the messages.
        directed: separate producer/consumer weights.
        distribution: ``"vectorized"`` (default) or ``"stock"`` (SB3's per-node loop; for comparison only).
        entropy_per_node: report the entropy as a mean over nodes (``"vectorized"`` only).
        n_groups: None (default): every node's device is drawn on its own. An int G: split the topological
            order into G contiguous groups and draw one device per group (`GroupedMultiCategoricalDistribution`;
            whole-placement env with unpadded graphs only).

    ``ortho_init`` defaults to False here: the GNN's LayerNorm-ed layers train better from PyTorch's init.
    """

    def __init__(self, observation_space: spaces.Space, action_space: spaces.Space, lr_schedule,
                 hidden_channels: int = 64,
                 num_layers: int = 3, use_edge_features: bool = True, directed: bool = True,
                 distribution: str = "vectorized", entropy_per_node: bool = True, n_groups: int | None = None,
                 **kwargs: Any) -> None:
        _check_observation_space(observation_space)
        if distribution not in DISTRIBUTIONS:
            raise ValueError(f"distribution must be one of {DISTRIBUTIONS}, got {distribution!r}")
        if n_groups is not None:
            if not isinstance(n_groups, int) or isinstance(n_groups, bool) or n_groups < 1:
                raise ValueError(f"n_groups must be None or a positive number of groups, got {n_groups!r}")
            if not isinstance(action_space, spaces.MultiDiscrete) or "node_mask" in observation_space.spaces \
                    or distribution != "vectorized":
                raise ValueError("n_groups needs the whole-placement env (MultiDiscrete action) on one unpadded "
                                 "graph (no 'node_mask') and the 'vectorized' distribution")
        n_nodes = observation_space["node_features"].shape[0]
        if isinstance(action_space, spaces.MultiDiscrete):
            if action_space.nvec.shape != (n_nodes,):
                raise ValueError(f"MultiDiscrete action must have one entry per node ({n_nodes}), got {action_space.nvec.shape}")
            self.per_node = True
        elif isinstance(action_space, spaces.Discrete):
            if "current_node" not in observation_space.spaces:
                raise ValueError("a Discrete action places one node: the observation needs a 'current_node' mask "
                                 "(DevicePlacementNode-v0)")
            self.per_node = False
        else:
            raise ValueError(f"GraphPolicy supports MultiDiscrete([D] * N) or Discrete(D) actions, got {action_space}")
        self.hidden_channels, self.num_layers = hidden_channels, num_layers
        self.use_edge_features, self.directed = use_edge_features, directed
        self.distribution_name, self.entropy_per_node = distribution, entropy_per_node
        self.n_groups = n_groups  # at most N groups on each graph (`_distribution_for`)
        self._distributions: dict[tuple[int, int], Any] = {}
        kwargs.setdefault("ortho_init", False)
        kwargs["features_extractor_class"] = GraphFeaturesExtractor
        kwargs["features_extractor_kwargs"] = dict(hidden_channels=hidden_channels, num_layers=num_layers,
                                                   use_edge_features=use_edge_features, directed=directed)
        super().__init__(observation_space, action_space, lr_schedule, **kwargs)
        # The groups now (0: per node), saved with the weights: a policy split coarse to fine reloads with its groups.
        self.register_buffer("action_groups_now", torch.tensor(n_groups or 0), persistent=True)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # Checkpoints from before coarse to fine have no action_groups_now: their groups are the constructor's.
        state_dict.setdefault(prefix + "action_groups_now", torch.tensor(self.n_groups or 0))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        groups = int(self.action_groups_now) or None
        if groups != self.n_groups and self.per_node:
            self.n_groups = groups
            self._distributions.clear()
            nvec = [int(d) for d in self.action_space.nvec]
            self.action_dist = self._per_node_distribution(len(nvec), _equal_dims(nvec))

    def _build_mlp_extractor(self) -> None:
        self.mlp_extractor = GraphLatentHeads(self.features_dim, self.hidden_channels, per_node=self.per_node)

    def _per_node_distribution(self, n: int, d: int):
        """The multi-categorical for N nodes over D devices (the `distribution` and `n_groups` chosen)."""
        nvec = [d] * n
        if self.n_groups is not None:
            groups = torch.as_tensor(contiguous_groups(n, min(self.n_groups, n)))
            return GroupedMultiCategoricalDistribution(nvec, groups, self.entropy_per_node)
        if self.distribution_name == "vectorized":
            return VectorizedMultiCategoricalDistribution(nvec, self.entropy_per_node)
        return StockMultiCategoricalDistribution(nvec)

    def split_action_groups(self) -> bool:
        """Halve the contiguous action groups (coarse to fine, `agents.search.coarse_to_fine`; at the graph's size
        every node is drawn on its own again); False when there are no groups (already per node). A group's
        logits are the mean of its nodes', so the halves do not keep their parent's distribution exactly: the
        caller refits what it wants kept (`agents.ppo.PPOAgent`'s ``split_patience``)."""
        if self.n_groups is None or not self.per_node:
            return False
        nvec = [int(d) for d in self.action_space.nvec]
        groups = split_groups(len(nvec), self.n_groups)[1]
        self.n_groups = None if groups >= len(nvec) else groups
        self.action_groups_now.fill_(self.n_groups or 0)
        self._distributions.clear()
        self.action_dist = self._per_node_distribution(len(nvec), _equal_dims(nvec))
        return True

    def _build(self, lr_schedule) -> None:
        if self.per_node:  # replace SB3's positional multi-categorical before the heads are built
            nvec = [int(d) for d in self.action_space.nvec]
            self.action_dist = self._per_node_distribution(len(nvec), _equal_dims(nvec))
        super()._build(lr_schedule)
        # SB3 built a Linear(L, N * D) (or (L, D)) action head; the device head replaces it (no N or D in its
        # weights), and the optimizer is made again over the parameters that are really used.
        self.action_net = DeviceActionHead(self.mlp_extractor.latent_dim_pi,
                                           device_feature_width(self.observation_space), self.per_node)
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)

    # ------------------------------------------------------------------ any N and D
    def _distribution_for(self, n: int, d: int):
        """The action distribution for an observation of N nodes and D devices (SB3's ``action_dist`` for the
        spaces the policy was built with)."""
        if not self.per_node:
            return self.action_dist  # a Categorical over whatever D the logits have
        nvec = self.action_space.nvec
        if (n, d) == (len(nvec), int(nvec[0])):
            return self.action_dist
        if (n, d) not in self._distributions:
            self._distributions[(n, d)] = self._per_node_distribution(n, d)
        return self._distributions[(n, d)]

    def _latents(self, obs: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        features = self.extract_features(obs)
        if self.share_features_extractor:
            return self.mlp_extractor(features)
        pi_features, vf_features = features
        return self.mlp_extractor.forward_actor(pi_features), self.mlp_extractor.forward_critic(vf_features)

    def _distribution(self, obs: dict[str, Tensor], latent_pi: Tensor):
        obs = preprocess_obs(obs, self.observation_space, normalize_images=self.normalize_images)
        logits = self.action_net(latent_pi, obs, n_devices_of(self.observation_space))
        if not self.per_node:
            return self.action_dist.proba_distribution(logits)
        b, n, d = logits.shape
        return self._distribution_for(n, d).proba_distribution(logits.reshape(b, n * d))

    def forward(self, obs: dict[str, Tensor], deterministic: bool = False) -> tuple[Tensor, Tensor, Tensor]:
        """SB3's ``forward`` (actions, values, log-probabilities) for observations of any N and D."""
        latent_pi, latent_vf = self._latents(obs)
        distribution = self._distribution(obs, latent_pi)
        actions = distribution.get_actions(deterministic=deterministic)
        log_prob = distribution.log_prob(actions)
        actions = actions.reshape(actions.shape[0], -1) if self.per_node else actions.reshape(-1)
        return actions, self.value_net(latent_vf), log_prob

    def evaluate_actions(self, obs: dict[str, Tensor], actions: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
        """SB3's ``evaluate_actions`` (values, log-probabilities, entropy) for observations of any N and D."""
        latent_pi, latent_vf = self._latents(obs)
        distribution = self._distribution(obs, latent_pi)
        return self.value_net(latent_vf), distribution.log_prob(actions), distribution.entropy()

    def get_distribution(self, obs: dict[str, Tensor]):
        """SB3's ``get_distribution`` for observations of any N and D."""
        features = BasePolicy.extract_features(self, obs, self.pi_features_extractor)  # the actor's only
        return self._distribution(obs, self.mlp_extractor.forward_actor(features))

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data.update(hidden_channels=self.hidden_channels, num_layers=self.num_layers,
                    use_edge_features=self.use_edge_features,
                    directed=self.directed, distribution=self.distribution_name, entropy_per_node=self.entropy_per_node,
                    n_groups=self.n_groups)
        data.pop("features_extractor_class", None)  # set by this class itself
        data.pop("features_extractor_kwargs", None)
        return data


#: The name users write: ``PPO(GraphPolicy, env)``.
GraphPolicy = GraphActorCriticPolicy
