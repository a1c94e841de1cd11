"""Stage 3, the network as ONNX graphs: the typed ``ModelSpec``, the transformer (encoder, decoder
step) and its weight formats (float, int8, int4)."""
