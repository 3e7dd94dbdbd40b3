# The two commands of rtlab; both run the idempotent bootstrap first.
#   make demo            the main job on the virtual rack (FULL=1: the whole matrix)
#   make demo PIPELINE=1 the GitLab pipeline, run locally on the virtual rack
#                        (KERNEL=build: its build stage compiles the four kernels;
#                        TIER=gate: the test stage as a lab's push runs it;
#                        TUNE=1: as a scheduled pipeline, whose tune job proposes
#                        thresholds from the demos' history to a stand-in GitLab)
#   make demo CAMPAIGN=hardening  a campaign of campaigns/ on the virtual rack: every
#                        variant's kernel (built: hardening and preemption compile theirs,
#                        10-20 min each on two cores from cold; debian takes Debian's),
#                        images, short runs (DURATION, default 10 s per case), the report
#                        (PIPELINE=1 CAMPAIGN=debian: as a pipeline started by hand)
#   make test            lint + all tests of rtlab itself, incl. the virtual rack
#                        (FULL=1: also the slow fault tests marked `full`)
#   make test-images     docker/ci and docker/exporter built here as a lab without a
#                        registry mirror builds them, each proved doing its job
#                        (tests/images; docs/images.md); .ci/run runs it after make test
#   make test-kernel     the i.MX6Q preempt-rt kernel built from source, booted on the
#                        virtual rack, one option changed, rebuilt and booted again
#                        (slow: 8-15 min on two cores from cold, under 2 with a warm
#                        build folder; not part of `make test`)
.PHONY: demo test test-images test-kernel bootstrap lint

VENV := .venv/bin

bootstrap:
	./scripts/bootstrap.sh

lint: bootstrap
	$(VENV)/ruff check rtlab tests bench conftest.py
	$(VENV)/lint-imports
	$(VENV)/rtlab thresholds check
	$(VENV)/rtlab env check
	$(VENV)/rtlab campaign check
	$(VENV)/rtlab lava validate jobs
	$(VENV)/check-jsonschema --builtin-schema vendor.gitlab-ci .gitlab-ci.yml
	$(VENV)/hadolint --config docker/hadolint.yaml docker/ci/Dockerfile docker/exporter/Dockerfile docker/lab/results-db/Dockerfile
	$(VENV)/mkdocs build --strict --quiet

# FULL=1: also the slow virtual-rack tests marked `full` (pyproject.toml), which make test
# leaves out to stay within its 45 minutes (docs/developer-guide.md)
test: bootstrap lint
	$(VENV)/pytest -ra --durations=25 $(if $(FULL),,-m "not full")

# tests/images and tests/engine are outside pytest's testpaths too. The engine is stopped
# and its network changes undone whatever the outcome; then tests/engine starts and stops
# one of its own beside bridges of the host's that rtlab did not make.
test-images: bootstrap
	./scripts/bootstrap.sh container-tools
	./scripts/container-host.sh start && ./scripts/container-host.sh base-image \
	    && ./scripts/container-host.sh build && $(VENV)/pytest -ra --durations=10 tests/images; \
	status=$$?; ./scripts/container-host.sh stop; [ $$status -eq 0 ] || exit $$status; \
	$(VENV)/pytest -ra tests/engine

# tests/kernel is outside pytest's testpaths; -s shows the build's progress as it runs.
# (The bootstrap's kernel-source step installs the cross toolchain and prepares the tree.)
test-kernel: bootstrap
	$(VENV)/pytest -s -ra tests/kernel

demo: bootstrap
	$(if $(PIPELINE),$(VENV)/python bench/pipeline_times.py --keep out/pipeline-demo $(if $(KERNEL),--kernel $(KERNEL)) $(if $(TIER),--tier $(TIER)) $(if $(TUNE),--tune) $(if $(CAMPAIGN),--campaign $(CAMPAIGN)),$(if $(CAMPAIGN),$(VENV)/rtlab campaign run $(CAMPAIGN) --duration $(or $(DURATION),10),$(VENV)/rtlab demo $(if $(FULL),--full)))
