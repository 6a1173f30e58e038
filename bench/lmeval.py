"""lm-eval: bench tasks as lm-eval tasks, and `bench eval` of a checkpoint through `simple_evaluate`.

Every bench task exports its held-out split as an lm-eval task: `results/lmeval_tasks/NAME.jsonl`
(one held-out example per line) beside `NAME.yaml`. NAME is `bench_<task>` for the task's default
config, `bench_<task>_<hash>` for other parameters. The export reproduces bench's own greedy
evaluation (engine/evaluate.py) exactly, so lm-eval's exact_match equals `eval/acc_greedy`:

- prompt: the raw prompt, rendered by the model's chat template (`apply_chat_template=True`;
  `bench eval` always sets it; with the lm-eval CLI pass `--apply_chat_template`), tokenized
  without added special tokens (HFLM `add_bos_token=False`), as `Policy.encode_prompts` does;
- generation: greedy, `max_gen_toks` = the task's generation cap, stopping at EOS only (lm-eval
  adds the EOS text to `until`; the YAML adds no other stop string);
- scoring: `process_results` calls the bench task's own verifier on the completion text
  (exact_match = 1 when `task.score(...) >= 1`), so a differently formatted right answer (`+42`,
  `1,234`, another valid countdown expression) scores as bench scores it. Same tokens in, same
  text out, same function: equal.

Results are data, never code: `bench eval` writes the task files it needs into a fresh private
directory (mode 0700, removed afterwards) and points lm-eval at that directory only. It never
loads a YAML from results/lmeval_tasks/ (a results directory may be shared or committed, and
lm-eval's `!function` tag imports and runs Python named there). A task exported earlier with
non-default parameters (`bench_<task>_<hash>`) is looked up there for its parameters alone (a
JSON line, read as data), regenerated, and checked against its name's hash.
"""
from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

from algorithms.errors import InputError, MissingInput
from bench import results, tasks
from bench.tasks import Example

PREFIX = "bench_"
SCORER = "bench_score.py"  # beside the YAMLs: `!function bench_score.process_results` resolves to it


def tasks_dir(root: Path | None = None) -> Path:
    return Path(root or results.default_root()) / "lmeval_tasks"


def _params(task) -> dict:
    """The task's full config as tasks.get parameters (rebuilds the identical config)."""
    return {f.name: getattr(task.config, f.name) for f in dataclasses.fields(task.config) if f.init}


def task_name(task) -> str:
    try:
        default = tasks.get(task.name).config
    except InputError:  # a task with required parameters (gsm8k's path) has no default config
        default = None
    if task.config == default:
        return PREFIX + task.name
    blob = json.dumps(_params(task), sort_keys=True, default=str).encode()
    return f"{PREFIX}{task.name}_{hashlib.sha256(blob).hexdigest()[:8]}"


def _yaml(name: str, data: Path, max_gen_toks: int, task) -> str:
    meta = json.dumps({"version": 1.0, "bench_task": task.name, "bench_params": _params(task)}, default=str)
    return f"""# Exported by grpo-bench (bench/lmeval.py): the held-out split of bench task {task.name!r}.
# Matches bench's greedy evaluation only with the chat template applied
# (lm-eval --apply_chat_template; `bench eval` does it) and no BOS added (add_bos_token=False).
task: {name}
tag: [grpo_bench]
dataset_path: json
dataset_kwargs: {{data_files: {{test: {json.dumps(str(data.resolve()))}}}}}
test_split: test
output_type: generate_until
doc_to_text: "{{{{question}}}}"
doc_to_target: "{{{{answer}}}}"
generation_kwargs: {{until: [], max_gen_toks: {max_gen_toks}, do_sample: false}}
process_results: !function bench_score.process_results
metric_list:
  - {{metric: exact_match, aggregation: mean, higher_is_better: true}}
metadata: {meta}
"""


def export_task(task, root: Path | None = None, out: Path | None = None) -> str:
    """Write NAME.jsonl and NAME.yaml (and the shared scorer) for `task`'s held-out split into
    out (default: RESULTS/lmeval_tasks, for the lm-eval CLI); return NAME."""
    out = Path(out) if out is not None else tasks_dir(root)
    out.mkdir(parents=True, exist_ok=True)
    name = task_name(task)
    params = json.dumps(_params(task), sort_keys=True, default=str)
    lines = [json.dumps({"question": e.prompt, "answer": e.answer, "solution": e.solution,
                         "meta": json.dumps(e.meta, sort_keys=True) if e.meta is not None else "",
                         "task": task.name, "task_params": params}) for e in task.split("test")]
    _write(out / f"{name}.jsonl", "\n".join(lines) + "\n")
    _write(out / f"{name}.yaml", _yaml(name, out / f"{name}.jsonl", task.max_new_tokens, task))
    _write(out / SCORER, '"""lm-eval scorer of the exported bench tasks: the task\'s own verifier."""\n'
                         "from bench.lmeval import process_results  # noqa: F401\n")
    return name


def export_all(root: Path | None = None) -> list[str]:
    """Every registered task at its default config (tasks that need parameters, like gsm8k's data
    file, are exported by `bench eval` of a run that has them)."""
    names = []
    for n in tasks.names():
        try:
            task = tasks.get(n)
        except InputError:
            continue
        names.append(export_task(task, root))
    return names


def _write(path: Path, text: str) -> None:
    if path.is_file() and path.read_text() == text:
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def _task(name: str, params: dict):
    """tasks.get from JSON-read parameters: JSON has no tuples, task configs do (countdown's operators)."""
    return tasks.get(name, **{k: tuple(v) if isinstance(v, list) else v for k, v in params.items()})


_TASKS: dict[tuple[str, str], object] = {}


def process_results(doc: dict, resps: list[str]) -> dict[str, float]:
    """lm-eval hook: exact_match = the bench task's verifier on the completion (1 when score >= 1)."""
    key = (doc["task"], doc["task_params"])
    if key not in _TASKS:
        _TASKS[key] = _task(doc["task"], json.loads(doc["task_params"]))
    ex = Example(prompt=doc["question"], answer=doc["answer"], solution=doc["solution"],
                 meta=json.loads(doc["meta"]) if doc["meta"] else None)
    return {"exact_match": float(_TASKS[key].score(resps[0], ex) >= 1.0)}


# ---------------------------------------------------------------- bench eval


@dataclasses.dataclass(frozen=True)
class Target:
    """What `bench eval` evaluates: a checkpoint, the run it came from (if any), where results go."""

    checkpoint: Path
    out: Path
    run: dict | None = None  # run.json of the run
    task: object | None = None  # the bench task the checkpoint was trained on, if known
    max_new_tokens: int | None = None
    n_examples: int | None = None


def resolve(ref: str, root: Path | None = None) -> Target:
    """RUN_ID (results/runs/RUN_ID/checkpoint) or a checkpoint directory (transformers format)."""
    root = Path(root or results.default_root())
    run_dir = results.run_dir(root, ref)
    if (run_dir / "run.json").is_file():
        ckpt = run_dir / "checkpoint"
        if not (ckpt / "config.json").is_file():
            raise MissingInput(f"run {ref} has no checkpoint ({ckpt}): rerun it with "
                               f"`bench run ... --save-checkpoint` (or give a checkpoint directory)")
        _json_file(ckpt / "config.json", "model config")  # named here, not in a transformers traceback
        return _from_run(ckpt, run_dir, results.read_meta(run_dir))
    path = Path(ref).expanduser()
    if not (path / "config.json").is_file():
        raise MissingInput(f"{ref!r} is neither a run id under {root / 'runs'} nor a checkpoint directory "
                           "(a transformers model directory with config.json)")
    _json_file(path / "config.json", "model config")
    path = path.resolve()
    if (path.parent / "run.json").is_file():  # results/runs/<id>/checkpoint
        return _from_run(path, path.parent, results.read_meta(path.parent))
    out = root / "lmeval" / f"{path.name}-{hashlib.sha256(str(path).encode()).hexdigest()[:8]}"
    ws = path / "warmstart.json"  # a cached warm start knows its task
    if ws.is_file():
        meta = _json_file(ws, "warm-start record")
        cfg = {k: v for k, v in meta["task_config"].items() if k != "version"}
        return Target(path, out, task=_task(meta["task"], cfg), n_examples=meta["config"]["eval_examples"])
    return Target(path, out)


def _from_run(ckpt: Path, run_dir: Path, meta: dict) -> Target:
    cfg = meta["config"]
    task = _task(cfg["task"], cfg.get("task_params", {}))
    return Target(ckpt, run_dir / "lmeval", run=meta, task=task, max_new_tokens=meta.get("max_new_tokens"),
                  n_examples=cfg["eval"]["n_examples"])


def _available(tdir: Path) -> list[str]:
    exported = {p.stem for p in tdir.glob(f"{PREFIX}*.yaml")}
    from bench.tasks.dataset import DataTask  # dataset tasks need their data: exported per run only

    return sorted(exported | {PREFIX + n for n in tasks.names() if not issubclass(tasks.task_class(n), DataTask)})


def _exported_params(name: str, root: Path | None):
    """The bench task behind an earlier export NAME (bench_<task>_<hash>) in RESULTS/lmeval_tasks,
    rebuilt from the YAML's one-line JSON `metadata:` (read as text, never as YAML) and checked:
    its parameters must hash to NAME. None when there is no such export."""
    path = tasks_dir(root) / f"{name}.yaml"
    if not path.is_file():
        return None
    m = re.search(r"^metadata: (\{.*\})$", path.read_text(errors="replace"), re.M)
    try:
        meta = json.loads(m.group(1)) if m else None
        task = _task(meta["bench_task"], meta["bench_params"])
    except (ValueError, KeyError, TypeError) as e:
        raise InputError(f"{path}: not a task file bench exported ({type(e).__name__}: {e}); "
                         "delete it, or export it again with `bench eval --export-only`") from None
    if task_name(task) != name:
        raise InputError(f"{path}: its parameters give task {task_name(task)!r}, not {name!r}: the file was "
                         "edited; delete it and evaluate the run again")
    return task


def prepare_tasks(names: list[str], private: Path, root: Path | None = None):
    """Export every bench task among names into `private` (a directory only this process writes);
    a TaskManager over `private` alone, indexing lm-eval's built-in tasks only when a name is not a
    bench task (indexing them costs ~12 s). Unknown names: ValueError listing the available tasks."""
    builtin, unknown_bench = [], []
    for n in names:
        if (private / f"{n}.yaml").is_file():
            continue
        if n.startswith(PREFIX) and n[len(PREFIX):] in tasks.names():
            try:
                export_task(tasks.get(n[len(PREFIX):]), out=private)
                continue
            except InputError:  # a task that needs parameters (gsm8k's data file)
                pass
        task = _exported_params(n, root) if n.startswith(PREFIX) else None
        if task is not None:
            export_task(task, out=private)
        elif n.startswith(PREFIX):  # bench's namespace: no need to index lm-eval's
            unknown_bench.append(n)
        else:
            builtin.append(n)
    if unknown_bench:
        raise InputError(_unknown(unknown_bench, _available(tasks_dir(root)), []))
    from lm_eval.tasks import TaskManager  # ~5 s to import

    tm = TaskManager(include_path=str(private), include_defaults=bool(builtin))
    unknown = [n for n in builtin if n not in tm.all_tasks]
    if unknown:
        ours = _available(tasks_dir(root))
        raise InputError(_unknown(unknown, ours, sorted(set(tm.all_tasks) - set(ours))))
    return tm


def _unknown(names: list[str], ours: list[str], builtin: list[str]) -> str:
    close = difflib.get_close_matches(names[0], ours + builtin, n=3)
    hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
    more = (f"; plus {len(builtin)} built-in lm-eval tasks and groups (`lm-eval ls tasks`; they need their data "
            "locally)") if builtin else ""
    return f"unknown lm-eval task(s) {', '.join(map(repr, names))}{hint}; available bench tasks: {', '.join(ours)}{more}"


def load_model(ckpt: Path, backend: str = "hf", batch_size: int = 256, device: str = "cpu"):
    """lm-eval's model over the checkpoint: HFLM over the loaded model (as bench loads it), or vLLM."""
    if backend == "vllm":
        from bench.engine.vllm_backend import check_installed

        check_installed()
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        VLLM = _lm_eval_vllm()
        return VLLM(pretrained=str(ckpt), dtype="float32", enforce_eager=True, batch_size=batch_size,
                    add_bos_token=False, max_model_len=_positions(ckpt), seed=0)
    if backend != "hf":
        raise InputError(f"unknown lm-eval model backend {backend!r}; valid: hf, vllm")
    import torch
    from lm_eval.models.huggingface import HFLM
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float32).to(device).eval()
    tok = AutoTokenizer.from_pretrained(ckpt)
    tok.padding_side = "left"
    return HFLM(pretrained=model, tokenizer=tok, batch_size=batch_size, max_length=_positions(ckpt), device=device,
                add_bos_token=False)


def _lm_eval_vllm():
    """lm-eval's vLLM model class. lm-eval reads `importlib.metadata.version("vllm")` at import,
    which fails under the CPU build (its distribution is `vllm-cpu`): answer for it then, after
    vLLM has detected its platform (that detection must still see no `vllm` distribution)."""
    from importlib import metadata

    from vllm.platforms import current_platform

    current_platform.device_type  # noqa: B018  (resolves the platform now, unpatched)

    real = metadata.version

    def version(name: str) -> str:
        try:
            return real(name)
        except metadata.PackageNotFoundError:
            if name == "vllm":
                return real("vllm-cpu")
            raise

    metadata.version = version
    try:
        from lm_eval.models.vllm_causallms import VLLM
    finally:
        metadata.version = real
    return VLLM


def _positions(ckpt: Path) -> int:
    return int(_json_file(ckpt / "config.json", "model config").get("max_position_embeddings", 2048))


def _json_file(path: Path, what: str) -> dict:
    """A JSON object file in a directory the user named; InputError naming it when unreadable."""
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"{path}: unreadable {what} ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: unreadable {what} (a JSON {type(data).__name__}, not an object)")
    return data


def evaluate(ref: str, task_names: list[str] | None = None, root: Path | None = None, backend: str = "hf",
             batch_size: int = 256, limit: int | None = None, device: str = "cpu", log_samples: bool = False) -> dict:
    """Evaluate a run's checkpoint (or a checkpoint directory) with lm-eval; write and return the record.

    With no task names: the checkpoint's own bench task, on the first eval.n_examples held-out
    examples with the run's generation cap, i.e. exactly what the run's greedy evaluation saw.
    """
    root = Path(root or results.default_root())
    target = resolve(ref, root)
    private = Path(tempfile.mkdtemp(prefix="bench-lmeval-"))  # 0700, fresh: nobody else can plant files in it
    try:
        gen_kwargs = None
        if not task_names:
            if target.task is None:
                raise InputError(f"{ref}: not a run or warm start, so its task is unknown: pass --tasks "
                                 f"(e.g. {', '.join(_available(tasks_dir(root)))})")
            task_names = [export_task(target.task, out=private)]
            limit = limit or target.n_examples
            if target.max_new_tokens and target.max_new_tokens != target.task.max_new_tokens:
                gen_kwargs = {"max_gen_toks": target.max_new_tokens}
        tm = prepare_tasks(task_names, private, root)
        os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from lm_eval import simple_evaluate

        lm = load_model(target.checkpoint, backend, batch_size, device)
        t0 = time.perf_counter()
        res = simple_evaluate(model=lm, tasks=task_names, task_manager=tm, apply_chat_template=True, limit=limit,
                              gen_kwargs=gen_kwargs, bootstrap_iters=0, log_samples=log_samples)
    finally:
        shutil.rmtree(private, ignore_errors=True)
    record = {
        "checkpoint": str(target.checkpoint), "run_id": (target.run or {}).get("run_id"), "backend": backend,
        "tasks": task_names, "limit": limit, "gen_kwargs": gen_kwargs, "seconds": time.perf_counter() - t0,
        "results": res["results"], "n_samples": res.get("n-samples"), "versions": res.get("versions"),
        "configs": res.get("configs"), **results.environment(),
    }
    if log_samples:
        record["samples"] = res["samples"]
    target.out.mkdir(parents=True, exist_ok=True)
    key = "+".join(task_names) if len(task_names) <= 3 else hashlib.sha256("+".join(task_names).encode()).hexdigest()[:12]
    path = target.out / f"{key}.{backend}.json"
    _write(path, json.dumps(record, indent=2, sort_keys=True, default=str))
    record["path"] = str(path)
    return record
