"""Warm starts: supervised fine-tuning of a scale on a task's worked solutions, cached.

RL on a random tiny model learns nothing (every reward is 0), so each (task, scale) starts from a
policy that solves some held-out problems but not all — the regime where algorithms differ. The
checkpoint is cached under `cache_dir()/warmstart/<key>` where key hashes (task config, scale,
warm-start config, code version), and saved with `save_pretrained` (model and tokenizer), so
transformers, lm-eval and vLLM load it unchanged. Concurrent processes asking for one key wait
on a file lock; exactly one trains.

A key names what a checkpoint *is*, not only what it was asked to be: besides the configs it
hashes the code that trains and evaluates it (`code_fingerprint`: the syntax trees of the modules
on the SFT path, so comments and docstrings do not count, and the versions of the libraries that
do the arithmetic). Code that would train other weights cannot reuse a cached checkpoint; it
trains its own. Each checkpoint's weights are hashed once (SHA-256, `warmstart.json` "sha256"),
checked on every cache hit, and recorded in each run.json that starts from it.
"""
from __future__ import annotations

import ast
import dataclasses
import fcntl
import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import math
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from algorithms.errors import InputError, MissingInput
from bench import models
from bench.numerics import PINNED_ISA, cpu_capability
from bench.config import EvalConfig, WarmStartConfig
from bench.engine.evaluate import evaluate
from bench.engine.policy import Policy

# Bump when the training procedure changes in a way the code fingerprint cannot see (data files).
WARMSTART_VERSION = 3  # 2: Qwen2Tokenizer-based tokenizers; 3: keys carry the code fingerprint

# The code on the SFT path: every module a warm start executes (a package: all its modules). A
# change to any of them changes every key. tests/test_warmstart.py traces a warm start and fails
# when it executes a file of ours that this list misses.
SFT_MODULES = ("bench.config", "bench.engine.evaluate", "bench.engine.fused", "bench.engine.padding", "bench.engine.policy",
               "bench.engine.rollout", "bench.models", "bench.numerics", "bench.tasks", "bench.typed", "bench.warmstart")
# Libraries whose arithmetic or data the checkpoint depends on (exact versions).
SFT_PACKAGES = ("torch", "transformers", "tokenizers", "safetensors", "reasoning-gym", "math-verify")


def cache_dir() -> Path:
    """$BENCH_CACHE, else $XDG_CACHE_HOME/grpo-bench, else ~/.cache/grpo-bench."""
    if os.environ.get("BENCH_CACHE"):
        return Path(os.environ["BENCH_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "grpo-bench"


@dataclass(frozen=True)
class WarmStart:
    path: Path
    key: str  # "none": a local model directory used as it is (no SFT, no copy in the cache)
    accuracy: float | None  # held-out greedy accuracy right after SFT (None: no SFT)
    seconds: float  # wall time of the SFT + evaluation that produced it
    cache_hit: bool
    metrics: dict
    prompt: dict = dataclasses.field(default_factory=dict)  # the task's system_prompt / chat_template
    sha256: str = ""  # of the weight files (weights_sha256): what run.json records as the starting point

    def load(self, device: str | torch.device = "cpu") -> Policy:
        # fp32 weights even on GPUs: they are the optimizer's master copy (bf16 weights lose
        # updates below their 8-bit mantissa); train.precision = "bf16" autocasts the forwards.
        model = AutoModelForCausalLM.from_pretrained(self.path, dtype=torch.float32).to(device)
        tok = models.build_tokenizer(models.Scale(self.path.name, path=str(self.path)))
        return _prompted(Policy(model, tok), self.prompt)


def _prompt(task) -> dict:
    """What a task says about prompt rendering beyond the prompt text (dataset tasks only)."""
    return {k: getattr(task.config, k) for k in ("system_prompt", "chat_template")
            if getattr(task.config, k, None) is not None}


def _prompted(policy: Policy, prompt: dict) -> Policy:
    if prompt.get("chat_template"):
        policy.tokenizer.chat_template = prompt["chat_template"]
    policy.system = prompt.get("system_prompt")
    return policy


def _config_dict(obj) -> dict:
    if dataclasses.is_dataclass(obj):
        return dataclasses.asdict(obj)
    return obj.canonical() if hasattr(obj, "canonical") else dict(obj)  # fields added later: absent at their default


def _module_files(name: str) -> list[Path]:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise LookupError(f"SFT_MODULES names {name!r}, which is not importable")
    origin = Path(spec.origin)
    return sorted(origin.parent.rglob("*.py")) if spec.submodule_search_locations else [origin]


def source_digest(source: str) -> str:
    """SHA-256 of a module's syntax tree without docstrings: a comment, a docstring or a reformat
    leaves it unchanged, any change to what the code computes changes it."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree, include_attributes=False).encode()).hexdigest()


def sft_files() -> list[Path]:
    """The source files `code_fingerprint` hashes, once each, in a fixed order."""
    return sorted({f.resolve() for name in SFT_MODULES for f in _module_files(name)})


def sft_sources() -> dict[str, str]:
    """Path relative to the repository -> source text, of every file on the SFT path."""
    base = Path(__file__).resolve().parents[1]
    return {(f.relative_to(base) if f.is_relative_to(base) else Path(f.name)).as_posix(): f.read_text()
            for f in sft_files()}


def sft_versions() -> dict[str, str]:
    out = {}
    for name in SFT_PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "-"
    return out


def fingerprint(sources: dict[str, str], versions: dict[str, str]) -> str:
    """16 hex digits over each source's syntax tree (by path) and each library's exact version."""
    h = hashlib.sha256()
    for rel in sorted(sources):
        h.update(f"{rel}\0{source_digest(sources[rel])}\n".encode())
    for name in sorted(versions):
        h.update(f"{name}=={versions[name]}\n".encode())
    return h.hexdigest()[:16]


@functools.cache
def code_fingerprint() -> str:
    """The fingerprint of the code that trains a warm start here (SFT_MODULES, SFT_PACKAGES)."""
    return fingerprint(sft_sources(), sft_versions())


def warmstart_key(task, scale: models.Scale, cfg: WarmStartConfig, device: str = "cpu") -> str:
    """The cache key: task config, scale, resolved warm-start config, the code fingerprint and the
    kind of device that trains it (a GPU's kernels round differently from the CPU's); on the CPU, the
    instruction set its kernels use when it is not the pinned AVX2 (numerics.py: AVX-512 rounds
    otherwise), so a cache never hands one ISA's checkpoint to the other."""
    ws = _config_dict(cfg.resolve(task.name, scale.name))
    ws.pop("calibrated", None)  # where steps and lr came from, not what trains: a calibrated run reuses the rung
    ws.pop("task_params", None)  # the SFT task's own config (below) says what data it trains on
    payload = {
        "task": {"name": task.name, **_config_dict(task.config)},
        "scale": scale.to_dict(),
        "warmstart": ws,
        "version": WARMSTART_VERSION,
        "code": code_fingerprint(),
        "device": torch.device(device).type,
    }
    if payload["device"] == "cpu" and cpu_capability() != PINNED_ISA:  # a pinned run's key has no ISA field
        payload["cpu_isa"] = cpu_capability()
    blob = json.dumps(payload, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


def weights_sha256(path: Path) -> str:
    """SHA-256 over a checkpoint directory's weight files (name and bytes, in name order): the
    identity of the weights a run starts from, whatever cache or directory holds them."""
    files = sorted(f for f in Path(path).iterdir() if f.is_file() and f.name.endswith(WEIGHT_SUFFIXES))
    if not files:
        raise MissingInput(f"no weight files ({', '.join(WEIGHT_SUFFIXES)}) in {path}")
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0")
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def demonstration(example, cfg: WarmStartConfig) -> str:
    """The SFT target for an example: its worked solution, or for a `direct_frac` share of prompts
    (a seeded hash, so the same prompts whatever the pool size) only its final `#### answer` line."""
    if cfg.direct_frac and _unit(f"direct:{cfg.seed}:{example.prompt}") < cfg.direct_frac:
        return example.solution.rsplit("\n", 1)[-1]
    return example.solution


def _unit(text: str) -> float:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") / 2**64


def _batches(policy: Policy, examples: list, cfg: WarmStartConfig):
    """Yields (input_ids, attention_mask, labels) right-padded; loss only on completion tokens."""
    prompts = policy.encode_prompts([e.prompt for e in examples])
    completions = policy.encode_completions([demonstration(e, cfg) for e in examples])
    seqs = [(p + c, len(p)) for p, c in zip(prompts, completions)]
    gen = torch.Generator().manual_seed(cfg.seed)
    while True:
        order = torch.randperm(len(seqs), generator=gen).tolist()
        for i in range(0, len(order) - cfg.batch_size + 1, cfg.batch_size):
            chunk = [seqs[j] for j in order[i:i + cfg.batch_size]]
            width = max(len(s) for s, _ in chunk)
            ids = torch.full((len(chunk), width), policy.pad_id, dtype=torch.long)
            att = torch.zeros_like(ids)
            labels = torch.full_like(ids, -100)
            for r, (s, n_prompt) in enumerate(chunk):
                ids[r, : len(s)] = torch.tensor(s)
                att[r, : len(s)] = 1
                labels[r, n_prompt: len(s)] = ids[r, n_prompt: len(s)]
            yield ids, att, labels


def sft(policy: Policy, examples: list, cfg: WarmStartConfig, log=None, check=None) -> list[float]:
    """Token-mean cross-entropy on completions, AdamW, linear warm-up then cosine to 10% at `cfg.steps`.

    `check(step)`, called every `cfg.check_every` steps (after that many updates), stops training
    when it returns True (the `stop_at` warm starts); it runs in eval mode and must not touch the
    optimizer or the batch order."""
    model = policy.model
    device = policy.device
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    steps = cfg.steps or 0

    def lr_at(step: int) -> float:
        if step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        frac = (step - cfg.warmup_steps) / max(1, steps - cfg.warmup_steps)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    model.train()
    losses = []
    batches = _batches(policy, examples, cfg)
    for step in range(steps):
        ids, att, labels = (t.to(device) for t in next(batches))
        loss = model(input_ids=ids, attention_mask=att, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if log and (step + 1) % 100 == 0:
            log(f"  sft step {step + 1}/{steps} loss {sum(losses[-100:]) / len(losses[-100:]):.4f}")
        if check is not None and (step + 1) % cfg.check_every == 0:
            model.eval()
            with torch.no_grad():
                stop = check(step + 1)
            model.train()
            if stop:
                break
    model.eval()
    return losses


STOP_FORMAT = 0.95  # the format rate a stop_at check also needs (bench calibrate's min_format)
CHECK_K = 4  # sampled answers per problem in a stop_at check


def check_set(task, cfg: WarmStartConfig, pool: list) -> list:
    """The problems a stop_at warm start is checked on: the first `check_examples` train problems after
    the SFT pool whose prompts the pool does not hold (so the level is measured on unseen problems of
    the SFT distribution, never on the test split the runs evaluate on)."""
    seen = {e.prompt for e in pool}
    out: list = []
    for e in task.split("train", n=cfg.pool + 8 * cfg.check_examples)[cfg.pool:]:  # bounded: 8 draws a problem
        if e.prompt not in seen:
            seen.add(e.prompt)
            out.append(e)
            if len(out) == cfg.check_examples:
                return out
    raise InputError(f"warmstart.stop_at: only {len(out)} train problems of {task.name} lie outside the SFT pool "
                     f"(warmstart.pool = {cfg.pool}), fewer than warmstart.check_examples = {cfg.check_examples}; "
                     "lower warmstart.check_examples or warmstart.pool, or use a task with more distinct problems")


def _stopper(policy: Policy, task, problems: list, cfg: WarmStartConfig, checks: list, log=None):
    def check(step: int) -> bool:
        m = evaluate(policy, task, problems, EvalConfig(n_examples=len(problems), k=CHECK_K), seed=cfg.seed)
        row = {"step": step, "pass1": m["eval/avg_k"], "format_rate": m["eval/format_rate"]}
        row["reached"] = row["pass1"] >= cfg.stop_at and row["format_rate"] >= STOP_FORMAT
        checks.append(row)
        if log:
            log(f"  sft step {step}: check pass@1 {row['pass1']:.3f} format {row['format_rate']:.3f}")
        return row["reached"]
    return check


def _refuse_unreached(meta: dict, where: Path) -> None:
    """A stop_at warm start that did not reach its level is an error wherever it is asked for."""
    if not meta.get("stop") or meta["stop"]["reached"]:
        return
    cfg, checks = meta["config"], meta["stop"]["checks"]
    best = max(checks, key=lambda r: r["pass1"]) if checks else None
    seen = f"its best check: pass@1 {best['pass1']:.3f}, format {best['format_rate']:.3f} at step {best['step']}" \
        if best else "no check ran (warmstart.check_every > warmstart.steps)"
    raise InputError(f"the warm start of {meta['task']} at {meta['scale']} with SFT seed {cfg['seed']} did not reach "
                      f"warmstart.stop_at = {cfg['stop_at']} (pass@1, format rate >= {STOP_FORMAT}) in its "
                      f"{cfg['steps']} steps ({seen}); raise warmstart.steps or lower warmstart.stop_at "
                      f"(the checkpoint is kept in {where})")


def warm_start(task, scale: models.Scale, cfg: WarmStartConfig = WarmStartConfig(), cache: Path | None = None,
               device: str = "cpu", log=None) -> WarmStart:
    """The cached warm start for (task, scale, cfg), training it first if absent.

    A local model directory (a pretrained model) gets no SFT unless `cfg.steps` asks for it: the
    warm start's lr of 3e-3 would damage it, and it is used in place, with no copy in the cache."""
    if scale.is_local and not cfg.steps:
        return WarmStart(Path(scale.path), "none", None, 0.0, False, {}, _prompt(task), weights_sha256(Path(scale.path)))
    cfg = cfg.resolve(task.name, scale.name)
    key = warmstart_key(task, scale, cfg, device)
    root = (cache or cache_dir()) / "warmstart"
    root.mkdir(parents=True, exist_ok=True)
    final = root / key
    with open(root / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one trainer per key; others wait, then hit the cache
        if (final / "warmstart.json").is_file():
            try:
                meta = json.loads((final / "warmstart.json").read_text())
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
                raise InputError(f"the cached warm start {final}: unreadable warmstart.json ({type(e).__name__}); delete "
                                 "that directory and the next run trains it again") from None
            sha = weights_sha256(final)
            if meta.get("sha256") not in (None, sha):
                raise InputError(f"the cached warm start {final} has weights with SHA-256 {sha[:12]}, not the "
                                 f"{meta['sha256'][:12]} it was saved with (modified or damaged after training); "
                                 "delete that directory and the next run trains it again")
            _refuse_unreached(meta, final)
            return WarmStart(final, key, meta["accuracy"], meta["seconds"], True, meta["metrics"], _prompt(task), sha)
        t0 = time.perf_counter()
        train = task.split("train", n=cfg.pool)
        corpus = [e.prompt for e in train[:2000]] + [e.solution for e in train[:2000]]
        tok = models.build_tokenizer(scale, corpus=corpus)
        policy = _prompted(Policy(models.build_model(scale, tok, seed=cfg.seed).to(device), tok), _prompt(task))
        checks: list[dict] = []
        check = None if cfg.stop_at is None else _stopper(policy, task, check_set(task, cfg, train), cfg, checks, log)
        losses = sft(policy, train, cfg, log=log, check=check)
        test = task.split("test")
        metrics = evaluate(policy, task, test, EvalConfig(n_examples=cfg.eval_examples, k=0), seed=cfg.seed)
        seconds = time.perf_counter() - t0
        meta = {
            "key": key, "task": task.name, "scale": scale.name, "accuracy": metrics["eval/acc_greedy"],
            "seconds": seconds, "metrics": metrics, "final_loss": losses[-1] if losses else None,
            "config": cfg.model_dump(), "task_config": _config_dict(task.config),
            "scale_config": scale.to_dict(), "version": WARMSTART_VERSION, "code": code_fingerprint(),
            "device": str(device), "torch_threads": torch.get_num_threads(),
        }
        if check is not None:  # where it stopped, and every check on the way
            meta["stop"] = {"reached": bool(checks) and checks[-1]["reached"], "step": len(losses), "checks": checks}
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=root))
        try:
            policy.model.save_pretrained(tmp)
            tok.save_pretrained(tmp)
            meta["sha256"] = weights_sha256(tmp)
            (tmp / "warmstart.json").write_text(json.dumps(meta, indent=2, sort_keys=True, default=str))
            os.replace(tmp, final)  # atomic: a reader sees a whole checkpoint or none
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        _refuse_unreached(meta, final)
        return WarmStart(final, key, meta["accuracy"], seconds, False, metrics, _prompt(task), meta["sha256"])
