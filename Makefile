# The two commands of rtlab; both run the idempotent bootstrap first.
#   make demo            the main job on the virtual rack (FULL=1: the whole matrix)
#   make test            lint + all tests of rtlab itself, incl. the virtual rack
.PHONY: demo test bootstrap lint

VENV := .venv/bin

bootstrap:
	./scripts/bootstrap.sh

lint: bootstrap
	$(VENV)/ruff check rtlab tests bench conftest.py
	$(VENV)/rtlab thresholds check
	$(VENV)/rtlab env check

test: bootstrap lint
	$(VENV)/pytest -ra

demo: bootstrap
	$(VENV)/rtlab demo $(if $(FULL),--full)
