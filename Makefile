# The two commands of rtlab; both run the idempotent bootstrap first.
#   make demo            the main job on the virtual rack (FULL=1: the whole matrix)
#   make demo PIPELINE=1 the GitLab pipeline, run locally on the virtual rack
#   make test            lint + all tests of rtlab itself, incl. the virtual rack
.PHONY: demo test bootstrap lint

VENV := .venv/bin

bootstrap:
	./scripts/bootstrap.sh

lint: bootstrap
	$(VENV)/ruff check rtlab tests bench conftest.py
	$(VENV)/rtlab thresholds check
	$(VENV)/rtlab env check
	$(VENV)/check-jsonschema --builtin-schema vendor.gitlab-ci .gitlab-ci.yml
	$(VENV)/hadolint --config docker/hadolint.yaml docker/ci/Dockerfile docker/exporter/Dockerfile

test: bootstrap lint
	$(VENV)/pytest -ra

demo: bootstrap
	$(if $(PIPELINE),$(VENV)/python bench/pipeline_times.py --keep out/pipeline-demo,$(VENV)/rtlab demo $(if $(FULL),--full))
