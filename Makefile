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
SUITE ?= math-small

.PHONY: setup suite test test-slow clean bench-speed

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q "$(TORCH_SPEC)" -e ".[$(EXTRAS)]"
	@$(PIP) uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
	@$(PY) -c "import torch; print('torch', torch.__version__, 'cuda' if torch.cuda.is_available() else 'cpu')"
	touch $@

suite: setup
	$(VENV)/bin/bench suite $(SUITE)

test: setup
	$(PY) -m pytest -q

test-slow: setup  # tests marked @pytest.mark.slow (none at present: exit 5, "no tests", is fine)
	$(PY) -m pytest -q -m slow || test $$? -eq 5

clean:
	rm -rf $(VENV) .pytest_cache

bench-speed: setup
	$(PIP) install -q 'trl>=1.0'
	$(PY) benchmarks/engine_speed.py
