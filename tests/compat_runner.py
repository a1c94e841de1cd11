"""Run exported files in another ONNX Runtime / extensions release (a matrix venv) and print JSON.

Standalone on purpose: it imports only onnxruntime and numpy, so the matrix venvs need nothing
else, and it finds the extensions library the way a non-Python host would: as a file.

    python compat_runner.py REQUEST.json  →  {"versions": ..., "results": {name: ...}}
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort


def extensions_library() -> str:
    spec = importlib.util.find_spec("onnxruntime_extensions")
    assert spec is not None and spec.submodule_search_locations
    for folder in spec.submodule_search_locations:
        for path in sorted(Path(folder).glob("_extensions_pydll*")):
            if path.suffix in (".so", ".pyd", ".dylib"):
                return str(path)
    raise FileNotFoundError("no onnxruntime-extensions library")


def session(job: dict, text: bool) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    for key, value in job["config"].items():  # what the file's metadata asks for (graphgen.session_config)
        options.add_session_config_entry(key, value)
    if text:
        options.register_custom_ops_library(extensions_library())
    # "from_bytes": the model is given as bytes (a single file with its weights mapped from it)
    model = Path(job["model"]).read_bytes() if job.get("from_bytes") else job["model"]
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def main(request_path: str) -> None:
    request = json.loads(Path(request_path).read_text(encoding="utf-8"))
    results: dict[str, object] = {}
    for job in request["jobs"]:
        try:
            if job["kind"] == "utf8":  # the portable tokenizer: bytes in, no library registered
                s = session(job, text=False)
                out = []
                for batch in job["batches"]:  # texts, or string inputs by name (text, target_language, ...)
                    feeds = dict(batch) if isinstance(batch, dict) else {"text": batch}
                    encoded = [text.encode("utf-8") for text in feeds.pop("text")]
                    data = np.zeros((len(encoded), max(map(len, encoded))), dtype=np.uint8)
                    for row, text in enumerate(encoded):
                        data[row, : len(text)] = np.frombuffer(text, dtype=np.uint8)
                    inputs = {k: np.array(v, dtype=object) for k, v in feeds.items()} | {"text_utf8": data}
                    (got,) = s.run(["translation"], inputs)
                    out += [row[0] for row in got.tolist()]
                results[job["name"]] = out
            elif job["kind"] == "text":
                s = session(job, text=True)
                out = []
                for batch in job["batches"]:  # texts, or string inputs by name (text, target_language, ...)
                    feeds = batch if isinstance(batch, dict) else {"text": batch}
                    (got,) = s.run(["translation"], {k: np.array(v, dtype=object) for k, v in feeds.items()})
                    out += [row[0] for row in got.tolist()]
                results[job["name"]] = out
            else:
                s = session(job, text=False)
                out = []
                for batch in job["batches"]:
                    feeds = {k: np.array(batch[k], dtype=np.int32) for k in ("input_ids", "attention_mask")}
                    (got,) = s.run(["sequences"], feeds)
                    out.append(got.tolist())
                results[job["name"]] = out
        except Exception as error:  # reported, and the test names the cell
            results[job["name"]] = {"error": f"{type(error).__name__}: {error}"[:2000]}
    versions = {"onnxruntime": ort.__version__, "extensions": _extensions_version()}
    print(json.dumps({"versions": versions, "results": results}, ensure_ascii=False))


def _extensions_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("onnxruntime-extensions")
    except PackageNotFoundError:
        return "none"


if __name__ == "__main__":
    main(sys.argv[1])
