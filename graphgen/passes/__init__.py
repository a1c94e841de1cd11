"""Stage 6, rewrites of a built model: compatibility with older ONNX Runtime releases, float16, baking settings in."""
