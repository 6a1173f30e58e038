"""The metric registry: every number a run records is declared here once, with how it combines.

    from algorithms import metrics
    metrics.declare("policy/my_frac", kind="step", unit="fraction", merge="token",
                    doc="share of valid tokens my objective ...; NaN unless the recipe has it")
    metrics.get("policy/my_frac").merge      # 'token'
    metrics.step_metrics()                   # steps.parquet's columns after `step`, in declaration order

A metric is stored only if declared: `bench/results.py` writes every declared step (eval) metric as a
Float64 column of steps.parquet (evals.parquet) and refuses a row with an undeclared key, so a new
metric never disappears silently. Declaration order is column order: declare new metrics at the end.
Old records lack later columns and read them as null.

kind        step: one value per optimizer step (steps.parquet); eval: one per held-out evaluation
            (evals.parquet, names start with `eval/`); stat: a count `recipe.loss` returns to weight
            the means of others, never stored (`tokens`, `sequences`)
merge       how the values of one step's pieces combine (algorithms/stats.py; the trainer):
              sum    micro-batches add up (losses carry full-batch weights; counts); updates: mean
              max    the largest over micro-batches and updates;  min: the smallest
              seq    a mean over sequences: micro-batches weighted by `sequences`; updates: mean
              token  a mean over valid tokens: micro-batches weighted by `tokens`; updates: mean
              mean   a value computed once per update (grad/norm): the mean over updates
            None: computed once per step or evaluation (the trainer's row, rewards, evaluate): never merged
over_steps  how the report reduces a run's steps (or a budget bin of them) to one number: mean, max, min
group       the report table listing it (bench/report/tables.py): clipping, off_policy, group_weights;
            label is its column there (default: the name after its last `/`), order its position
            among the group's columns (unset: after those with one, in declaration order)
"""

from __future__ import annotations

import contextlib
import difflib
import re
from collections.abc import Iterator
from dataclasses import dataclass

from .errors import InputError

KINDS = ("step", "eval", "stat")
MERGES = ("sum", "max", "min", "seq", "token", "mean")
OVER_STEPS = ("mean", "max", "min")
RESERVED = ("step", "fraction", "run_id")  # the records' own columns (bench/results.py)
NAME = re.compile(r"[a-z][a-z0-9_]*(/[a-z0-9_]+)*")
METRIC_NAME = re.compile(r"[a-z][a-z0-9_]*(/[a-z0-9_]+(@[0-9]+)?)*")  # a last word may end @N: eval/pass@4


@dataclass(frozen=True)
class Metric:
    """One declared metric; the fields are the module docstring's (label is "" outside a group)."""

    name: str
    kind: str
    unit: str
    doc: str
    merge: str | None = None
    over_steps: str = "mean"
    group: str | None = None
    label: str = ""
    order: int | None = None


class MetricError(InputError):
    """A malformed declaration, or a second declaration of a name that differs from the first."""


class UnknownMetricError(InputError, LookupError):
    """A name that is not declared (still a LookupError)."""


_METRICS: dict[str, Metric] = {}


def declare(name: str, *, kind: str, unit: str, doc: str, merge: str | None = None, over_steps: str | None = None,
            group: str | None = None, label: str | None = None, order: int | None = None) -> Metric:
    """Declare a metric (see the module docstring for the fields); returns it.

    over_steps defaults to max / min for merge max / min, else mean. Declaring a name again with the
    same fields is a no-op (a module imported twice, a reward registered by name); with other fields
    it raises MetricError."""
    def bad(field: str, value, why: str, valid=None) -> MetricError:
        return MetricError(f"{name}: {field} {value!r}: {why}" + (f"; valid: {', '.join(map(str, valid))}" if valid else ""))

    if not isinstance(name, str) or not METRIC_NAME.fullmatch(name):
        raise MetricError(f"{name!r}: not a metric name; valid: lowercase words of [a-z0-9_] joined by '/', "
                          "each may end in @N, e.g. policy/clip_frac_low or eval/pass@4")
    if name in RESERVED:
        raise bad("name", name, "a column every record has already", RESERVED)
    if kind not in KINDS:
        raise bad("kind", kind, "unknown kind", KINDS)
    if (kind == "eval") != name.startswith("eval/"):
        raise bad("kind", kind, "eval metrics, and only they, are named eval/...")
    if merge is not None and merge not in MERGES:
        raise bad("merge", merge, "unknown merge rule", MERGES)
    if kind == "stat" and merge is None:
        raise bad("merge", merge, "a stat exists to be merged", MERGES)
    if kind == "eval" and merge is not None:
        raise bad("merge", merge, "an evaluation is never merged; leave merge out")
    if over_steps is None:
        over_steps = merge if merge in ("max", "min") else "mean"
    if over_steps not in OVER_STEPS:
        raise bad("over_steps", over_steps, "unknown reduction", OVER_STEPS)
    for field, value in (("unit", unit), ("doc", doc)):
        if not isinstance(value, str) or not value.strip():
            raise bad(field, value, "say it in words (a line for doc)")
    if group is not None and (not isinstance(group, str) or not NAME.fullmatch(group) or "/" in group):
        raise bad("group", group, "not a group name (a word of [a-z0-9_], like clipping)")
    if group is None and (label or order is not None):
        raise bad("label" if label else "order", label or order, "only a metric in a group has a report column")
    label = label or name.rsplit("/", 1)[-1]
    if group is not None and (not isinstance(label, str) or not NAME.fullmatch(label) or "/" in label):
        raise bad("label", label, "not a column name (a word of [a-z0-9_])")
    if order is not None and (isinstance(order, bool) or not isinstance(order, int)):
        raise bad("order", order, "not an integer position")
    metric = Metric(name, kind, unit, doc, merge, over_steps, group, label if group else "", order)
    old = _METRICS.get(name)
    if old is not None:
        if old != metric:
            diff = ", ".join(f"{f} {getattr(old, f)!r} -> {getattr(metric, f)!r}" for f in Metric.__dataclass_fields__
                             if getattr(old, f) != getattr(metric, f))
            raise MetricError(f"{name}: already declared otherwise ({diff}); a metric is declared once "
                              "(algorithms/metrics.py, or beside the code that emits it)")
        return old
    if group is not None:
        clash = [m.name for m in in_group(group) if m.label == metric.label]
        if clash:
            raise bad("label", metric.label, f"group {group} already has a column of that name ({clash[0]})")
    _METRICS[name] = metric
    return metric


def get(name: str) -> Metric:
    """The declared metric `name`; UnknownMetricError naming close declared names otherwise."""
    if name in _METRICS:
        return _METRICS[name]
    close = difflib.get_close_matches(str(name), list(_METRICS), n=3, cutoff=0.6)
    raise UnknownMetricError(f"{name!r}: not a declared metric" + (f"; close: {', '.join(close)}" if close else "")
                             + "; declare it once with algorithms.metrics.declare(...) (algorithms/metrics.py)")


def is_declared(name: str) -> bool:
    return name in _METRICS


def step_metrics() -> list[Metric]:
    """Step metrics in declaration order: steps.parquet's columns after `step`."""
    return [m for m in _METRICS.values() if m.kind == "step"]


def eval_metrics() -> list[Metric]:
    """Evaluation metrics in declaration order: evals.parquet's columns after step, fraction, compute/flops."""
    return [m for m in _METRICS.values() if m.kind == "eval"]


def in_group(group: str) -> list[Metric]:
    """The metrics of a report group in column order: by `order`, then those without one in declaration order."""
    members = [m for m in _METRICS.values() if m.group == group]
    return sorted(members, key=lambda m: (m.order is None, m.order or 0))  # stable: ties keep declaration order


def reward_metric(name: str) -> Metric:
    """Declare the column `reward/<name>` of a reward function (bench/rewards.py's `register` calls it;
    the built-in ones are declared below, in their column's place)."""
    return declare(f"reward/{name}", kind="step", unit="reward",
                   doc=f"reward function {name!r} (bench/rewards.py), unweighted: mean over the step's sampled "
                       "completions; NaN when the run's reward mix leaves it out (reward/correct: always logged)")


@contextlib.contextmanager
def declared_for_test(name: str, **fields) -> Iterator[Metric]:
    """Tests only: declare a throwaway metric for the `with` block, then remove it (nothing else may)."""
    if name in _METRICS:
        raise MetricError(f"{name}: already declared; a test's throwaway metric must be new")
    metric = declare(name, **fields)
    try:
        yield metric
    finally:
        _METRICS.pop(name, None)


# ---------------------------------------------------------------------------------------------------
# Every metric the engine, the parts and the rewards emit. The order is steps.parquet's and
# evals.parquet's column order, fixed since runs were first published: add new ones at the end.
# "Every step with an update": a step whose filter kept no group (dynamic sampling that never found a
# mixed group) has no update; stats of the update are NaN there and filter/kept_frac is 0.

_FAMILY_2026 = "(December 2026; earlier runs read it as null)"
_CLIP_OTHERS = "; dppo: tokens its trust-region mask drops; gmpo and clip_cov: where the clip binds"

declare("reward/mean", kind="step", unit="reward",
        doc="combined reward Σ weight × reward function after the recipe's shaping, mean over the step's sampled completions")
declare("reward/std", kind="step", unit="reward", doc="its standard deviation over the sampled completions (NaN with one)")
declare("acc/train", kind="step", unit="fraction",
        doc="share of the step's sampled completions (every generation round, before filtering) the task's verifier accepts")
for _reward in ("correct", "format", "length", "overlong"):
    reward_metric(_reward)
declare("len/mean", kind="step", unit="tokens", doc="completion length (EOS included), mean over the step's sampled completions")
declare("len/correct", kind="step", unit="tokens", doc="the same over correct completions; NaN when none is correct")
declare("len/incorrect", kind="step", unit="tokens", doc="the same over incorrect completions; NaN when all are correct")
declare("len/truncated_frac", kind="step", unit="fraction",
        doc="share of sampled completions that hit max_new_tokens without EOS")
declare("adv/mean", kind="step", unit="advantage", doc="mean advantage over the valid tokens of the batch trained on")
declare("adv/zero_std_group_frac", kind="step", unit="fraction",
        doc="share of sampled groups whose rewards all tie (a group baseline gives them no gradient)")
declare("filter/kept_frac", kind="step", unit="fraction",
        doc="share of sampled completions the recipe's filter kept for training; 0 when it kept no group (no update)")
declare("filter/generation_rounds", kind="step", unit="rounds",
        doc="generation rounds of the step (dynamic sampling refills until it has enough mixed groups)")
declare("kl/k1", kind="step", unit="nats", merge="token",
        doc="mean per-token k1 = log π − log π_ref to the reference (the warm start), every recipe, every step "
            "with an update, whatever the recipe's KL placement")
declare("kl/k3", kind="step", unit="nats", merge="token",
        doc="mean per-token k3 = e^u − 1 − u, u = log π_ref − log π; every step with an update")
declare("policy/clip_frac_low", kind="step", unit="fraction", merge="token", group="clipping", label="clip_low",
        doc="share of valid tokens with A < 0 whose ratio the clip cuts below 1 − ε; 0 for objectives without that "
            "clip (is_pg; cispo: see weight_capped_frac)" + _CLIP_OTHERS)
declare("policy/clip_frac_high", kind="step", unit="fraction", merge="token", group="clipping", label="clip_high",
        doc="share of valid tokens with A > 0 whose ratio the clip cuts above 1 + ε; 0 for objectives without that "
            "clip (is_pg, topr: no high side; cispo: see weight_capped_frac)" + _CLIP_OTHERS)
declare("policy/clip_frac_seq", kind="step", unit="fraction", merge="seq", group="clipping", label="clip_seq",
        doc="share of sequences whose sequence ratio is clipped; NaN unless the objective clips sequences (gspo)")
declare("policy/weight_capped_frac", kind="step", unit="fraction", merge="token", group="clipping", label="weight_capped",
        doc="share of valid tokens whose importance weight is capped; NaN unless the objective caps IS weights (cispo, dppo)")
declare("policy/ratio_mean", kind="step", unit="ratio", merge="token",
        doc="mean token ratio ρ = π/π_old over valid tokens; every step with an update")
declare("policy/ratio_min", kind="step", unit="ratio", merge="min", doc="smallest token ratio ρ over the step's updates")
declare("policy/ratio_max", kind="step", unit="ratio", merge="max", group="off_policy", order=3,
        doc="largest token ratio ρ over the step's updates")
declare("policy/entropy", kind="step", unit="nats", merge="token",
        doc="mean per-token entropy of the policy over valid tokens (from the training forward); always logged")
declare("grad/norm", kind="step", unit="L2 norm", merge="mean",
        doc="policy gradient norm before the norm clip (train.grad_clip), mean over the step's updates")
declare("loss/policy", kind="step", unit="loss", merge="sum", doc="the policy-gradient term of the loss (aggregated)")
declare("loss/kl", kind="step", unit="loss", merge="sum", doc="the KL term of the loss; 0 when the recipe has none in the loss")
declare("loss/value", kind="step", unit="loss", merge="sum", doc="the critic's value loss; NaN without a critic (all but ppo, vapo)")
declare("loss/nll", kind="step", unit="loss", merge="sum",
        doc="VAPO's negative log-likelihood term on correct completions; NaN unless the recipe has it")
declare("critic/explained_var", kind="step", unit="fraction",
        doc="variance of the returns the critic's values explain; NaN without a critic (all but ppo, vapo)")
declare("rollout/logp_mismatch", kind="step", unit="nats",
        doc="mean |logp_sampler − logp_train| over the generated tokens trained on; NaN unless the trainer "
            "recomputes logp_old (rollout = vllm, or rollout.precision bf16/fp16)")
declare("rollout/lag", kind="step", unit="policy versions", group="off_policy", order=5,
        doc="policy versions between the weights that sampled the batch and those its first update starts from "
            "(rollout.lag; less in the first lag steps, which sample the warm start); every step")
declare("policy/ratio_dev_frac", kind="step", unit="fraction", merge="token", group="off_policy", order=1,
        doc="share of valid tokens with |ρ − 1| > 0.2 (algorithms/telemetry.py); exactly 0 on-policy with one update")
declare("policy/log_ratio_abs_mean", kind="step", unit="nats", merge="token", group="off_policy", order=2,
        label="log_ratio_abs", doc="mean |log ρ| over valid tokens; exactly 0 on-policy with one update")
declare("policy/seq_ratio_mean", kind="step", unit="ratio", merge="seq",
        doc="mean over sequences of the sequence ratio exp(mean_t log ρ); exactly 1 on-policy with one update")
declare("policy/seq_ratio_max", kind="step", unit="ratio", merge="max", group="off_policy", order=4,
        doc="largest sequence ratio exp(mean_t log ρ) over the step's updates; exactly 1 on-policy with one update")
_GROUP_STD = ("quantile {} of the reward std of the trained batch's groups with a nonzero std "
              "(algorithms/telemetry.py); NaN when no group has a spread")
for _q in ("10", "50", "90"):
    declare(f"adv/group_std_q{_q}", kind="step", unit="reward std", group="group_weights", doc=_GROUP_STD.format(f"0.{_q[0]}"))
declare("adv/low_std_weight_frac", kind="step", unit="fraction", group="group_weights", label="low_std_weight",
        doc="share of the batch's gradient weight Σ_i w_i Σ_t |A| on the groups whose reward std is below the median "
            "(std normalisation up-weights them when it exceeds adv/low_std_group_frac); NaN when no group has a spread")
declare("adv/low_std_group_frac", kind="step", unit="fraction", group="group_weights", label="low_std_groups",
        doc="share of the groups with a nonzero reward std that are below the median std")
declare("correction/weight_mean", kind="step", unit="weight", merge="token",
        doc=f"mean over valid tokens of the product of the recipe's corrections' factors; NaN unless it has corrections {_FAMILY_2026}")
declare("correction/masked_frac", kind="step", unit="fraction", merge="token",
        doc=f"share of valid tokens the corrections set to 0; NaN unless the recipe has corrections {_FAMILY_2026}")
declare("policy/entropy_coef", kind="step", unit="coefficient", merge="mean",
        doc=f"the entropy coefficient applied, mean over updates; NaN unless the recipe has an entropy_control {_FAMILY_2026}")
declare("policy/cov_frac", kind="step", unit="fraction", merge="token",
        doc=f"share of valid tokens the covariance rule selects; NaN unless the objective is clip_cov or kl_cov {_FAMILY_2026}")
declare("compute/flops", kind="step", unit="FLOPs", doc="FLOPs spent by the run so far (the compute ledger), cumulative")
declare("compute/gen_tokens", kind="step", unit="tokens", doc="tokens generated by the run so far, cumulative")
declare("compute/train_tokens", kind="step", unit="tokens", doc="tokens trained on by the run so far, cumulative")
declare("time/rollout_s", kind="step", unit="s", doc="wall time of the step's generation and rewards")
declare("time/reference_s", kind="step", unit="s", doc="wall time of the step's frozen forward passes (logp_old, reference, values)")
declare("time/train_s", kind="step", unit="s", doc="wall time of the step's updates and the sampler's weight sync")
declare("time/step_s", kind="step", unit="s", doc="wall time of the whole step")
declare("lr", kind="step", unit="learning rate", doc="the policy optimizer's learning rate at the end of the step")
# engagement of the 2026 parts (issue 42): declared after the published columns, so their order stays
declare("correction/changed_frac", kind="step", unit="fraction", merge="token",
        doc="share of valid tokens whose correction factor differs from 1 by more than 1% (|c − 1| > 0.01, masked "
            f"tokens included): the tokens whose gradient the corrections change; NaN unless the recipe has corrections {_FAMILY_2026}")
declare("policy/gate_damped_frac", kind="step", unit="fraction", merge="token",
        doc="share of valid tokens whose soft gate damps the gradient by more than 1% against the unclipped ratio "
            f"objective (4σ(1−σ) < 0.99); NaN unless the objective is sapo {_FAMILY_2026}")

declare("eval/acc_greedy", kind="eval", unit="fraction", doc="share of held-out examples the greedy completion solves")
declare("eval/avg_k", kind="eval", unit="fraction",
        doc="avg@k: share of k sampled completions per example that solve it (the sampled pass@1); NaN when eval.k = 0")
declare("eval/pass_k", kind="eval", unit="fraction",
        doc="pass@k: share of examples with a correct completion among k samples; NaN when eval.k = 0")
declare("eval/len_mean", kind="eval", unit="tokens", doc="mean greedy completion length")
declare("eval/len_correct", kind="eval", unit="tokens", doc="mean greedy completion length when correct; NaN when none is")
declare("eval/len_incorrect", kind="eval", unit="tokens", doc="mean greedy completion length when incorrect; NaN when all are correct")
declare("eval/truncated_frac", kind="eval", unit="fraction", doc="share of greedy completions that hit the cap without EOS")
declare("eval/gen_tokens", kind="eval", unit="tokens", doc="tokens the evaluation generated (greedy, sampled and out-of-distribution)")
declare("eval/n", kind="eval", unit="examples", doc="held-out examples evaluated")
declare("eval/format_greedy", kind="eval", unit="fraction",
        doc="share of greedy completions that are well formed (Task.well_formed) (December 2026; earlier runs read it as null)")
declare("eval/format_rate", kind="eval", unit="fraction",
        doc="share of the k samples that are well formed; NaN when eval.k = 0 (December 2026; earlier runs read it as null)")
declare("eval/acc_formatted", kind="eval", unit="fraction",
        doc="accuracy among the well-formed samples: skill apart from format; NaN when none is well formed "
            "(December 2026; earlier runs read it as null)")
declare("eval/acc_ood", kind="eval", unit="fraction",
        doc="accuracy on the task's harder out-of-distribution split (avg@min(k, 4), or greedy when eval.k = 0); NaN without one "
            "(December 2026; earlier runs read it as null)")
PASS_AT_MAX = 1024  # eval/pass@K is declared for K = 1, 2, 4, ... up to this (bench/engine/evaluate.py)
PASS_AT = tuple(f"eval/pass@{1 << i}" for i in range(PASS_AT_MAX.bit_length()))  # in increasing K
for _k in (1 << i for i in range(PASS_AT_MAX.bit_length())):
    declare(f"eval/pass@{_k}", kind="eval", unit="fraction",
            doc=f"pass@{_k}: the chance that {_k} of an example's eval.k samples, drawn without replacement, include a "
                f"correct one (the unbiased estimator), averaged over examples; only when eval.k >= {_k} "
                "(December 2026; earlier runs read it as null)")
# declared after the published ones, so that the columns of published records keep their order
declare("eval/n_sampled", kind="eval", unit="examples",
        doc="held-out examples that got the k samples (eval.sampled_examples, the first of eval/n); absent when k = 0")
declare("eval/kl_k1", kind="eval", unit="nats",
        doc="mean per-token k1 = log π − log π_ref to the reference (the warm start) on the evaluation's sampled "
            "answers (the first of each problem, at the evaluation's temperature); 0 at the warm start up to rounding; absent "
            "where no reference is kept (train.kl_metrics off) or k = 0")
declare("eval/kl_k3", kind="eval", unit="nats",
        doc="mean per-token k3 = e^u − 1 − u, u = log π_ref − log π, on the same tokens as eval/kl_k1")

declare("tokens", kind="stat", unit="tokens", merge="sum", doc="valid tokens of a micro-batch: the weight of token means")
declare("sequences", kind="stat", unit="sequences", merge="sum",
        doc="completions with at least one valid token: the weight of sequence means")
