# Two commands for a fresh clone: `make demo` and `make test`. Both create .venv when missing.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
DEMO_MODEL := models/demo-en-zh
DEMO_ONNX := build/demo-en-zh.onnx

.PHONY: demo test lint clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[export,dev]"
	touch $@

demo: $(VENV)/.installed
	mkdir -p build
	$(PY) -m graphgen export $(DEMO_MODEL) -o $(DEMO_ONNX)
	@echo "--- translating with $(DEMO_ONNX) (graphgen translate: onnxruntime only, no torch) ---"
	@printf '%s\n' \
	  ">>cmn_Hans<< I have three cats." \
	  ">>cmn_Hant<< My sister bought 12 books yesterday." \
	  ">>cmn_Hans<< The meeting starts at 9:30 in the morning." \
	  ">>cmn_Hans<< Today is March 5, 2024." \
	  ">>cmn_Hans<< The number is 4,205." \
	  > build/demo-input.txt
	@$(PY) -m graphgen translate $(DEMO_ONNX) < build/demo-input.txt > build/demo-output.txt
	@paste -d '\t' build/demo-input.txt build/demo-output.txt | sed 's/\t/  →  /'

test: $(VENV)/.installed
	$(PY) -m pytest -q

lint: $(VENV)/.installed
	$(PY) -m ruff check graphgen custom_ops tests models
	$(PY) -m ruff format --check graphgen custom_ops tests models

clean:
	rm -rf build
