"""Secrets never printed, results directories are data, distinct tune seeds, text files with
file:line errors (issue 15 items 6-8)."""
import optuna
import pytest

from bench import lmeval, suite as suites
from bench.textfile import iter_lines, read_text
from bench.tune import storage
from bench.tune.sampler import tpe


# ---------------------------------------------------------------- item 6: redaction
@pytest.mark.parametrize("url, shown", [
    ("postgresql://user:s3cret@host/db", "postgresql://user:***@host/db"),
    ("postgresql://:s3cret@host/db", "postgresql://:***@host/db"),  # empty user
    ("POSTGRESQL://u:s3cret@host/db", "POSTGRESQL://u:***@host/db"),  # upper-case scheme
    ("postgresql://u:p@ss@s3cret@host/db", "postgresql://u:***@host/db"),  # '@' inside the password
    ("postgresql+psycopg2://u:s3:cr/et@host:5432/db?sslmode=require", "postgresql+psycopg2://u:***@host:5432/db?sslmode=require"),
    ("mysql://u@host/db", "mysql://u@host/db"),
    ("postgresql://host/db?user=u&password=s3cret", "postgresql://host/db?user=u&password=***"),
    ("redis://:s3cret@host:6379/0", "redis://:***@host:6379/0"),
    ("sqlite:///results/tune/x.db", "sqlite:///results/tune/x.db"),
    ("results/tune/math-small.journal", "results/tune/math-small.journal"),
    ("u:s3cret@host/db", "u:***@host/db"),  # scheme forgotten
])
def test_redact_by_parsing(url, shown):
    assert storage.redact(url) == shown
    assert "s3cret" not in storage.redact(url)


@pytest.mark.parametrize("url", ["POSTGRESQL://u:p@s3cret@127.0.0.1:1/db", "postgresql://:s3cret@127.0.0.1:1/db",
                                 "nosuchdb://u:s3cret@h/db", "u:s3cret@host/db"])
def test_storage_errors_never_print_the_password(url):
    with pytest.raises(ValueError) as e:
        storage.open_storage(url)
    assert "s3cret" not in str(e.value) and "\n" not in str(e.value)


def test_scrub_hides_secrets_in_driver_messages():
    url = "postgresql://u:s3cret@h/db"
    assert storage.scrub('FATAL: password "s3cret" rejected', url) == 'FATAL: password "***" rejected'
    assert storage.scrub("could not connect: x", "postgresql://u:x@h/db") == \
        "(details withheld: they may contain the password)"  # too short to replace safely


# ---------------------------------------------------------------- item 7: results are data
PLANT = """task: {name}
dataset_path: json
dataset_kwargs: {{data_files: {{test: /nonexistent.jsonl}}}}
output_type: generate_until
doc_to_text: "{{{{question}}}}"
doc_to_target: "{{{{answer}}}}"
process_results: !function evil.process_results
metric_list:
  - {{metric: exact_match, aggregation: mean, higher_is_better: true}}
metadata: {meta}
"""


def test_planted_function_yaml_in_results_never_executes(tmp_path):
    tdir = lmeval.tasks_dir(tmp_path)
    tdir.mkdir(parents=True)
    marker = tmp_path / "EXECUTED"
    (tdir / "evil.py").write_text(f"open({str(marker)!r}, 'w').write('pwned')\n"
                                  "def process_results(doc, resps):\n    return {'exact_match': 1.0}\n")
    (tdir / "bench_addition.yaml").write_text(PLANT.format(name="bench_addition", meta='{"version": 1.0}'))
    (tdir / "bench_evil.yaml").write_text(PLANT.format(name="bench_evil", meta='{"version": 1.0}'))
    forged = '{"version": 1.0, "bench_task": "addition", "bench_params": {"difficulty": "easy"}}'
    (tdir / "bench_addition_deadbeef.yaml").write_text(PLANT.format(name="bench_addition_deadbeef", meta=forged))
    private = tmp_path / "private"
    private.mkdir()
    tm = lmeval.prepare_tasks(["bench_addition"], private, tmp_path)
    from lm_eval.tasks import get_task_dict

    task = get_task_dict(["bench_addition"], tm)["bench_addition"]  # loads the YAML, imports its !function
    assert task.config.process_results is lmeval.process_results  # bench's verifier, via the private bench_score.py
    assert not marker.exists()
    with pytest.raises(ValueError, match="bench_evil.yaml: not a task file bench exported"):
        lmeval.prepare_tasks(["bench_evil"], private, tmp_path)
    with pytest.raises(ValueError, match="edited"):
        lmeval.prepare_tasks(["bench_addition_deadbeef"], private, tmp_path)
    assert not marker.exists()
    assert sorted(p.name for p in private.iterdir()) == ["bench_addition.jsonl", "bench_addition.yaml", "bench_score.py"]


# ---------------------------------------------------------------- item 8: tune seeds
def _sample(study) -> dict:
    t = study.ask()
    p = {"lr": t.suggest_float("lr", 1e-5, 1e-2, log=True), "eps": t.suggest_float("eps", 0.1, 0.4)}
    study.tell(t, p["lr"] * 100 + p["eps"])
    return p


def test_two_processes_on_one_journal_sample_distinct_parameters(tmp_path):
    def open_(path):
        return optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(path)))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url = tmp_path / "s.journal"
    optuna.create_study(study_name="s", storage=open_(url), direction="maximize")
    # two `bench tune` processes, each worker 0 of its own pool: the same tune seed
    a = optuna.load_study(study_name="s", storage=open_(url), sampler=tpe(2, 0))
    b = optuna.load_study(study_name="s", storage=open_(url), sampler=tpe(2, 0))
    pa, pb = [], []
    for _ in range(4):
        pa.append(_sample(a))
        pb.append(_sample(b))
    assert all(x != y for x in pa for y in pb)
    # one worker alone: the same sequence on every rerun
    seqs = []
    for run in range(2):
        st = optuna.create_study(study_name="r", storage=open_(tmp_path / f"r{run}.journal"), direction="maximize",
                                 sampler=tpe(2, 0))
        seqs.append([_sample(st) for _ in range(4)])
    assert seqs[0] == seqs[1]
    # and the old scheme really repeated: TPE with one seed per process gives the same first draw
    old = [optuna.samplers.TPESampler(n_startup_trials=2, seed=0) for _ in range(2)]
    draws = [_sample(optuna.create_study(sampler=s)) for s in old]
    assert draws[0] == draws[1]


# ---------------------------------------------------------------- item 8: text files
def test_suite_files_non_utf8_long_lines_and_size_give_file_line(tmp_path):
    good = suites.resolve("smoke").read_text()
    bad = tmp_path / "latin1.toml"
    bad.write_bytes(good.encode().replace(b"\n", b"\n# caf\xe9\n", 3))
    with pytest.raises(ValueError, match=rf"{bad}:2:6: not UTF-8 text \(byte 0xe9\)"):
        suites.load(bad)
    long = tmp_path / "long.toml"
    long.write_text(good + "# " + "x" * 30_000 + "\n")
    n = len(good.splitlines()) + 1
    with pytest.raises(ValueError, match=rf"{long}:{n}: a line of 30,002 characters"):
        suites.load(long)
    huge = tmp_path / "huge.toml"
    huge.write_text(good + ("# x\n" * (5 << 18)))
    with pytest.raises(ValueError, match="over the 4,194,304-byte limit"):
        suites.load(huge)
    assert read_text(suites.resolve("smoke")) == good


def test_iter_lines_streams_with_a_cap(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_bytes(b'{"a": 1}\n' + b'{"b": "' + b"x" * 5000 + b'"}\n' + b'{"c": "\xff"}\n')
    it = iter_lines(p, max_line_bytes=100)
    assert next(it) == (1, '{"a": 1}')
    with pytest.raises(ValueError, match=rf"{p}:2: a line over 100 bytes"):
        next(it)
    with pytest.raises(ValueError, match=rf"{p}:3:8: not UTF-8"):
        list(iter_lines(p, max_line_bytes=10_000))
