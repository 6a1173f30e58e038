"""The shape of bench/ (issues 26, 46): no import circles, counting every import in a file (inside
functions and TYPE_CHECKING blocks too), and the layers only point down: cli > replication >
publish > report > tune > harness > ladder > {warmstart, lmeval, preflight, interop} > engine > the
rest (suite, config, tasks, models, results, ...). Modules of one floor may import each other; the
engine imports nothing above it (its caller hands it the initial policy: bench/engine/start.py)."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("bench.cli", "bench.replication", "bench.publish", "bench.report", "bench.tune", "bench.harness", "bench.ladder",
          ("bench.warmstart", "bench.lmeval", "bench.preflight", "bench.interop"), "bench.engine")  # top first; a tuple: one floor


def _modules() -> dict[str, Path]:
    out = {}
    for f in (ROOT / "bench").rglob("*.py"):
        parts = list(f.relative_to(ROOT).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def import_graph() -> dict[str, set[str]]:
    """module -> the bench modules it imports anywhere in its file (a name imported from a package
    counts as its submodule when there is one, else as the package)."""
    mods = _modules()

    def known(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for m, f in mods.items():
        pkg = m if f.name == "__init__.py" else m.rpartition(".")[0]
        deps = set()
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                deps |= {known(a.name) for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                deps |= {known(f"{base}.{a.name}") if f"{base}.{a.name}" in mods else known(base) for a in node.names}
        graph[m] = deps - {None, m}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def layer(module: str) -> int:
    for i, floor in enumerate(LAYERS):
        if any(module == top or module.startswith(top + ".") for top in ((floor,) if isinstance(floor, str) else floor)):
            return i
    return len(LAYERS)


def upward(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a module on a higher floor, as "importer -> imported"."""
    return sorted(f"{m} -> {d}" for m, deps in graph.items() for d in deps if layer(d) < layer(m))


def test_the_checker_finds_a_circle_and_an_upward_import():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert layer("bench.config") > layer("bench.engine.trainer") > layer("bench.warmstart") > layer("bench.harness.runner") \
        > layer("bench.report.tables")
    assert layer("bench.warmstart") == layer("bench.interop.trl")
    # the arrow issue 46 removed: the trainer fetching its own warm start
    old = {"bench.engine.trainer": {"bench.warmstart", "bench.engine.evaluate"}, "bench.warmstart": {"bench.engine.evaluate"},
           "bench.lmeval": {"bench.preflight"}}
    assert upward(old) == ["bench.engine.trainer -> bench.warmstart"]


def test_bench_has_no_import_circles():
    graph = import_graph()
    assert len(graph) > 50 and "bench.engine.callbacks" in graph["bench.engine.trainer"]
    assert circles(graph) == []


def test_lower_layers_never_import_higher_ones():
    assert upward(import_graph()) == []
