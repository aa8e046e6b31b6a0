# Set-up and entry points. Everything runs in a virtual environment this Makefile creates.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install demo test test-full lit pytest lint fuzz bench bench-nuts bench-suite bench-samplers bench-lanes bench-grad clean

$(BIN)/abir-opt: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[all,dev]"
	touch $@

install: $(BIN)/abir-opt

demo: install
	$(BIN)/python examples/demo.py

# `make test` runs every check except the `full` pytest marker and the lit tests that REQUIRE full;
# `make test-full` (which CI's .ci/run runs after it) runs those: statistical and long randomized
# sweeps and the rest of cross-products of cases and backends (the rule: test/unit/conftest.py),
# e.g. make test-full FULL_ENV=ABIR_FULL=1 for the fuzzer's 200 programs on every backend instead
# of its NumPy-only sample.
test: install lint lit pytest

FULL_ENV ?=
test-full: install
	$(BIN)/lit -sv --param full=1 --filter '\.full\.' test/lit
	$(FULL_ENV) $(BIN)/pytest -q -n 2 --dist loadfile -m full test/unit

# ruff, and import-linter's contracts on abir's layers (pyproject.toml, docs/architecture.md)
lint: install
	$(BIN)/ruff check abir test/unit bench examples
	$(BIN)/lint-imports --no-cache

lit: install
	$(BIN)/lit -sv test/lit

# make test compiles without LLVM's optimizations of XLA's CPU code (compiling is most of its time;
# docs/performance.md, "The test suite's compilations"); make test-full at the level users run.
TEST_XLA_FLAGS := --xla_backend_optimization_level=0
pytest: install
	XLA_FLAGS="$$XLA_FLAGS $(TEST_XLA_FLAGS)" $(BIN)/pytest -q -n 2 --dist loadfile test/unit

# Differential fuzzing: random programs batched on every backend against plain Python, failures
# printed as minimal reproducible programs, e.g. make fuzz FUZZ_ARGS="--count 200 --seed 3 --backends numpy"
FUZZ_ARGS ?= --count 1000 --seed 0
fuzz: install
	$(BIN)/python -m abir.testing.fuzz $(FUZZ_ARGS)

# The reference (TFP's auto_batching) is installed only for the comparison, beside the venv:
# --no-deps keeps pip from pulling a second TensorFlow next to tensorflow-cpu.
BENCH_SITE := .bench-site
$(BENCH_SITE)/.installed: $(BIN)/abir-opt
	$(BIN)/pip install --quiet --no-deps --target $(BENCH_SITE) tensorflow-probability==0.25.0 \
		tf-keras==2.21.0 decorator cloudpickle dm-tree
	touch $@

bench: $(BENCH_SITE)/.installed
	PYTHONPATH=$(BENCH_SITE) $(BIN)/python bench/run.py $(BENCH_ARGS)

# BlackJAX (the library NUTS bench/nuts.py compares with) and matplotlib (its --figure) go into the
# same site, also with --no-deps and every dependency the venv lacks named here: resolving them
# would put a second NumPy (and JAX) into the site, ahead of the venv's on PYTHONPATH.
$(BENCH_SITE)/.installed-nuts: $(BIN)/abir-opt
	$(BIN)/pip install --quiet --no-deps --target $(BENCH_SITE) blackjax==1.7.1 optax==0.2.8 \
		matplotlib==3.11.2 contourpy==1.3.3 cycler==0.12.1 fonttools==4.68.0 kiwisolver==1.5.1 \
		pillow==13.0.0 pyparsing==3.3.3 python-dateutil==4.0.0 tzdata==2026.6
	touch $@

# e.g. make bench-nuts NUTS_ARGS="--batch 64 --figure docs/nuts_bench.png"
bench-nuts: $(BENCH_SITE)/.installed-nuts
	PYTHONPATH=$(BENCH_SITE) $(BIN)/python bench/nuts.py $(NUTS_ARGS)

# e.g. make bench-suite SUITE_ARGS="--quick --backends numpy,tf" (no figure: the default arguments write it)
# TFP (Collatz, NUTS on TF) comes from the same site
SUITE_ARGS ?= --figure docs/bench_suite.png
bench-suite: $(BENCH_SITE)/.installed $(BENCH_SITE)/.installed-nuts
	PYTHONPATH=$(BENCH_SITE) $(BIN)/python bench/suite.py $(SUITE_ARGS)

# e.g. make bench-lanes LANES_ARGS="--quick --backends jax,numpy"
LANES_ARGS ?=
bench-lanes: $(BIN)/abir-opt
	$(BIN)/python bench/lanes.py $(LANES_ARGS)

# e.g. make bench-grad GRAD_ARGS="--sizes 64 --repeats 3" (optax comes with the venv)
GRAD_ARGS ?=
bench-grad: $(BIN)/abir-opt
	$(BIN)/python bench/grad.py $(GRAD_ARGS)

# inference-gym (the samplers bench's targets: data and ground truth from its NumPy substrate, which
# needs the TFP of .installed) and NumPyro (a system it compares with), again --no-deps with the
# dependencies the venv lacks named: multipledispatch. ArviZ 1.x needs Python 3.12, so the bench
# computes bulk ESS and R-hat itself (bench/sampler_diagnostics.py).
$(BENCH_SITE)/.installed-samplers: $(BENCH_SITE)/.installed $(BENCH_SITE)/.installed-nuts
	$(BIN)/pip install --quiet --no-deps --target $(BENCH_SITE) inference-gym==0.0.5 numpyro==0.22.0 \
		multipledispatch==1.0.0
	touch $@

# e.g. make bench-samplers SAMPLERS_ARGS="--quick"; the figure from a full run: SAMPLERS_ARGS="--figure"
bench-samplers: $(BENCH_SITE)/.installed-samplers
	PYTHONPATH=$(BENCH_SITE) $(BIN)/python bench/samplers.py $(SAMPLERS_ARGS)

clean:
	rm -rf $(VENV) $(BENCH_SITE) *.egg-info
