"""The cost-guided local search of GO's fine-tuning (`agents.search.local_search`), on tiny graphs."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from agents.search.local_search import BlockSearch
from agents.search.attach import check_mode
from agents.search.config import SearchConfig
from agents.go import GOAgent
from agents.post import PostAgent
from placement_gym.backends import make_backend
from placement_gym.backends.profiles import DeviceProfile, LinkProfile, Profile, device_memory_bytes, memory_need
from placement_gym.backends.simulated import SimulatedBackend
from placement_gym.callbacks import Callback
from placement_gym.env import DevicePlacementEnv
from .conftest import small_accelerator_profile
from agents.search.config import hybrid_options


def chain_edges(n: int) -> np.ndarray:
    return np.stack([np.arange(n - 1), np.arange(1, n)]).astype(np.int64)


def test_proposals_move_something_and_respect_the_mask():
    rng = np.random.default_rng(0)
    cost = rng.uniform(1e-6, 1e-4, size=(12, 3))
    mask = np.ones((12, 3), dtype=bool)
    mask[::2, 2] = False  # even ops cannot run on device 2
    search = BlockSearch(cost, mask, seed=0, edge_index=chain_edges(12))
    base = np.zeros(12, dtype=np.int64)
    for placement in search.propose(base, 200):
        assert placement.shape == (12,) and placement.dtype == np.int64
        assert not np.array_equal(placement, base)  # a proposal is a move
        assert mask[np.arange(12), placement].all()


def test_the_coarsest_level_moves_the_whole_graph():
    cost = np.full((8, 2), 1e-5)
    search = BlockSearch(cost, seed=0, fine=0.0, moves=1.0, boundary=0.0)
    proposals = search.propose(np.zeros(8, dtype=np.int64), 100)
    assert any((p == 1).all() for p in proposals)  # another single device
    assert any(0 < (p == 1).sum() < 8 for p in proposals)  # and contiguous cuts


def test_the_device_costs_guide_which_op_moves_where():
    cost = np.full((10, 3), 1e-5)
    cost[3, 1] = 1e-6  # op 3 is ten times faster on device 1; nothing else gains anything
    search = BlockSearch(cost, seed=0, fine=1.0, moves=1.0, boundary=0.0)
    proposals = search.propose(np.zeros(10, dtype=np.int64), 100)
    assert sum(p[3] == 1 for p in proposals) > 80


def test_cheapest_puts_every_op_on_its_cheapest_device_it_can_run_on():
    cost = np.array([[3.0, 1.0, 2.0], [1.0, 2.0, 3.0], [3.0, 2.0, 0.5]]) * 1e-5
    mask = np.array([[True, False, True], [True, True, True], [True, True, True]])
    assert BlockSearch(cost, mask).cheapest().tolist() == [2, 0, 2]


def test_a_boundary_move_joins_an_island_to_its_neighbours():
    cost = np.full((5, 2), 1e-5)
    base = np.array([0, 0, 1, 0, 0])
    search = BlockSearch(cost, seed=0, edge_index=chain_edges(5), boundary=1.0, moves=1.0)
    for placement in search.propose(base, 50):
        changed = np.flatnonzero(placement != base)
        assert len(changed) == 1 and changed[0] in (1, 2, 3)  # an op at the boundary ...
        op = changed[0]
        assert placement[op] == (0 if op == 2 else 1)  # ... to its neighbours' device


def test_proposals_give_back_what_a_full_device_cannot_hold():
    n = 12
    cost = np.column_stack([np.full(n, 2.0), np.full(n, 1.0)])  # device 1 is faster for every op ...
    memory = np.column_stack([np.full(n, 10.0), np.ones(n)])  # ... and holds four ops' weights
    capacity = np.array([1e9, 41.0])
    edges = np.array([np.arange(n - 1), np.arange(1, n)])
    base = np.array([1] * 4 + [0] * (n - 4))  # device 1 full
    search = BlockSearch(cost, seed=0, edge_index=edges, memory=memory, capacity=capacity)
    proposals = search.propose(base, 60)
    assert all(memory_need(memory, p, 2)[1] <= 41.0 for p in proposals)
    # A block moved onto device 1 came with ops given back from its region's edge: a swap.
    assert any(((p == 1) & (base == 0)).any() and ((p == 0) & (base == 1)).any() for p in proposals)
    unlimited = BlockSearch(cost, seed=0, edge_index=edges)
    assert any(memory_need(memory, p, 2)[1] > 41.0 for p in unlimited.propose(base, 60))
    with pytest.raises(ValueError, match="together"):
        BlockSearch(cost, memory=memory)
    with pytest.raises(ValueError, match=r"\(12, 2\)"):
        BlockSearch(cost, memory=memory[:3], capacity=capacity)


class Outcomes(Callback):
    """Records each measured placement and whether it ran."""

    def __init__(self) -> None:
        self.placements: list[np.ndarray] = []
        self.ok: list[bool] = []

    def on_step(self, step, reward, info) -> bool:
        self.placements.append(np.asarray(info["placement"]))
        self.ok.append(bool(info["ok"]))
        return True


def test_post_measures_its_samples_fitted_to_a_small_devices_memory(tiny_branch_graph):
    graph = tiny_branch_graph
    whole = device_memory_bytes(graph, np.zeros(graph.n_ops, dtype=np.int64), 1)[0]
    profile = Profile.preset("paper")
    gpu = replace(profile.devices[1], memory_bytes=0.5 * whole)  # the faster device holds half the model
    outcomes = {}
    for fit in (True, False):
        env = DevicePlacementEnv(graph, backend=SimulatedBackend(replace(profile, devices=[profile.devices[0], gpu])))
        outcomes[fit] = Outcomes()
        PostAgent(seed=0, **hybrid_options(PostAgent, fit_memory=fit)).learn(env, budget=60, callback=outcomes[fit])
    obs = env.reset(seed=0)[0]
    # Unfitted, Post's samples overfill the GPU and fail; fitted, every placement measured holds and runs ...
    assert not all(outcomes[False].ok)
    assert all(outcomes[True].ok)
    assert all(memory_need(obs["node_memory_bytes"], p, 2)[1] <= 0.5 * whole for p in outcomes[True].placements)
    # ... and the GPU is used in them, for what it holds.
    assert any((p == 1).any() for p in outcomes[True].placements)
    with pytest.raises(ValueError, match="fit_memory needs mode='bandit'"):
        check_mode(SearchConfig(fit_memory=True), "episodic")


def test_the_search_of_an_observation_knows_the_devices_memory():
    env = DevicePlacementEnv("tiny_branch", backend="simulated", profile=small_accelerator_profile())
    obs, _ = env.reset(seed=0)
    search = BlockSearch.of_observation(obs, seed=0)
    assert np.array_equal(search.memory, obs["node_memory_bytes"])
    assert search.capacity[2] == pytest.approx(64e6, rel=1e-5)  # the accelerator's 64 MB
    without = {key: value for key, value in obs.items() if key != "node_memory_bytes"}
    assert BlockSearch.of_observation(without, seed=0).memory is None
    # A backend that does not describe its devices gives zero features: no limit, not one byte.
    undescribed = {**obs, "device_features": np.zeros_like(obs["device_features"])}
    assert np.isinf(BlockSearch.of_observation(undescribed, seed=0).capacity).all()


def test_merge_combines_improving_moves_the_fastest_winning():
    base = np.zeros(6, dtype=np.int64)
    merged = BlockSearch.merge(base, [(2.0, np.array([0, 0, 2, 0, 0, 1])), (1.0, np.array([1, 0, 0, 0, 0, 2]))])
    assert merged.tolist() == [1, 0, 2, 0, 0, 2]
    assert BlockSearch.merge(base, [(1.0, np.ones(6, dtype=np.int64))]) is None


@pytest.mark.parametrize("bad", [dict(cost=np.ones((3, 1))), dict(fine=1.5), dict(boundary=-0.1), dict(moves=0.5),
                                 dict(beta=-1.0), dict(mask=np.ones((2, 2), dtype=bool))])
def test_bad_settings_are_refused(bad):
    args = {"cost": np.ones((3, 2))} | bad
    with pytest.raises(ValueError):
        BlockSearch(**args)


#: The op types `free_transfers`'s second device runs fast (and its first slowly).
PLUMBING = ("MaxPool", "Concat", "ReduceMean")


def free_transfers() -> Profile:
    """Two devices with free transfers and submodels, each op cheapest on one of them: "A" runs every op at its peak
    but the three `PLUMBING` types at 2% of it, "B" those at its peak and the others at half of it. No launch
    overhead and memory far faster than the FLOPs need (every op is compute-bound), so a fusion a device boundary
    prevents costs nothing: a placement's latency is the sum of its ops' own prices (``node_device_cost``), and each
    op's cheapest device is the optimum. On tiny_branch that puts its three `PLUMBING` ops on B and the other 21 on
    A, 17% faster than A alone (B alone is 65% slower than A); on tiny_chain, which has none, A alone.

    A version-2 preset with free transfers is not such a case: on ``ai_pc`` (these tests' preset under cost model
    version 1) the NPU, some ops' cheapest device, cannot share a model (not a HETERO device), and between its CPU
    and GPU the cheapest devices split fused kernels, 1.7x slower than the CPU alone."""
    devices = [DeviceProfile(name=name, peak_flops=1e11, memory_bandwidth_Bps=1e13, default_efficiency=default,
                             efficiency={t: plumbing for t in PLUMBING})
               for name, default, plumbing in (("A", 1.0, 0.02), ("B", 0.5, 1.0))]
    return Profile(devices=devices, link=LinkProfile(0.0, None), name="free-transfers")


def proven_optimum(env: DevicePlacementEnv) -> float:
    """The latency of every op on its cheapest device (the simulator's ``node_device_cost``) under `free_transfers`,
    asserted optimal: it equals the sum of the ops' cheapest prices, which no placement beats (an op pays at least
    its own price on its device; transfers and submodel overheads add to it)."""
    env.reset(seed=0)
    cost = env.backend.node_device_cost(env.graph)  # float64 (the observation's is float32)
    optimum = env.step(cost.argmin(1))[4]["latency_corrected_s"]
    assert optimum == pytest.approx(cost.min(1).sum(), rel=1e-9)
    return optimum


def test_go_fine_tuning_searches_its_way_to_a_mixed_optimum(tmp_path):
    backend = make_backend("simulated", profile=free_transfers())
    small = dict(hidden_channels=16, heads=2, segment_length=4, samples_per_update=8)
    # Without the heuristic start (it would measure the cheapest devices, the optimum here, first): the search finds it.
    agent = GOAgent(seed=0, **hybrid_options(GOAgent, heuristic_start="off"), **small)
    agent.learn(DevicePlacementEnv("tiny_chain", backend=backend, features=GOAgent.feature_families), budget=16)
    path = agent.save(tmp_path / "go.pt")

    env = DevicePlacementEnv("tiny_branch", backend=backend, features=GOAgent.feature_families)
    optimum = proven_optimum(env)
    singles = [env.step(np.full(24, d))[4]["latency_corrected_s"] for d in range(2) if env.reset()]
    assert optimum < 0.95 * min(singles)  # the case the search is for

    tuned = GOAgent.load(path)
    assert tuned.finetune_search == 1.0  # the hybrid's setting (GO's own), kept by the checkpoint
    tuned.learn(env, budget=30, seed=0)
    assert tuned.best_latency_s <= optimum * 1.01
    assert tuned.run_summary.predict_latency_s == pytest.approx(tuned.best_latency_s)  # distilled into predict


def test_go_refuses_bad_search_settings():
    with pytest.raises(ValueError, match="finetune_search"):
        GOAgent(finetune_search=1.5)
    with pytest.raises(ValueError, match="unknown finetune_search_options"):
        GOAgent(finetune_search_options={"temperature": 2.0})


@pytest.mark.parametrize("objective", ["latency", "throughput"])
def test_the_transfer_benchmark_reports_gaps_against_the_best_known_placement(tmp_path, monkeypatch, objective):
    import json

    from placement_gym.backends.simulated import COST_MODEL_VERSION

    from .conftest import load_benchmark

    transfer = load_benchmark("learned_placer.transfer")

    # On `free_transfers`, where tiny_branch's best placement mixes devices and every placement runs (on ``ai_pc``
    # the learned agents' placements that mix the NPU with another device fail: no gap to take).
    profile = free_transfers().save(tmp_path / "free-transfers.json")
    out = tmp_path / "transfer.json"
    solved = []  # each test graph's reference (optimum, single devices, replicate) is solved once for all agents
    monkeypatch.setattr(transfer, "graph_reference",
                        lambda env, args, solve=transfer.graph_reference: solved.append(env) or solve(env, args))
    assert transfer.main(["--agents", "go", "go", "--train-models", "tiny_chain", "--test-models", "tiny_branch",
                          "--train-budget", "8",
                          "--finetune", "4", "--scratch-budget", "8", "--optimal-time-limit", "5", "--profile",
                          str(profile), "--untrained-finetune", "--agent-option", "hidden_channels=16",
                          "--agent-option", "heads=2", "--objective", objective, "--json", str(out)]) == 0
    written = json.loads(out.read_text())
    assert (written["objective"], written["cost_model_version"]) == (objective, COST_MODEL_VERSION)
    assert len(solved) == 1 and len(written["results"]) == 2
    assert written["results"][0]["rows"][0]["optimal_s"] == written["results"][1]["rows"][0]["optimal_s"]
    result = written["results"][0]
    row = result["rows"][0]
    measured = [row[k] for k in ("optimal_s", "zero_shot_s", "finetune_4_s", "untrained_finetune_4_s", "scratch_s")]
    assert row["best_known_s"] == min(measured + [row["best_single_s"]])
    assert "untrained_finetune_4_within_2pct" in result["summary"]
    assert result["summary"]["zero_shot_gap_geomean_pct"] >= 0.0
    # Under throughput, `replicate` (a deployment, not a placement) is reported beside the placements; on
    # `free_transfers` tiny_branch's best placement (a pipeline over both devices) beats it.
    if objective == "throughput":
        assert row["best_known_s"] < row["replicate_s"]
        assert result["summary"]["finetune_4_beats_replicate"] == int(row["finetune_4_s"] < row["replicate_s"])
        assert "replicate" in transfer.markdown(result, [4]).splitlines()[0]
    else:
        assert "replicate_s" not in row and "finetune_4_beats_replicate" not in result["summary"]


@pytest.mark.parametrize("agent_cls, options", [("post", dict(n_groups=4)), ("hsdag", dict(hidden_channels=16))])
def test_a_learned_agents_search_proposals_find_a_mixed_optimum_within_its_budget(agent_cls, options):
    """``search_proposals``: each update also measures cost-guided proposals around the run's best (same budget),
    and what they find becomes the policy's own placement (final distillation)."""
    from agents.hsdag import HSDAGAgent
    from agents.post import PostAgent

    cls = {"post": PostAgent, "hsdag": HSDAGAgent}[agent_cls]
    backend = make_backend("simulated", profile=free_transfers())
    features = {} if cls.feature_families is None else {"features": cls.feature_families}
    env = DevicePlacementEnv("tiny_branch", backend=backend, **features)
    optimum = proven_optimum(env)

    # Without the heuristic start (it would measure the cheapest devices, the optimum here, first), the policy's
    # own search stays more than 5% above it for these 60 placements (HSDAG on A alone, 21% above; Post 14% above);
    # the proposals find it.
    alone = cls(seed=0, samples_per_update=4, **hybrid_options(cls, heuristic_start="off", search_proposals=0),
                **options)
    alone.learn(env, budget=60, seed=0)
    assert alone.best_latency_s > optimum * 1.05
    agent = cls(seed=0, samples_per_update=4, **hybrid_options(cls, heuristic_start="off", search_proposals=3),
                **options)
    agent.learn(env, budget=60, seed=0)
    summary = agent.run_summary
    assert summary.steps == 60  # the proposals come out of the budget
    proposals = [update.get("search_proposals") for update in agent.history]
    assert proposals[0] == 3 and all(p in (None, 1.0, 2.0, 3.0) for p in proposals)  # the last update: what is left
    assert agent.best_latency_s <= optimum * 1.01
    assert summary.predict_latency_s == pytest.approx(agent.best_latency_s)


def test_search_proposals_settings_are_checked():
    from agents.search.local_search import AroundBest
    with pytest.raises(ValueError, match="field search_proposals: found -1"):
        SearchConfig(search_proposals=-1)
    with pytest.raises(ValueError, match="needs mode='bandit'"):
        check_mode(SearchConfig(search_proposals=2), "episodic")
    with pytest.raises(ValueError, match="batch must be >= 1"):
        AroundBest(BlockSearch(np.ones((3, 2))), batch=0)
    with pytest.raises(ValueError, match="node_device_cost"):
        BlockSearch.of_observation({"edge_index": chain_edges(3)})


def test_ops_that_cost_nothing_still_get_proposals():
    """A graph whose ops all cost 0 s (a test backend's): no log(0) in the device scores (it raised on NaN)."""
    search = BlockSearch(np.zeros((6, 2)), seed=0, edge_index=chain_edges(6))
    for placement in search.propose(np.zeros(6, dtype=np.int64), 20):
        assert placement.shape == (6,) and set(placement.tolist()) <= {0, 1}
