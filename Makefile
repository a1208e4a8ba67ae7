PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The demo needs the package alone; tests and benchmarks install the dev tools on top.
DEMO_STAMP := $(VENV)/.installed-base

.PHONY: demo test lint bench bench-retention catalog clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP) $(DEMO_STAMP)

$(DEMO_STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q -e .
	touch $(DEMO_STAMP)

build/example.json: $(DEMO_STAMP) examples/deposition.py src/ctxbudget/simulation/deposition.py
	mkdir -p build
	$(BIN)/python examples/deposition.py > build/example.json

# The bodies the README's and the docs' commands read (request.json, meeting.json/.txt, agent.json).
build/agent.json: $(DEMO_STAMP) examples/readme_bodies.py src/ctxbudget/simulation/deposition.py
	$(BIN)/python examples/readme_bodies.py build > /dev/null

demo: build/example.json build/legal_context.json build/agent.json
	$(BIN)/ctxbudget fit build/example.json --model gpt-5 --max-context-tokens 32000
	$(BIN)/ctxbudget assemble build/legal_context.json --policy legal-review --model claude-sonnet-4-5 > build/legal_body.json

lint: $(STAMP)
	$(BIN)/ruff format --check src tests bench examples scripts
	$(BIN)/ruff check src tests bench examples scripts
	$(BIN)/mypy src

test: lint
	$(BIN)/python -m pytest

build/legal_context.json: $(DEMO_STAMP) examples/legal_context.py src/ctxbudget/simulation/deposition.py
	mkdir -p build
	$(BIN)/python examples/legal_context.py > build/legal_context.json

bench: build/example.json build/legal_context.json
	$(BIN)/python -m pip install -q -e '.[dev,bench]'
	$(BIN)/python bench/bench_fit.py build/example.json
	$(BIN)/python bench/bench_history.py
	$(BIN)/python bench/bench_assemble.py build/legal_context.json
	$(BIN)/python bench/bench_gateway.py
	$(BIN)/python bench/bench_gateway_large.py
	$(BIN)/python bench/bench_gateway_soak.py
	$(BIN)/python bench/bench_replicas.py
	$(BIN)/python bench/bench_catalog.py build/example.json
	$(BIN)/python bench/bench_startup.py
	$(BIN)/python bench/bench_conversation.py
	$(BIN)/python bench/bench_hostile.py

# make bench-retention RETENTION_ARGS=--semantic adds the semantic scorer's column (needs its extra);
# --gold adds a scorer that knows the gold passages (how much of the loss is ranking).
bench-retention: $(STAMP)
	$(BIN)/python bench/bench_retention.py $(RETENTION_ARGS)

# litellm's wheel is read as data (its model file), never installed or imported.
LITELLM_VERSION := 1.110.2
catalog: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[dev,catalog]'
	mkdir -p build/litellm
	$(BIN)/python -m pip download -q --no-deps --only-binary=:all: -d build/litellm 'litellm==$(LITELLM_VERSION)'
	$(BIN)/python scripts/gen_catalog.py build/litellm/litellm-$(LITELLM_VERSION)-*.whl
	$(BIN)/python scripts/index_catalog.py

clean:
	rm -rf $(VENV) build .mypy_cache .pytest_cache .ruff_cache
