# flagbot: `make test` on a fresh machine installs what it needs and runs every check.
# `make test-unit` runs the fast tier only.

VENV        ?= .venv
PYTHON      ?= python3
PY          := $(VENV)/bin/python
STAMP       := $(VENV)/.flagbot-installed
# Debian packages the tests use; installed with apt-get only when missing (root needed then).
# chromium, chromium-driver, fonts-noto-color-emoji: the stand-in's page in headless Chromium.
DEB_PACKAGES := postgresql openssh-server sudo systemd-container iproute2 chromium chromium-driver fonts-noto-color-emoji

.PHONY: test test-unit test-component test-integration lint typecheck deps venv clean bench screenshot

venv: $(STAMP)

$(STAMP): pyproject.toml lab/pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]' -e ./lab  # the product, and the lab (twin, testbed, stand-in, demo)
	@touch $(STAMP)

deps:
	@./scripts/ensure-debian-packages $(DEB_PACKAGES)

lint: venv
	$(VENV)/bin/ruff check bot lab tests bench tools
	$(VENV)/bin/ruff format --check bot lab tests bench tools
	$(VENV)/bin/lint-imports  # the layer contracts in pyproject.toml ([tool.importlinter])

typecheck: venv
	$(VENV)/bin/mypy

test: deps venv lint typecheck
	$(VENV)/bin/pytest -q

test-unit: venv
	$(VENV)/bin/pytest -q -m unit

test-component: deps venv
	$(VENV)/bin/pytest -q -m component

test-integration: deps venv
	$(VENV)/bin/pytest -q -m integration

# The seeds' incident end to end on the two-node twin, through the local Slack stand-in (as root;
# docs/demo.md). Stays up until Ctrl-C; `make demo ARGS=--headless` prints the thread and exits.
.PHONY: demo
demo: deps venv
	$(VENV)/bin/flagbot demo $(ARGS)

bench: venv
	$(PY) bench/parse_throughput.py

# The README's picture: the demo's try thread on the stand-in's page (headless Chromium, as root:
# the demo boots testbed instance 218), reduced to 256 colours. `tools/screenshot_thread.py` takes
# a quicker one of a sample thread without the testbed.
screenshot: deps venv
	$(VENV)/bin/flagbot demo --headless --instance 218 --screenshot state/artifacts/demo-thread.png
	$(PY) -c 'from PIL import Image; Image.open("state/artifacts/demo-thread.png").convert("RGB").quantize(256).save("docs/images/slack-thread.png", optimize=True)'

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis *.egg-info
