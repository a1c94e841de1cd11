"""Stage 7, files and servers: saving (one file or external data), the ORT format for mobile, a
Triton model repository, Ray Data."""

ORT_PLATFORMS = ("arm", "amd64")  # what export --ort optimizes a .ort file for (mobile.py)
