"""Stage 7, files and servers: saving (one file or external data), the ORT format for mobile, a
Triton model repository, Ray Data."""
