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

bench: install
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) *.egg-info
