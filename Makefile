# Commands for a fresh clone: `make demo`, `make test` and `make bench`. Each creates .venv when missing;
# `make bench` also creates .venv-optimum (optimum-onnx needs transformers 4.x, graphgen's export 5.x).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
DEMO_MODEL := models/demo-en-zh
DEMO_ONNX := build/demo-en-zh.onnx

OPTIMUM_VENV ?= .venv-optimum

.PHONY: demo test examples python-arm64 bench lint clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	@# custom_ops/ installs as graphgen.custom_ops, so setuptools installs the package in editable mode
	@# through a finder and says so in a UserWarning at every install: silenced, a newcomer's first
	@# command stays quiet.
	PYTHONWARNINGS=ignore::UserWarning $(PY) -m pip install --quiet -e ".[export,dev,ray]"
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
	@$(PY) -m graphgen translate -q $(DEMO_ONNX) < build/demo-input.txt > build/demo-output.txt
	@paste -d '\t' build/demo-input.txt build/demo-output.txt | sed 's/\t/  →  /'

test: $(VENV)/.installed
	$(PY) -m pytest -q
	$(MAKE) examples

# The examples in other languages, each run by its own test runner against what the Python path
# gives (fixtures from examples/fixtures.py), all on the default file (tokenizer in standard ONNX
# ops) with nothing but ONNX Runtime: Java (Maven, JUnit), Node (node --test: onnxruntime-node,
# onnxruntime-web, and a page in headless Chromium), Rust (cargo test: the ort crate), Go (go
# test: onnxruntime_go) and C/C++ (ONNX Runtime's C API; its header comes with the onnxruntime_go
# module, the only package here that ships it), the last three on the ONNX Runtime library of the
# Python wheel; the C example's command line also on Linux/ARM64, emulated by QEMU.
EXAMPLES := build/examples
ORT_LIB = $$($(CURDIR)/$(PY) -c 'import onnxruntime, pathlib; print(next((pathlib.Path(onnxruntime.__file__).parent / "capi").glob("libonnxruntime.so.*")))')
ORT_INCLUDE = $$(go mod download github.com/yalue/onnxruntime_go && go list -m -f '{{.Dir}}' github.com/yalue/onnxruntime_go)
CHROMIUM ?= /usr/bin/chromium
# ONNX Runtime 1.17.3's library (graphgen's oldest runtime), which the C example is also run on: the
# Maven jar's copy (its Python wheel has none).
ORT_OLDEST := build/ort-1.17.3/libonnxruntime.so
ORT_OLDEST_ARM64 := build/ort-1.17.3/linux-aarch64/libonnxruntime.so
# The C example also runs on Linux/ARM64 under QEMU (examples/c/Makefile, test-arm64), on
# onnxruntime-node's linux-aarch64 library (1.31.1, installed for the Node tests) and 1.17.3's.
ORT_LIB_ARM64 := examples/node/node_modules/onnxruntime-node/bin/napi-v6/linux/arm64/libonnxruntime.so.1
QEMU_ARM64 := /usr/bin/qemu-aarch64
ARM64_TOOLS := /usr/bin/aarch64-linux-gnu-gcc $(QEMU_ARM64)
# the emulated cores (examples/c/Makefile says which kernels each makes ONNX Runtime choose)
ARM64_CPUS := cortex-a53 neoverse-n1 max

examples: $(VENV)/.installed $(CHROMIUM) $(ORT_OLDEST) $(ORT_OLDEST_ARM64) $(ARM64_TOOLS)
	$(PY) examples/fixtures.py $(EXAMPLES)
	cd examples/java && mvn -B --no-transfer-progress test
	cd examples/node && npm ci --ignore-scripts --no-audit --no-fund && CHROMIUM=$(CHROMIUM) npm test
	cd examples/rust && ORT_LIBRARY="$(ORT_LIB)" GRAPHGEN_FIXTURES=$(CURDIR)/$(EXAMPLES) cargo test --test demo
	cd examples/go && ORT_LIBRARY="$(ORT_LIB)" GRAPHGEN_FIXTURES=$(CURDIR)/$(EXAMPLES) CGO_ENABLED=1 go test ./...
	cd examples/go && $(MAKE) -C ../c test ORT_INCLUDE="$(ORT_INCLUDE)" ORT_LIBRARY="$(ORT_LIB)" \
	  ORT_LIBRARY_OLDEST=$(CURDIR)/$(ORT_OLDEST) GRAPHGEN_FIXTURES=$(CURDIR)/$(EXAMPLES)
	cd examples/go && $(MAKE) -C ../c test-arm64 ORT_INCLUDE="$(ORT_INCLUDE)" ORT_LIBRARY_ARM64=$(CURDIR)/$(ORT_LIB_ARM64) \
	  ARM64_CPUS="$(ARM64_CPUS)" QEMU_ARM64=$(QEMU_ARM64) ORT_LIBRARY_ARM64_OLDEST=$(CURDIR)/$(ORT_OLDEST_ARM64) GRAPHGEN_FIXTURES=$(CURDIR)/$(EXAMPLES)
	$(MAKE) python-arm64

# graphgen's own command line (`graphgen translate`, Python's `Translator`) on Linux/ARM64 (AWS
# Graviton, Raspberry Pi OS), emulated like the C example: Debian's arm64 Python 3.11, its packages
# unpacked into a folder, runs graphgen's wheel built from this tree and installed with the aarch64
# wheels pip resolves for it (numpy, onnxruntime, onnxruntime-extensions; on the newest runtime also
# the torch-free export's transformers, onnx and sentencepiece). What the C run does not cover: ONNX
# Runtime's Python build for aarch64, graphgen's runtime code there (the file mapped from itself on
# the newest runtime; read whole on 1.20, Python's floor), the wheel's own dependencies on aarch64,
# and the export, whose file must be the bytes the x86 export writes. The C example's /proc/cpuinfo shim is preloaded (ONNX Runtime 1.32
# crashes under qemu-user 7.2 without it). The fixtures' strings are Python's on x86: `make
# python-arm64` runs after `make examples` has written them.
ARM64_PYTHON := build/arm64-python
ARM64_PYTHON_DEBS := python3.11-minimal libpython3.11-minimal libpython3.11-stdlib libc6 libgcc-s1 libstdc++6 \
  zlib1g libexpat1 libffi8 libssl3 liblzma5 libbz2-1.0 libcrypt1 libuuid1
ARM64_WHEELS := --platform manylinux2014_aarch64 --platform manylinux_2_28_aarch64 --python-version 3.11 \
  --implementation cp --abi cp311 --only-binary=:all:
ARM64_SHIM := examples/c/build/arm64/emulated_cpuinfo.so
# the ONNX Runtime of each site: Python's floor, and the newest (.venv's; expanded when a recipe
# runs, after .venv exists)
ORT_PYTHON_oldest := 1.20.1
ORT_PYTHON_newest = $(shell $(PY) -c 'import onnxruntime; print(onnxruntime.__version__)')
comma := ,
GRAPHGEN_SOURCES := pyproject.toml $(shell find graphgen custom_ops -type f -not -path '*/__pycache__/*')

$(ARM64_PYTHON)/root/.unpacked: | $(ARM64_TOOLS)
	dpkg --print-foreign-architectures | grep -qx arm64 || { dpkg --add-architecture arm64 && apt-get update -qq; }
	rm -rf $(@D) $(ARM64_PYTHON)/debs && mkdir -p $(ARM64_PYTHON)/debs
	cd $(ARM64_PYTHON)/debs && apt-get download -qq -o APT::Sandbox::User=root $(ARM64_PYTHON_DEBS:=:arm64)
	for deb in $(ARM64_PYTHON)/debs/*.deb; do dpkg-deb -x $$deb $(@D) || exit 1; done
	rm -r $(ARM64_PYTHON)/debs && touch $@

# built from a copy, so that setuptools' build/lib, which keeps files deleted since, is a fresh one
$(ARM64_PYTHON)/wheel/.built: $(VENV)/.installed $(GRAPHGEN_SOURCES)
	rm -rf $(@D) $(ARM64_PYTHON)/source && mkdir -p $(ARM64_PYTHON)/source
	cp -r pyproject.toml README.md graphgen custom_ops $(ARM64_PYTHON)/source
	$(PY) -m pip wheel --quiet --no-deps -w $(@D) $(ARM64_PYTHON)/source && rm -r $(ARM64_PYTHON)/source && touch $@

# $(call arm64_site,EXTRAS,ONNX RUNTIME VERSION)
define arm64_site
	rm -rf $(@D)
	$(PY) -m pip install --quiet --target $(@D) $(ARM64_WHEELS) "$$(ls $(<D)/graphgen-*.whl)[$(1)]" onnxruntime==$(2)
	touch $@
endef

$(ARM64_PYTHON)/site-newest/.installed: $(ARM64_PYTHON)/wheel/.built
	$(call arm64_site,extensions$(comma)export-safetensors,$(ORT_PYTHON_newest))

$(ARM64_PYTHON)/site-oldest/.installed: $(ARM64_PYTHON)/wheel/.built
	$(call arm64_site,extensions,$(ORT_PYTHON_oldest))

$(ARM64_SHIM): examples/c/emulated_cpuinfo.c | $(ARM64_TOOLS)
	$(MAKE) -C examples/c build/arm64/emulated_cpuinfo.so

# $(call graphgen_on_arm64,CORE,SITE): the start of a `graphgen` command line on CORE with SITE's
# packages (-P: the installed wheel, not the tree's graphgen/ in the working directory)
graphgen_on_arm64 = env -i PYTHONPATH=$(CURDIR)/$(ARM64_PYTHON)/site-$(2) $(QEMU_ARM64) -cpu $(1) -L $(ARM64_PYTHON)/root \
	-E LD_PRELOAD=$(CURDIR)/$(ARM64_SHIM) $(ARM64_PYTHON)/root/usr/bin/python3.11 -P -m graphgen

# $(call python_on_arm64,CORE,SITE,MODEL [OPTIONS],SOURCES,LINES,EXPECTED): `graphgen translate` over
# the first LINES of SOURCES on CORE, compared with the first LINES of EXPECTED
python_on_arm64 = head -n $(5) $(4) > $(ARM64_PYTHON)/sources.txt && head -n $(5) $(6) > $(ARM64_PYTHON)/expected.txt && \
	$(call graphgen_on_arm64,$(1),$(2)) translate --quiet $(3) < $(ARM64_PYTHON)/sources.txt > $(ARM64_PYTHON)/translated.txt && \
	cmp $(ARM64_PYTHON)/translated.txt $(ARM64_PYTHON)/expected.txt && \
	echo "  $(1), onnxruntime $(ORT_PYTHON_$(2)): $(notdir $(firstword $(3))), $(5) texts: identical" || \
	{ echo "  $(1), onnxruntime $(ORT_PYTHON_$(2)): $(notdir $(firstword $(3))) differs or failed"; exit 1; }

python-arm64: $(VENV)/.installed $(ARM64_PYTHON)/root/.unpacked $(ARM64_SHIM)
	$(MAKE) $(ARM64_PYTHON)/site-newest/.installed $(ARM64_PYTHON)/site-oldest/.installed
	head -n 24 $(EXAMPLES)/languages.tsv | cut -f 3 > $(ARM64_PYTHON)/nllb-sources.txt
	head -n 24 $(EXAMPLES)/languages.tsv | cut -f 4 > $(ARM64_PYTHON)/nllb-expected.txt
	@# on every core (their kernels differ: plain NEON; dot product; i8mm), float32 and int8
	@for core in $(ARM64_CPUS); do \
	  $(call python_on_arm64,$$core,newest,$(EXAMPLES)/demo-en-zh.onnx,$(EXAMPLES)/sources.txt,8,$(EXAMPLES)/expected.txt); \
	  $(call python_on_arm64,$$core,newest,$(EXAMPLES)/demo-en-zh-int8.onnx,$(EXAMPLES)/sources.txt,16,$(EXAMPLES)/expected-int8.txt); \
	done
	@# on the first core, the other precisions, languages chosen on the command line, the
	@# onnxruntime-extensions tokenizer, and Python's oldest ONNX Runtime
	@core=$(firstword $(ARM64_CPUS)); \
	  $(call python_on_arm64,$$core,newest,$(EXAMPLES)/demo-en-zh-int4.onnx,$(EXAMPLES)/sources.txt,8,$(EXAMPLES)/expected-int4.txt); \
	  $(call python_on_arm64,$$core,newest,$(EXAMPLES)/demo-en-zh-fp16.onnx,$(EXAMPLES)/sources.txt,2,$(EXAMPLES)/expected-fp16.txt); \
	  $(call python_on_arm64,$$core,newest,$(EXAMPLES)/nllb.onnx --source-language eng_Latn --target-language zho_Hans,$(ARM64_PYTHON)/nllb-sources.txt,24,$(ARM64_PYTHON)/nllb-expected.txt); \
	  $(call python_on_arm64,$$core,newest,$(EXAMPLES)/demo-en-zh-extensions.onnx,$(EXAMPLES)/sources.txt,16,$(EXAMPLES)/expected.txt); \
	  $(call python_on_arm64,$$core,oldest,$(EXAMPLES)/demo-en-zh.onnx,$(EXAMPLES)/sources.txt,16,$(EXAMPLES)/expected.txt); \
	  $(call python_on_arm64,$$core,oldest,$(EXAMPLES)/demo-en-zh-int8.onnx,$(EXAMPLES)/sources.txt,16,$(EXAMPLES)/expected-int8.txt)
	@# the export (torch-free), on the first core: byte for byte the file x86 writes
	@for precision in fp32 int8 int4 fp16; do \
	  option=$$([ $$precision = fp32 ] || echo --$$precision); \
	  $(call graphgen_on_arm64,$(firstword $(ARM64_CPUS)),newest) export $(DEMO_MODEL) $$option -q \
	    -o $(ARM64_PYTHON)/export-arm64.onnx && \
	  $(PY) -m graphgen export $(DEMO_MODEL) $$option -q -o $(ARM64_PYTHON)/export-x86.onnx && \
	  cmp $(ARM64_PYTHON)/export-arm64.onnx $(ARM64_PYTHON)/export-x86.onnx && \
	  echo "  $(firstword $(ARM64_CPUS)): graphgen export $(DEMO_MODEL), $$precision: the bytes x86 writes" || \
	  { echo "  $(firstword $(ARM64_CPUS)): graphgen export $(DEMO_MODEL), $$precision differs or failed"; exit 1; }; \
	done

# $(call library_from_jar,PLATFORM): ONNX Runtime 1.17.3's library for PLATFORM out of the Maven jar
define library_from_jar
	mvn -B -q --no-transfer-progress dependency:copy -Dartifact=com.microsoft.onnxruntime:onnxruntime:1.17.3 \
	  -DoutputDirectory=$(@D)
	$(PY) -c 'import sys, zipfile; open(sys.argv[2], "wb").write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[3]))' \
	  $(@D)/onnxruntime-1.17.3.jar $@.partial ai/onnxruntime/native/$(1)/libonnxruntime.so
	mv $@.partial $@ && rm $(@D)/onnxruntime-1.17.3.jar
endef

$(ORT_OLDEST): $(VENV)/.installed
	$(call library_from_jar,linux-x64)

$(ORT_OLDEST_ARM64): $(VENV)/.installed
	$(call library_from_jar,linux-aarch64)

# A cross compiler and QEMU's user-mode emulator for the C example's Linux/ARM64 run (root installs them).
$(ARM64_TOOLS) &:
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	  gcc-aarch64-linux-gnu libc6-dev-arm64-cross libstdc++6-arm64-cross qemu-user

# Debian's Chromium for the browser test (a fresh machine has none; root installs it).
/usr/bin/chromium:
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium

$(VENV)/.bench-installed: $(VENV)/.installed
	PYTHONWARNINGS=ignore::UserWarning $(PY) -m pip install --quiet -e ".[export,dev,ray,bench]"
	touch $@

$(OPTIMUM_VENV)/.installed:
	test -x $(OPTIMUM_VENV)/bin/python || $(PYTHON) -m venv $(OPTIMUM_VENV)
	$(OPTIMUM_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(OPTIMUM_VENV)/bin/python -m pip install --quiet "optimum-onnx[onnxruntime]==0.1.0" \
	  "transformers>=4.57,<4.58" torch==2.13.0 sentencepiece
	touch $@

# Writes benchmarks/tokenizer_report.md (the portable tokenizer against the extensions op, under a
# minute), benchmarks/report.md and benchmarks/latency_vs_length.png (about 15 minutes here), then
# benchmarks/families_report.md: the full-size NLLB-200-distilled-600M and mBART-50 shapes (each
# report with a chart of peak RSS per system, <report>_memory.png), and
# benchmarks/export_report.md: those shapes exported in every mode, loaded and run (about 10 minutes),
# and, run as root on Linux, benchmarks/memory_limit_report.md: the least memory limit (a cgroup)
# each system translates in, graphgen against CTranslate2 (about 15 minutes; elsewhere it says why not).
# On a machine with an NVIDIA GPU: `$(PY) benchmarks/gpu.py` (see docs/platforms.md, On a GPU).
bench: $(VENV)/.bench-installed $(OPTIMUM_VENV)/.installed $(CHROMIUM)
	$(PY) benchmarks/tokenizer.py
	$(PY) benchmarks/speed.py --optimum-python $(OPTIMUM_VENV)/bin/python
	$(PY) benchmarks/speed.py --optimum-python $(OPTIMUM_VENV)/bin/python --models nllb,mbart \
	  --systems hf,optimum,ct2-float32,ct2-int8,graphgen-fp32,graphgen-int8,graphgen-int4,graphgen-int8-ext --runs 3 --new-tokens 20 \
	  --report benchmarks/families_report.md
	$(PY) benchmarks/export_modes.py
	$(PY) benchmarks/memory_limit.py
	cd examples/node && npm ci --ignore-scripts --no-audit --no-fund
	$(PY) benchmarks/browser.py --chromium $(CHROMIUM)

lint: $(VENV)/.installed
	$(PY) -m ruff check graphgen custom_ops tests models benchmarks examples
	$(PY) -m ruff format --check graphgen custom_ops tests models benchmarks examples

clean:
	rm -rf build
