"""Running a file: ``Translator`` (onnxruntime and numpy only, never onnx, torch or transformers),
bulk files, progress."""
