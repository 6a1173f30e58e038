"""Tasks: problems with worked solutions, seeded disjoint splits and a 0/1 verifier.

    from bench import tasks
    tasks.names()                                   # ['addition', 'base_conversion', ...]
    task = tasks.get("addition")                    # the task's default difficulty
    task = tasks.get("addition", difficulty="hard", max_digits=8)   # a preset, then overrides
    task.name                                       # "addition"
    task.config                                     # frozen dataclass: every result-changing
                                                    # parameter, a seed and a code `version`
    task.split("test")                              # held-out eval set, config.test_size items
    task.split("train", n=10_000)                   # a seeded stream; disjoint from test by prompt
    task.score(completion, example)                 # 1.0 right final answer, else 0.0; never raises
    task.max_new_tokens                             # generation cap that fits worked solutions
    tasks.extract_answer("...\\n#### 42")           # "42": the shared answer-format parser
    tasks.difficulties("addition")                  # {"easy": {...}, "medium": {...}, ...}

Generated tasks: addition, verbose_addition, multiplication (by one digit), chain_sum, countdown,
gcd (Euclid), base_conversion (decimal to base 2..9), number_sorting (selection) and
spell_backward; data tasks (gsm8k, ...) come from `dataset.py`.

An `Example` is a frozen (prompt, answer, solution, meta). Prompts and solutions are plain
strings: the engine adds the chat template and EOS. `solution` is the whole completion a
model should learn in the warm start: a scratchpad, then a final line `#### {answer}`.
Verifiers read the answer after the last `####` (see `answer.py`). Unknown task names,
difficulties or parameters raise ConfigError (a ValueError) listing the choices and the closest match.

A new task is a new module here: subclass `Task` (or `GeneratedTask` for an endless
generator), give it a frozen `Config` deriving `TaskConfig`, presets for "easy", "medium"
and "hard", and decorate it with `@register`; every module of this package is imported below,
so it registers itself (CONTRIBUTING.md has a worked example).
"""

from .answer import MARKER, extract_answer, parse_int
from .base import Example, GeneratedTask, Task, TaskConfig
from .registry import difficulties, get, names, register, task_class, warm_start_steps

import importlib as _importlib
import pkgutil as _pkgutil

for _module in sorted(m.name for m in _pkgutil.iter_modules(__path__)):  # each task module registers itself
    _importlib.import_module(f"{__name__}.{_module}")

__all__ = ["MARKER", "Example", "GeneratedTask", "Task", "TaskConfig", "difficulties",
           "extract_answer", "get", "names", "parse_int", "register", "task_class", "warm_start_steps"]
