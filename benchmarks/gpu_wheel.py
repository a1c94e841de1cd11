"""Make an onnxruntime-gpu wheel small enough to carry to a GPU machine: one GPU architecture, xz, parts.

    python benchmarks/gpu_wheel.py onnxruntime_gpu-1.31.1-cp311-cp311-manylinux_2_28_x86_64.whl \\
        --arch 90 --part-mb 40 -o /tmp/ortgpu
    # on the GPU machine, with the parts copied into one folder:
    mkdir -p /tmp/ort && cat ortgpu.tar.xz.part* | tar xJ -C /tmp/ort
    PYTHONPATH=/tmp/ort python benchmarks/gpu.py

Why: the wheel is 256 MB, and the machines this project borrows take a few tens of MB per call. Its
CUDA provider library (284 of the 350 MB unpacked) holds every CUDA kernel compiled for six GPU
architectures (sm_75, 80, 86, 89, 90, 120) in its ``.nv_fatbin`` section. The CUDA driver loads the
code compiled for the device's architecture and reads no other, so this script sets the other
architectures' code to zero bytes: the library keeps its layout and every fatbin header, and the
zeros compress to almost nothing. onnxruntime-gpu 1.31.1 with sm_90 alone (H100, H200): 141 MB
zeroed, 69 MB as ``.tar.xz`` (the whole wheel: about 204 MB), two parts of 40 MB. The TensorRT
provider library is left out. Not yet loaded on a GPU when written (no GPU lent that session):
if the CUDA provider fails to load from the slim copy, carry the whole wheel instead.
"""

from __future__ import annotations

import argparse
import io
import struct
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

FATBIN_MAGIC = 0xBA55ED50
CUDA_PROVIDER = "onnxruntime/capi/libonnxruntime_providers_cuda.so"
LEFT_OUT = ("onnxruntime/capi/libonnxruntime_providers_tensorrt.so",)


def _fatbin_section(library: Path) -> tuple[int, int]:
    """File offset and size of the library's ``.nv_fatbin`` section (from ``readelf``)."""
    listing = subprocess.run(["readelf", "-S", "-W", str(library)], capture_output=True, text=True, check=True)
    for line in listing.stdout.splitlines():
        if ".nv_fatbin" in line:
            fields = line.split("]", 1)[1].split()  # name, type, address, offset, size, ...
            return int(fields[3], 16), int(fields[4], 16)
    raise SystemExit(f"{library}: no .nv_fatbin section")


def keep_one_architecture(data: bytearray, section: tuple[int, int], arch: int) -> tuple[int, int]:
    """Zero the code of every fatbin entry not compiled for ``arch``; returns (bytes kept, zeroed).

    A fatbin is a header (magic, version, header size, payload size) followed by entries, each a
    header (kind, flags, header size, code size, ..., the architecture at byte 28) and its code."""
    position, end = section[0], section[0] + section[1]
    kept = zeroed = 0
    while position < end:
        magic, _, header_size, fatbin_size = struct.unpack_from("<IHHQ", data, position)
        if magic != FATBIN_MAGIC:
            position += 8  # fatbins are 8-byte aligned, with padding between them
            continue
        entry, fatbin_end = position + header_size, position + header_size + fatbin_size
        while entry < fatbin_end:
            _, _, entry_header, code_size = struct.unpack_from("<HHIQ", data, entry)
            (entry_arch,) = struct.unpack_from("<I", data, entry + 28)
            code = slice(entry + entry_header, entry + entry_header + code_size)
            if entry_arch == arch:
                kept += code_size
            else:
                data[code] = bytes(code_size)
                zeroed += code_size
            entry = code.stop
        position = fatbin_end
    if kept == 0:
        raise SystemExit(f"no code for sm_{arch} in the library: pick an architecture it was built for")
    return kept, zeroed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheel", type=Path, help="an onnxruntime-gpu wheel (pip download --no-deps onnxruntime-gpu)")
    parser.add_argument("--arch", type=int, default=90, help="the GPU architecture to keep (90: H100, H200)")
    parser.add_argument("--part-mb", type=int, default=40, help="size of each part in MB")
    parser.add_argument("-o", "--output", type=Path, required=True, help="folder for ortgpu.tar.xz.partNN")
    args = parser.parse_args(argv)

    args.output.mkdir(parents=True, exist_ok=True)
    packed = io.BytesIO()
    with zipfile.ZipFile(args.wheel) as wheel, tarfile.open(fileobj=packed, mode="w:xz", preset=9) as tar:
        for info in wheel.infolist():
            if info.is_dir() or info.filename in LEFT_OUT:
                continue
            data = bytearray(wheel.read(info))
            if info.filename == CUDA_PROVIDER:
                library = args.output / "cuda_provider.so"  # readelf needs a file
                library.write_bytes(data)
                kept, zeroed = keep_one_architecture(data, _fatbin_section(library), args.arch)
                library.unlink()
                print(f"{CUDA_PROVIDER}: sm_{args.arch} code {kept / 1e6:.0f} MB kept, {zeroed / 1e6:.0f} MB zeroed")
            member = tarfile.TarInfo(info.filename)
            member.size, member.mode = len(data), 0o755 if info.filename.endswith(".so") else 0o644
            tar.addfile(member, io.BytesIO(bytes(data)))
    blob = packed.getvalue()
    part = args.part_mb * 1_000_000
    for old in args.output.glob("ortgpu.tar.xz.part*"):
        old.unlink()
    for number, start in enumerate(range(0, len(blob), part)):
        (args.output / f"ortgpu.tar.xz.part{number:02d}").write_bytes(blob[start : start + part])
    print(f"{len(blob) / 1e6:.1f} MB in {-(-len(blob) // part)} parts under {args.output}")


if __name__ == "__main__":
    sys.exit(main())
