# Set-up and entry points. Everything runs in a virtual environment this Makefile creates.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install demo test lit pytest lint bench clean

$(BIN)/abir-opt: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[all,dev]"
	touch $@

install: $(BIN)/abir-opt

demo: install
	$(BIN)/python examples/demo.py

test: install lint lit pytest

lint: install
	$(BIN)/ruff check abir test/unit bench examples

lit: install
	$(BIN)/lit -sv test/lit

pytest: install
	$(BIN)/pytest -q -n 2 test/unit

# The reference (TFP's auto_batching) is installed only for the comparison, beside the venv:
# --no-deps keeps pip from pulling a second TensorFlow next to tensorflow-cpu.
BENCH_SITE := .bench-site
$(BENCH_SITE)/.installed: $(BIN)/abir-opt
	$(BIN)/pip install --quiet --no-deps --target $(BENCH_SITE) tensorflow-probability==0.25.0 \
		tf-keras==2.21.0 decorator cloudpickle dm-tree
	touch $@

bench: $(BENCH_SITE)/.installed
	PYTHONPATH=$(BENCH_SITE) $(BIN)/python bench/run.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) $(BENCH_SITE) *.egg-info
