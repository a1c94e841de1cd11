"""Stage 4, generation: the search around the decoder step (graphgen's loop in standard ops, or
ONNX Runtime's BeamSearch op) and the I/O every search shares."""
