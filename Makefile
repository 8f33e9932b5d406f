# Two entry points: `make run` (`conveyor serve` on the embedded SQLite engine; it prints where to
# point a client; `make run APP=myapp:app HANDLERS=myapp.consumers` also runs that code's push
# consumers, and nothing else) and `make test`
# (lint, type check, the whole suite). Each bootstraps its own tools: a pinned uv in .tools/,
# then the locked environment in .venv/, with every extra (server, postgres, features).
PYTHON ?= python3
UV_VERSION := 0.13.9
UV := .tools/bin/uv
VENV := .venv
export UV_PROJECT_ENVIRONMENT := $(VENV)

.PHONY: run test lint typecheck pytest bench clean

$(UV):
	$(PYTHON) -m venv .tools
	.tools/bin/pip install --quiet "uv==$(UV_VERSION)"

$(VENV)/.synced: $(UV) uv.lock pyproject.toml hatch_build.py src/conveyor/mmapsync/_atomics.c
	$(UV) sync --frozen --quiet --all-extras
	touch $@

# The code the server runs: conveyor.App objects (module:attribute) and handler modules.
APP ?=
HANDLERS ?=

run: $(VENV)/.synced
	$(VENV)/bin/conveyor serve --dev-token local $(foreach a,$(APP),--worker $(a)) $(foreach m,$(HANDLERS),--handlers $(m))

lint: $(VENV)/.synced
	$(VENV)/bin/ruff check src tests benchmarks examples hatch_build.py
	$(VENV)/bin/ruff format --check src tests benchmarks examples hatch_build.py

typecheck: $(VENV)/.synced
	$(VENV)/bin/mypy

# The suite runs on PYTEST_WORKERS processes (pytest-xdist), each test module whole on one of them
# (its module-scoped servers and clusters are set up once); PYTEST_WORKERS=0 runs it in this process.
PYTEST_WORKERS ?= 4

pytest: $(VENV)/.synced
	$(VENV)/bin/pytest -q -n $(PYTEST_WORKERS) --dist loadfile

test: lint typecheck pytest

# The benchmarks' peers (lmdb, redis) and py-spy live in the `bench` group, which the plain sync
# behind .synced would uninstall: bench syncs with it instead.
bench: $(UV)
	$(UV) sync --frozen --quiet --all-extras --group bench
	$(VENV)/bin/python benchmarks/run_all.py

clean:
	rm -rf .tools $(VENV) .pytest_cache .mypy_cache .ruff_cache
