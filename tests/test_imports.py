"""The library's layering, read from the source: no import circles in `placement_gym`, `agents` or `benchmarks`,
`placement_gym` never imports `agents`, and in `agents` the search is a layer above the run loop, the networks and
the trainers (nothing in `agents.core`, `agents.nn` or `agents.algos` imports `agents.search`).

Every ``import`` counts, at module level or inside a function: a circle through a function-level import still
ties the two modules together. ``from pkg import name`` counts as importing the submodule ``pkg.name`` where
there is one, else the package's ``__init__``. Python's own implicit import of a parent package before its
submodules is not counted (every submodule has it; it is not a circle anyone wrote).
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _modules(package: str = "placement_gym") -> dict[str, Path]:
    """Dotted module name -> file, for every module of `package` (packages by their __init__)."""
    out = {}
    for path in (ROOT / package).rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules `name` imports (absolute dotted names, any package)."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in modules else target)
    return found


def _graph(package: str = "placement_gym") -> dict[str, set[str]]:
    modules = _modules(package)
    return {name: {m for m in _imports(name, path, modules) if m in modules and m != name}
            for name, path in modules.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as a path ``[a, b, ..., a]``, or None."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_no_import_circle_in_placement_gym():
    graph = _graph()
    assert "placement_gym.backends.calibration" in graph and "placement_gym.env" in graph  # the walk sees them
    cycle = _cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_no_import_circle_in_agents():
    graph = _graph("agents")
    assert "agents.baselines.dp" in graph and "agents.search.hybrid" in graph  # the walk sees them
    cycle = _cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_no_import_circle_in_benchmarks_and_no_script_imported_by_bare_name():
    """The benchmark scripts import each other by module path (``benchmarks.leaderboard.leaderboard_table``), never
    a sibling by its bare name (which worked only from the script's own folder), and in no circle."""
    graph = _graph("benchmarks")
    assert "benchmarks.learned_placer.learned_transfer" in graph and "benchmarks.results_pages" in graph
    cycle = _cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle)
    modules = _modules("benchmarks")
    scripts = {path.stem for path in modules.values()} - {"__init__"}
    bare = sorted(f"{name} imports {module}" for name, path in modules.items()
                  for module in _imports(name, path, {}) if module.partition(".")[0] in scripts)
    assert not bare, "imported by bare name: " + "; ".join(bare)


def test_the_cycle_finder_finds_a_circle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_placement_gym_never_imports_agents():
    modules = _modules()
    offenders = {name: sorted(m for m in _imports(name, path, modules) if m == "agents" or m.startswith("agents."))
                 for name, path in modules.items()}
    assert {k: v for k, v in offenders.items() if v} == {}


#: The roles below the search layer, bottom up: the run bookkeeping, the networks, the update rules.
BELOW_SEARCH = ("agents.core", "agents.nn", "agents.algos")


def _in(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def test_the_search_is_a_layer_above_the_run_loop_the_networks_and_the_trainers():
    graph = _graph("agents")
    assert "agents.core.run" in graph and "agents.algos.reinforce" in graph and "agents.nn.refine" in graph
    offenders = {name: sorted(m for m in imports if _in(m, ("agents.search",)))
                 for name, imports in graph.items() if _in(name, BELOW_SEARCH)}
    assert {k: v for k, v in offenders.items() if v} == {}, "imports the wrong way (into agents.search)"


def test_the_search_layer_reaches_the_roles_below_it():
    """The search layer is built on the run loop and the trainers' hook points (the walk sees the edges), and its
    settings have one owner, `agents.search.config`: no module below it defines or names them."""
    graph = _graph("agents")
    assert "agents.algos.hooks" in graph["agents.search.attach"]
    assert "agents.search.config" in graph["agents.search.attach"]
    assert "agents.core.search_settings" not in graph  # the settings' old home below the layer is gone


#: The search layer's settings (`agents.search.config.SearchConfig`'s fields).
LAYER_FIELDS = ("heuristic_start", "finetune_from_predict", "zero_shot_override", "search_proposals", "fit_memory",
                "split_patience", "split_refit", "local_search")


def _attribute_reads(path: Path, names: tuple[str, ...]) -> list[str]:
    """``X.search.NAME`` and ``X.config.NAME`` reads of the layer's fields in `path` (a setting read off the
    agent's search settings or the layer's config), as ``line: text``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Attribute) and node.attr in names and isinstance(node.value, ast.Attribute) \
                and node.value.attr in ("search", "config"):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: .{node.value.attr}.{node.attr}")
    return found


def test_no_search_layer_setting_is_read_outside_the_search_layer():
    """The layer's fields are read where they run, in `agents.search` (an agent asks the layer object it holds,
    never reads its fields); everything else holds its own settings."""
    reads = [hit for name, path in _modules("agents").items() if not _in(name, ("agents.search",))
             for hit in _attribute_reads(path, LAYER_FIELDS)]
    assert reads == []


def test_the_search_layer_is_an_object_an_agent_holds_not_a_base_class():
    """No class in `agents` derives from the layer (`agents.search.attach.SearchLayer`) or from the old mixin of
    the learned script's search points; a learned agent names the layer (``SEARCH_LAYER``) and holds one."""
    bases = []
    for name, path in _modules("agents").items():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ClassDef):
                bases += [f"{name}.{node.name}" for base in node.bases
                          if isinstance(base, ast.Name) and base.id in ("SearchLayer", "SearchDuringTraining")
                          and node.name != "SearchDuringTraining"]
    assert bases == []


#: The application around the env: the command line and its commands, the benchmark harness (suites, evaluation,
#: the sanity suite, the agent registry), results files and tables, deployment and the Ray farm. Everything else
#: in `placement_gym` is the env library (the env, graphs, features, models, devices, backends, files), which
#: never imports these.
APPLICATION = ("placement_gym.cli", "placement_gym.commands", "placement_gym.benchmark", "placement_gym.evaluation",
               "placement_gym.sanity", "placement_gym.registry", "placement_gym.results", "placement_gym.deploy",
               "placement_gym.distributed", "placement_gym.sim2real")


def test_the_env_library_never_imports_the_application():
    """The arrows run one way: the application imports the library, never the reverse (a function-level import
    counts too)."""
    graph = _graph()
    library = [name for name in graph if not _in(name, APPLICATION)]
    assert "placement_gym.env" in library and "placement_gym.backends.openvino" in library  # the walk sees them
    upward = {name: sorted(m for m in graph[name] if _in(m, APPLICATION)) for name in library}
    assert {k: v for k, v in upward.items() if v} == {}


def test_only_the_command_line_imports_the_commands():
    """Inside the application the commands are the top floor: the harness, results, deployment and the farm never
    import them (a Ray worker runs a command's jobs from the command's own module)."""
    graph = _graph()
    commands = ("placement_gym.cli", "placement_gym.commands")
    upward = {name: sorted(m for m in deps if _in(m, commands)) for name, deps in graph.items()
              if not _in(name, commands)}
    assert {k: v for k, v in upward.items() if v} == {}


#: At most this many classes between a learned agent and `agents.core.run.RunAgent` (the agent's own class
#: included): an agent is a short class over a policy and a trainer, what it shares with another agent composed
#: (issue 81).
MAX_AGENT_DEPTH = 3


def test_every_learned_agent_is_at_most_three_classes_deep_below_run_agent():
    """Each registered learned agent's class is at most `MAX_AGENT_DEPTH` classes deep below `RunAgent`: counted
    along its MRO, the classes that are `RunAgent` subclasses (mixins of other roles are not agents)."""
    from agents.core.run import RunAgent
    from placement_gym import registry

    depths = {}
    for name in registry.AGENTS:
        cls = registry.load_agent_class(name)
        if registry.learns(cls):
            depths[name] = sum(1 for klass in cls.__mro__ if issubclass(klass, RunAgent) and klass is not RunAgent)
    assert {"hsdag", "go", "placeto", "rnn", "post", "ppo", "ppo-node", "imitation", "doppler"} <= set(depths)
    assert {name: depth for name, depth in depths.items() if depth > MAX_AGENT_DEPTH} == {}
