"""Per-run locks and stale temp directories (no training)."""
from bench.harness.locks import clean_stale_live, clean_stale_temp, is_locked, run_lock


def test_lock_is_exclusive_and_released(tmp_path):
    with run_lock(tmp_path, "abc", wait=False) as held:
        assert held and is_locked(tmp_path, "abc")
        with run_lock(tmp_path, "abc", wait=False) as second:  # another open file: refused, not blocked
            assert not second
        assert not is_locked(tmp_path, "other")
    assert not is_locked(tmp_path, "abc")
    assert (tmp_path / "locks" / "abc.lock").is_file()


def test_stale_temp_removed_only_when_unlocked(tmp_path):
    tmp = tmp_path / ".tmp"
    for name in ("dead.4242", "dead.4243", "live.77"):
        (tmp / name).mkdir(parents=True)
        (tmp / name / "steps.parquet").write_bytes(b"partial")
    with run_lock(tmp_path, "live", wait=False):
        assert clean_stale_temp(tmp_path) == 2
    assert sorted(p.name for p in tmp.iterdir()) == ["live.77"]


def test_retry_failed_removes_only_failed_records(tmp_path):
    from bench import results, suite as suites
    from bench.harness.runner import remove_failed

    cfgs = suites.load("smoke").expand()
    for cfg, status in zip(cfgs, ["failed", "diverged", "finished"]):
        meta = {"run_id": cfg.run_id, "config_id": cfg.config_id, "recipe_name": cfg.recipe.name, "status": status,
                "config": cfg.to_dict()}  # a whole record: one lacking these is corrupt (quarantined, rerun)
        results.write_run(tmp_path, cfg.run_id, meta, [], [])
    with run_lock(tmp_path, cfgs[3].run_id, wait=False):
        assert remove_failed(tmp_path, cfgs) == 1
    assert [results.is_finished(tmp_path, c.run_id) for c in cfgs] == [False, True, True, False]
    assert not any((tmp_path / ".tmp").iterdir())


def test_stale_live_of_recorded_runs_removed_but_a_failed_runs_checkpoint_kept(tmp_path):
    """A writer killed between its record's rename and the removal of its stream leaves live/<id>:
    the next suite removes it, unless the run's lock is held, it has no record, or it failed."""
    from bench import results, suite as suites

    cfgs = suites.load("smoke").expand()
    for cfg, status in zip(cfgs, ["finished", "diverged", "failed", "finished"]):
        meta = {"run_id": cfg.run_id, "config_id": cfg.config_id, "recipe_name": cfg.recipe.name, "status": status,
                "config": cfg.to_dict()}
        results.write_run(tmp_path, cfg.run_id, meta, [], [])
    ids = [c.run_id for c in cfgs] + ["norecord"]
    for rid in ids:
        results.live_dir(tmp_path, rid).mkdir(parents=True)
        (results.live_dir(tmp_path, rid) / "steps.jsonl").write_text("{}\n")
    with run_lock(tmp_path, cfgs[3].run_id, wait=False):
        assert clean_stale_live(tmp_path) == 2
    assert sorted(p.name for p in (tmp_path / "live").iterdir()) == sorted([ids[2], ids[3], "norecord"])
    assert clean_stale_live(tmp_path) == 1  # the lock released: the finished run's stream goes
