"""`RNNAgent`: the seq2seq placer of Mirhoseini et al. (2017) trained with the shared REINFORCE trainer.

>>> env = gym.make("DevicePlacement-v0", model="bert", backend="simulated")
>>> agent = RNNAgent(seed=0).learn(env, budget=500)

Training follows the paper: the reward is ``-sqrt(latency)`` (here relative to the reference placement,
`placement_gym.wrappers.SqrtLatencyReward`; faster = higher), REINFORCE on the log-probability of the whole
placement (the paper's moving-average baseline is ``leave_one_out=False``; below). K placements are decoded from
one encoding per update (`samples_per_update`), as the shared trainer's bandit mode does.

Where it differs from the paper (the defaults are the paper's method; no search runs unless ``search`` asks):

* the groups the LSTM places are at most ``n_groups=256`` contiguous chunks of the topological order (one op each
  on a graph of up to 256 ops); the paper groups ops by TensorFlow's co-location groups (2017) or a learned
  grouper into at most 256 groups (the hierarchical planner, 2018), neither of which an OpenVINO graph has.
* the paper's moving-average baseline by default; the project's option set (``--agent-option leave_one_out=true``,
  this agent's default until 2026-11-27) compares each of the K placements of an update with the mean reward of
  the other K - 1 instead, where the moving average trails an improving reward (docs/agents/rnn.md gives its
  measured effect on the sanity suite). The entropy bonus weighs every decision (``entropy_coef=0.1``,
  ``entropy_per_decision``) and the policy's argmax is measured once per update (``measure_argmax``): the paper
  does not fix these.
* the reward is relative to the reference placement (``-sqrt(latency / reference)``): the same ordering of
  placements as the paper's ``-sqrt(latency)``, on a scale that does not depend on the model.
* K placements per gradient step from one encoding; the paper ran several workers, each sampling placements.
* the best placement measured is the result, as in the paper; ``predict`` (the policy's deterministic placement)
  is reported beside it.

Its hybrid form (``search="hybrid"``, ``hybrid:rnn``) adds the search layer `RNNAgent.HYBRID` lists (the heuristic
start, coarse to fine over the groups with a refit after each split, the zero-shot override:
`agents.search.config`) and what `RNNAgent.HYBRID_COMPONENTS` turns on in its own code (a per-op refinement stage
with boundary moves, self-imitation, the final distillation).
"""
from __future__ import annotations

from dataclasses import dataclass

from agents.core.base import PolicySpec
from agents.core.bounds import FLAG, GROUPS, WIDTH, check_settings, setting
from agents.algos.learned import LEARNED_RUN
from agents.algos.policy_gradient import DISTILL_SECONDS, PolicyGradientAgent
from agents.algos.reinforce import SWITCHES_OFF, SWITCHES_ON, BanditTrainerSettings
from agents.search.attach import SearchLayer
from agents.search.coarse_to_fine import SPLIT_PATIENCE
from agents.search.config import DURING_TRAINING, OUTSIDE_TRAINING, SearchConfig
from agents.search.heuristic_start import ZERO_SHOT_OVERRIDE
from placement_gym.schema import Text
from placement_gym.wrappers import SqrtLatencyReward

from .policy import RNNPolicy

__all__ = ["RNNAgent", "RNNSettings", "REWARDS"]

#: ``"neg_sqrt_latency"``: the paper's reward; ``"env"``: whatever reward the env gives (default: speedup).
REWARDS = ("neg_sqrt_latency", "env")


@dataclass(frozen=True)
class RNNSettings:
    """The RNN placer's own settings (`RNNAgent`'s keywords besides the trainer's and the run's), with their
    defaults.

    Args:
        n_groups: G, op groups (contiguous chunks of the topological order) that the decoder places. Fewer
            groups = fewer decisions to learn from a small budget: on the simulated paper profile G=8 found
            mixed placements faster than GPU-only on ResNet and Inception more reliably than G=16, and G=32 (the
            hierarchical planner's 20 x devices) hardly left GPU-only. Raise it for larger budgets.
        hidden_channels: LSTM width.
        reward: one of `REWARDS`.
        refine: a per-op override stage after the decoder (a search component beyond the paper,
            `agents.nn.refine`).
        refine_boundary: that stage proposes boundary moves to the neighbours' device (a search component).
    """

    n_groups: int = setting(256, GROUPS)
    hidden_channels: int = setting(64, WIDTH)
    reward: str = setting("neg_sqrt_latency", Text(choices=REWARDS))
    refine: bool = setting(False, FLAG, component=True)
    refine_boundary: bool = setting(False, FLAG, component=True)

    def __post_init__(self) -> None:
        check_settings(self)  # a numpy integer from a config is kept as a plain int


class RNNAgent(PolicyGradientAgent):
    """Mirhoseini et al.'s RNN placer (see the module docstring and `RNNPolicy`).

    Keywords: its own settings (`RNNSettings`); the trainer's, the bandit mode's (``learning_rate``,
    ``samples_per_update``, ``entropy_coef``, ...: `agents.algos.reinforce.BanditTrainerSettings`, defaults in
    `TRAINER`); ``algorithm`` (the paper's: ``"reinforce"``), ``ppo`` and the run's (``seed``,
    ``torch_threads``, ``device``, ``coarsen_above``, ``max_nodes``, ``search``): see
    `agents.algos.policy_gradient.PolicyGradientAgent`.
    """

    name = "rnn"
    #: The search layer it composes (an object it holds when built with search) and the layer's components it runs.
    SEARCH_LAYER = SearchLayer
    SEARCH_OPTIONS = OUTSIDE_TRAINING | DURING_TRAINING
    #: The hybrid form's search layer and the search-like settings of its own code (policy, trainer,
    #: distillation): this agent's defaults before the search became a layer of its own.
    HYBRID = SearchConfig(heuristic_start="measure", split_patience=SPLIT_PATIENCE, split_refit=True,
                          zero_shot_override=ZERO_SHOT_OVERRIDE, finetune_from_predict=True)
    HYBRID_COMPONENTS = {"refine": True, "refine_boundary": True, "imitation_coef": 0.5, "distill_steps": 1000,
                         "distill_seconds": DISTILL_SECONDS}

    #: The agent settings of the hybrid form (`agents.search.hybrid.build_agent`): 8 groups, split coarse to fine,
    #: and the trainer's switches as when the hybrid was tuned.
    HYBRID_SETTINGS = {"n_groups": 8, "entropy_coef": 0.01, **SWITCHES_OFF}

    #: The trainer's settings (`PolicyGradientAgent`): the one place their defaults are written.
    TRAINER = BanditTrainerSettings(entropy_coef=0.1, **{**SWITCHES_ON, "leave_one_out": False})

    #: Its own settings (`RNNSettings`) with their defaults; the run's, with the learned agents' coarsening.
    SETTINGS = RNNSettings()
    RUN = LEARNED_RUN

    def build_policy(self, spec: PolicySpec) -> RNNPolicy:
        return RNNPolicy(spec, self.n_groups, self.hidden_channels, self.refine, self.refine_boundary)

    def _agent_env(self, env):
        """The run's env, with the paper's reward (``-sqrt(latency)``) unless ``reward="env"``."""
        return SqrtLatencyReward(env) if self.reward == "neg_sqrt_latency" else env
