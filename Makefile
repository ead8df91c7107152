# Two commands for everything: `make run` and `make test` (see README.md). `make check` is the
# fast tier for the edit-test loop: lint and the tests that load no model and start no process.
# Both create .venv when missing and reinstall only when pyproject.toml changed (hash stamps).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HASH := $(shell $(PYTHON) -c "import hashlib; print(hashlib.sha256(open('pyproject.toml', 'rb').read()).hexdigest()[:16])")
RUN_STAMP := $(VENV)/.stamp-run-$(HASH)
TEST_STAMP := $(VENV)/.stamp-test-$(HASH)
PACKAGE_STAMP := $(VENV)/.stamp-package-$(HASH)
PYTEST_ARGS ?=
# The tests `make check` runs: none that loads a model, starts a child process, needs the export
# toolkit, soaks or is slow (the markers in tests/costs.py, which keeps them honest).
FAST_TIER := not model and not subprocess and not export and not soak and not slow

.PHONY: run test check lint typecheck pytest demo-model tool-model package clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The chat runtime only: openvino, openvino-genai, openvino-tokenizers, Qt.
$(RUN_STAMP): | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

# Runtime + export toolkit (optimum-intel, torch) + dev tools + PyInstaller (a test builds the
# bundle once).
$(TEST_STAMP): | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[export,dev,package]'
	touch $@ $(RUN_STAMP) $(PACKAGE_STAMP)

# Runtime + PyInstaller (the `package` extra), for building the bundle.
$(PACKAGE_STAMP): | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[package]'
	touch $@ $(RUN_STAMP)

run: $(RUN_STAMP)
	$(BIN)/qwen-mtp-desktop

lint: $(TEST_STAMP)
	$(BIN)/ruff check qwen_mtp_desktop tests benchmarks packaging
	$(BIN)/lint-imports

typecheck: $(TEST_STAMP)
	$(BIN)/mypy

pytest: $(TEST_STAMP)
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest --durations=25 $(PYTEST_ARGS)

# Everything (CI runs this): lint, types, the whole suite, and the 25 slowest tests at the end.
test: lint typecheck pytest

# The fast tier, under 3 minutes: ruff, the import contracts and the cheap tests.
check: lint
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -q -m "$(FAST_TIER)" $(PYTEST_ARGS)

# Rebuild the bundled demo model (trained checkpoint + its OpenVINO export) from scratch.
demo-model: $(TEST_STAMP)
	rm -rf resources/demo-model
	$(BIN)/qwen-mtp-desktop demo-model build resources/demo-model/checkpoint \
		--train-steps $(DEMO_TRAIN_STEPS) --seed 0 \
		--export-to resources/demo-model/openvino --weight-format $(DEMO_WEIGHT_FORMAT)

DEMO_TRAIN_STEPS ?= 1600
DEMO_WEIGHT_FORMAT ?= fp16

# Rebuild the tool model the tests call tools with (tests/tool-model): the same builder, trained
# on tool-calling chats; it fails when its self-check answers a held-out question wrongly. Only
# the export (and the build record) is committed; the checkpoint stays in .cache.
tool-model: $(TEST_STAMP)
	rm -rf tests/tool-model $(TOOL_CHECKPOINT)
	$(BIN)/qwen-mtp-desktop demo-model build $(TOOL_CHECKPOINT) --tools \
		--train-steps $(TOOL_TRAIN_STEPS) --seed 0 \
		--export-to tests/tool-model --weight-format fp16
	cp $(TOOL_CHECKPOINT)/qwen_mtp_build.json tests/tool-model/

TOOL_TRAIN_STEPS ?= 1300
TOOL_CHECKPOINT := .cache/tool-model-checkpoint

# The one-folder bundle for this OS (dist/qwen-mtp-desktop), its --self-test, its size, and the
# OS's installer (Linux: dist/qwen-mtp-desktop-VERSION-linux-ARCH.tar.gz). See packaging/README.md.
package: $(PACKAGE_STAMP)
	$(BIN)/python packaging/build.py $(PACKAGE_ARGS)

PACKAGE_ARGS ?=

clean:
	rm -rf $(VENV) .cache .mypy_cache .ruff_cache .pytest_cache build dist *.egg-info
