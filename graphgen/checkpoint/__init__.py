"""Stage 1, reading a checkpoint: the config and generation config, weights from safetensors or torch files."""
