"""``benchmarks/gpu.py`` in its CPU smoke mode: the script a GPU machine runs, kept working without one.

Tiny shapes (the demo model for opus-mt, a 2-layer NLLB), one run each; the parity rows it reports
(graphgen's text files against HF ``generate`` in float32 and float16, and against themselves on
the CPU) must all be equal, and every system must have produced exactly 40 tokens (the script
stops otherwise).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_gpu_benchmark_smoke(tmp_path: Path) -> None:
    report = tmp_path / "gpu_report.md"
    smoke = ["--device", "cpu", "--quick", "--runs", "1", "--work", str(tmp_path / "work"), "--out", str(report)]
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu.py"), *smoke],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    text = report.read_text(encoding="utf-8")
    parity = re.findall(r"^\| graphgen .* \| (\d+)/(\d+) \|$", text, flags=re.MULTILINE)
    assert len(parity) == 4 and all(a == b == "32" for a, b in parity), parity
    for shape in ("opus-mt", "nllb"):
        rows = re.findall(rf"^\| {shape} \(cpu\) \|.*?(?=^\n)", text, flags=re.MULTILINE | re.DOTALL)
        assert rows, shape
        for system in ("HF float32", "HF float16", "graphgen float32", "graphgen float16"):
            assert f"| {system} |" in rows[0], (shape, system)
    # section 3 also runs the text file without the layer assignment it asks for: same translations
    assert text.count("translations the same") == 2, text
    waits = [int(n) for n in re.findall(r"(\d+) waits for the GPU", text)]
    assert len(waits) == 4 and waits[0] < waits[1] and waits[2] < waits[3], waits  # the setting's effect
    # section 4 sets the modelled copies of a step beside the ones ONNX Runtime inserted
    modelled = re.findall(r"^- (float32|float16), (greedy|beam): (.*)$", text, flags=re.MULTILINE)
    assert len(modelled) == 4 and all("fetch" in found for _, _, found in modelled), modelled
