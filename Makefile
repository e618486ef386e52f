# venus-recipe: `make pipeline` and `make test` bootstrap the environments on first use, then run.
# A second call reinstalls nothing unless pyproject.toml or a lock file changed (stamp files below).

PYTHON  ?= python3
VENV    := .venv
UVENV   := .venv-unsloth
PROFILE ?= smoke
PARAMS  ?= params/$(PROFILE).yaml
PYTEST_ARGS ?=

# Nothing is ever downloaded from a model hub: the offline profiles build their model locally.
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
export PYTHONUNBUFFERED := 1
export UNSLOTH_DISABLE_STATS := 1

.PHONY: help setup setup-unsloth browser pipeline book test test-core test-unsloth lint format lab gpu gpu-check \
        gpu-check-wheels bench clean-runs

help:
	@echo "make pipeline   run all notebooks on the offline default (PROFILE=smoke|cpu|cpu-rl|cpu-teacher|cpu-easy|cpu-hard|paper|colab)"
	@echo "make test       run the test suite (default environment + the Unsloth CPU environment)"
	@echo "make lab        open JupyterLab on notebooks/"
	@echo "make gpu        build .venv from the GPU lock (CUDA torch, vLLM, Unsloth) on a GPU machine"
	@echo "make gpu-check  the GPU route in minutes on one NVIDIA GPU, nothing downloaded (docs/scaling.md)"
	@echo "make bench      run the benchmark scripts (a few minutes; BENCH_ARGS=--full for bench_sft's full size)"
	@echo "make book       render an executed run (runs/PROFILE) as a static HTML site"

# --- environments -----------------------------------------------------------------------------------------
# Default CPU environment: the package with its pinned dependencies, constrained by the full lock.
$(VENV)/.stamp-cpu: pyproject.toml requirements/cpu.lock
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	$(VENV)/bin/python -m pip install -q -c requirements/cpu.lock -e '.[test]'
	@rm -f $(VENV)/.stamp-*
	@touch $@

# Unsloth CPU environment, only for the Unsloth smoke tests (see requirements/unsloth-cpu.txt for why).
$(UVENV)/.stamp: requirements/unsloth-cpu.txt pyproject.toml
	@test -x $(UVENV)/bin/python || $(PYTHON) -m venv $(UVENV)
	$(UVENV)/bin/python -m pip install -q --upgrade pip
	$(UVENV)/bin/python -m pip install -q torch==2.13.0
	$(UVENV)/bin/python -m pip install -q -r requirements/unsloth-cpu.txt torchvision==0.28.0
	$(UVENV)/bin/python -m pip uninstall -q -y torchvision
	$(UVENV)/bin/python -m pip install -q --no-deps -e .
	@touch $@

setup: $(VENV)/.stamp-cpu
setup-unsloth: $(UVENV)/.stamp

# GPU machine: replace the default environment by the GPU lock (CUDA torch, vLLM, Unsloth).
gpu:
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	$(VENV)/bin/python -m pip install -q -r requirements/gpu.txt
	$(VENV)/bin/python -m pip install -q --no-deps -e .
	@rm -f $(VENV)/.stamp-*
	@touch $(VENV)/.stamp-gpu

# On a GPU environment (made by `make gpu`) the CPU stamp is absent: keep that environment, do not rebuild.
ENV_STAMP = $(if $(wildcard $(VENV)/.stamp-gpu),$(VENV)/.stamp-gpu,$(VENV)/.stamp-cpu)

# --- what users run ---------------------------------------------------------------------------------------
pipeline: $(ENV_STAMP)
	$(VENV)/bin/python -m venus_utils.run.pipeline --params $(PARAMS) $(PIPELINE_ARGS)

# A static HTML site of an executed run (one page per notebook, with its plots and tables, and an index of the
# key figures), in runs/$(PROFILE)/book/. Secrets are masked; nothing is executed. Run `make pipeline` first.
book: $(ENV_STAMP)
	$(VENV)/bin/python -m venus_utils.run.html_book --run runs/$(PROFILE) $(BOOK_ARGS)

test: test-core test-unsloth

# The web-demo tests drive Debian's Chromium through Playwright (never `playwright install`, which downloads
# its own browser). Installed here when missing and possible (root + apt); otherwise those tests skip.
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
	  echo "chromium is not installed: the web-demo browser tests will be skipped"

test-core: $(ENV_STAMP) browser lint
	$(VENV)/bin/python -m pytest -m "not unsloth" $(PYTEST_ARGS)

# One style for the tree ([tool.ruff] in pyproject.toml); `make format` applies it, and writes the notebooks' code
# into notebooks/code/ (venus_utils/run/notebook_code.py).
lint: $(ENV_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(ENV_STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/python -m venus_utils.run.notebook_code --write

test-unsloth: $(UVENV)/.stamp
	VENUS_UNSLOTH_ENV=1 $(UVENV)/bin/python -m pytest -m unsloth -p no:cacheprovider $(PYTEST_ARGS)

# Containers and cloud VMs run as root, which JupyterLab refuses without --allow-root.
lab: $(ENV_STAMP)
	$(VENV)/bin/jupyter lab notebooks/ $(if $(filter 0,$(shell id -u)),--allow-root)

# A few minutes at the default sizes; `make bench BENCH_ARGS=--full` runs bench_sft at the profile's size (~25 min).
bench: $(ENV_STAMP)
	@for b in benchmarks/bench_*.py; do echo "== $$b"; case $$b in *bench_sft*) a="$(BENCH_ARGS)";; *) a="";; esac; \
	  $(VENV)/bin/python $$b $$a || exit 1; done

# The GPU check (benchmarks/gpu_check.py, docs/scaling.md): on a machine with one NVIDIA GPU and python3 with CUDA
# PyTorch, transformers, peft and accelerate, and nothing it can download. `make gpu-check-wheels` (here, with the
# package registries) saves the other wheels it needs into .whl/; carried there, `make gpu-check` installs them into
# .whl/site (never over the machine's own packages) and runs the check. With a .venv (`make gpu`) it uses that
# alone.
WHEEL_PYTHON ?= 3.12
WHEEL_PLATFORMS := $(foreach p,manylinux_2_28 manylinux_2_27 manylinux_2_17 manylinux2014 manylinux1,--platform $(p)_x86_64)
gpu-check-wheels:
	$(PYTHON) -m pip download -q --no-deps --only-binary=:all: --python-version $(WHEEL_PYTHON) --implementation cp \
	  $(WHEEL_PLATFORMS) -d .whl -r requirements/gpu-check-wheels.txt
	@du -sh .whl

gpu-check:
	@py=$$(test -x $(VENV)/bin/python && echo $(VENV)/bin/python || echo $(PYTHON)); \
	if [ "$$py" = "$(PYTHON)" ] && ls .whl/*.whl >/dev/null 2>&1; then \
	  $$py -m pip install -q --no-index --no-deps --no-compile --upgrade --target .whl/site .whl/*.whl || exit 1; \
	  export PYTHONPATH="$(CURDIR)/.whl/site$${PYTHONPATH:+:$$PYTHONPATH}"; fi; \
	$$py benchmarks/gpu_check.py --device cuda $(GPU_CHECK_ARGS)

clean-runs:
	rm -rf runs/
