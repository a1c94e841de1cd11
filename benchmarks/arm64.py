"""graphgen's text files on Linux/ARM64 (emulated): the same translations as on this x86 machine, or not.

    make examples                 # once: the fixtures, ONNX Runtime's ARM64 libraries, the cross tools
    python benchmarks/arm64.py    # about 75 minutes here (--oldest-cores cortex-a53: 50); writes arm64_report.md

ONNX Runtime chooses its CPU kernels by the instruction-set features of the core it runs on, and
ARM64 has its own (NEON matrix products; the dot-product, fp16 and i8mm extensions where the core
has them), so a file translated identically on x86 can still differ on a phone or a Raspberry Pi.
This runs the C example's command line (examples/c, cross-compiled) under ``qemu-aarch64`` as
several cores, each with the feature bits QEMU gives its model, on ONNX Runtime's linux-aarch64
libraries (onnxruntime-node's and the 1.17.3 Maven jar's, which ``make examples`` fetches), over
every demo file kind (the 300 test sentences, in batches of 16; the int8 ``.ort`` file phones load
too), the NLLB fixture into three targets and the mBART-50, T5 and mT5 fixtures, and compares each
line with graphgen's Python path on this machine. ``make test`` runs a subset (examples/c/Makefile,
``test-arm64``). Emulated time is not a real core's speed, so the report gives none.
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from systems import cpu_model  # this folder is sys.path[0] when run as a script

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "build" / "examples"
BUILD = REPO / "examples" / "c" / "build" / "arm64"
OLDEST = "1.17.3 (Maven jar)"
NODE_ARM64 = REPO / "examples/node/node_modules/onnxruntime-node/bin/napi-v6/linux/arm64"
LIBRARIES = {  # where `make examples` leaves them
    "1.31.1 (onnxruntime-node)": NODE_ARM64 / "libonnxruntime.so.1",
    OLDEST: REPO / "build/ort-1.17.3/linux-aarch64/libonnxruntime.so",
}
# QEMU's core models, what ONNX Runtime's kernels can use on each, and cores of that kind
CORES = {
    "cortex-a53": "ARMv8.0 NEON: no dot product, no fp16 arithmetic (Raspberry Pi 3, low-end phones)",
    "cortex-a72": "ARMv8.0 NEON (Raspberry Pi 4)",
    "neoverse-n1": "dot product, fp16 arithmetic (Cortex-A76 class: Raspberry Pi 5, AWS Graviton2)",
    "max": "also i8mm, bf16, SVE2 (AWS Graviton3 and 4, recent phones' big cores)",
}
# the demo's files, and the .ort file mobile apps load (compared with its .onnx file's translations)
DEMO_FILES = (
    "demo-en-zh",
    "demo-en-zh-greedy",
    "demo-en-zh-int8",
    "demo-en-zh-int8.ort",
    "demo-en-zh-int4",
    "demo-en-zh-fp16",
)
BATCH = 16  # main.c translates 16 lines per run
# Where QEMU is too slow for the whole demo set, its first lines only: as `max` (SVE2, fp16) a run of the
# float32 demo file spends 15 s creating its session before the first sentence (5 s as a Cortex-A53)
# and the float16 file takes about 6 s a sentence (0.3 s as a Cortex-A53).
DEMO_LINES_ON = {"max": 32}


@dataclass(frozen=True)
class Case:
    """One file and the lines to translate with it, and what graphgen's Python path gave."""

    name: str
    model: Path
    languages: tuple[str, ...]  # () or (source, target)
    sources: list[str]
    expected: list[str]


def python_translations(model: Path, sources: list[str], languages: tuple[str, ...] = ()) -> list[str]:
    """What ``graphgen.Translator`` gives on this machine, in main.c's batches."""
    import graphgen

    translator = graphgen.Translator(model)
    chosen = dict(zip(("source_language", "target_language"), languages, strict=False))
    batches = [sources[start : start + BATCH] for start in range(0, len(sources), BATCH)]
    return [text for batch in batches for text in translator.translate(batch, **chosen)]


def cases() -> list[Case]:
    lines = (FIXTURES / "sources.txt").read_text(encoding="utf-8").splitlines()
    found = []
    for name in DEMO_FILES:
        model = FIXTURES / (name if name.endswith(".ort") else f"{name}.onnx")
        found.append(Case(name, model, (), lines, python_translations(model.with_suffix(".onnx"), lines)))
    rows = [row.split("\t") for row in (FIXTURES / "languages.tsv").read_text(encoding="utf-8").splitlines()]
    for target in sorted({row[1] for row in rows}):
        chosen = [row for row in rows if row[1] == target]
        texts, translations = [row[2] for row in chosen], [row[3] for row in chosen]
        found.append(Case(f"nllb → {target}", FIXTURES / "nllb.onnx", (chosen[0][0], target), texts, translations))
    for family in ("mbart50", "t5", "mt5"):
        texts, translations = (
            (FIXTURES / f"{family}-{part}.txt").read_text(encoding="utf-8").splitlines()
            for part in ("sources", "expected")
        )
        found.append(Case(family, FIXTURES / f"{family}.onnx", (), texts, translations))
    return found


def build() -> None:
    include = subprocess.run(
        ["go", "list", "-m", "-f", "{{.Dir}}", "github.com/yalue/onnxruntime_go"],
        cwd=REPO / "examples" / "go",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    targets = ["build/arm64/translate", "build/arm64/emulated_cpuinfo.so"]
    subprocess.run(["make", "-s", "-C", str(REPO / "examples" / "c"), *targets, f"ORT_INCLUDE={include}"], check=True)


def run_on(core: str, library: Path, case: Case) -> tuple[list[str], str]:
    """The translations main.c gives under qemu-aarch64 as ``core``, and its error output."""
    with tempfile.TemporaryFile() as sources:
        sources.write("".join(f"{line}\n" for line in case.sources).encode())
        sources.seek(0)
        emulated = ["qemu-aarch64", "-cpu", core, "-L", "/usr/aarch64-linux-gnu"]
        preloaded = ["-E", f"LD_PRELOAD={BUILD / 'emulated_cpuinfo.so'}"]
        done = subprocess.run(
            [*emulated, *preloaded, str(BUILD / "translate"), str(case.model), *case.languages],
            stdin=sources,
            capture_output=True,
            env={"ORT_LIBRARY": str(library), "PATH": "/usr/bin:/bin"},
        )
    error = done.stderr.decode(errors="replace").strip()
    return done.stdout.decode().splitlines(), error if done.returncode else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cores", default=",".join(CORES), help=f"QEMU core models, comma-separated: of {', '.join(CORES)}"
    )
    parser.add_argument("--oldest-cores", help="the cores for ONNX Runtime 1.17.3 (default: --cores)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "arm64_report.md")
    args = parser.parse_args()
    unknown = set(args.cores.split(",")).union((args.oldest_cores or args.cores).split(",")).difference(CORES)
    if unknown:
        sys.exit(f"unknown core {', '.join(sorted(unknown))}: choose from {', '.join(CORES)}")
    missing = [str(path) for path in [FIXTURES / "sources.txt", *LIBRARIES.values()] if not path.exists()]
    if missing:
        sys.exit(f"missing {', '.join(missing)}: run `make examples` first")
    build()
    started = time.monotonic()
    all_cases = cases()
    rows = []
    cores_of = {version: args.cores.split(",") for version in LIBRARIES}
    cores_of[OLDEST] = (args.oldest_cores or args.cores).split(",")
    for version, library in LIBRARIES.items():
        for core in cores_of[version]:
            for whole in all_cases:
                lines = DEMO_LINES_ON.get(core, len(whole.sources)) if whole.name in DEMO_FILES else len(whole.sources)
                case = Case(whole.name, whole.model, whole.languages, whole.sources[:lines], whole.expected[:lines])
                translated, error = run_on(core, library, case)
                same = sum(a == b for a, b in zip(translated, case.expected, strict=False))
                verdict = f"{same}/{len(case.expected)}" + (f" (failed: {error.splitlines()[-1]})" if error else "")
                rows.append(f"| {version} | {core} | {case.name} | {verdict} |")
                print(rows[-1], flush=True)
    minutes = (time.monotonic() - started) / 60
    qemu = subprocess.run(["qemu-aarch64", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    ran = sorted({core for cores in cores_of.values() for core in cores}, key=list(CORES).index)
    cores = "\n".join(f"- `{core}`: {CORES[core]}" for core in ran)
    cut = "; ".join(f"on `{core}` the first {lines}" for core, lines in DEMO_LINES_ON.items() if core in ran)
    args.out.write_text(
        f"""# graphgen on Linux/ARM64, emulated

Written by `benchmarks/arm64.py` on {date.today()} in {minutes:.0f} min. The C example's command line
(`examples/c/main.c`, cross-compiled with aarch64-linux-gnu-gcc) under {qemu}, as each core below,
on ONNX Runtime's linux-aarch64 libraries; each line compared with graphgen's Python path
(`graphgen.Translator`, which equals HF `generate` + `batch_decode`) on this machine: {cpu_model()},
{platform.platform()}. Lines identical / lines; the demo files translate the test set's 300
sentences, 16 per run{f" ({cut}: QEMU is too slow there)" if cut else ""}.

Cores (QEMU's models; ONNX Runtime picks its kernels by the feature bits each gives):
{cores}

| ONNX Runtime | core | file | identical |
|---|---|---|---:|
{chr(10).join(rows)}
""",
        encoding="utf-8",
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
