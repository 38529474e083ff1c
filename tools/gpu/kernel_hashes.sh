#!/bin/bash
# kernel_hashes.sh LIB: one line per sm_90 kernel of a library (or object) built by nvcc: its
# mangled name, the size of its .text and a hash of the bytes. Two builds whose lines agree run
# the same machine code, so figures measured on one hold for the other (a library rebuilt from
# unchanged kernels and the one a GPU run measured, for example). Needs objcopy and python3, and
# Python's zstandard module (Debian: python3-zstandard) where nvcc compressed the device code; no
# CUDA tools (cuobjdump need not be installed). tools/gpu/production_unchanged.sh uses it.
#   tools/gpu/kernel_hashes.sh build/kernels/hip/libpacts_kernels_hip.so > a.txt
set -euo pipefail
lib=$1
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
objcopy -O binary --only-section=.nv_fatbin "$lib" "$tmp"
python3 - "$tmp" <<'PY'
import hashlib, struct, sys
raw = open(sys.argv[1], 'rb').read()
# The fatbin's entries (a 16-byte header, then per entry a header of its own size and a payload);
# a payload nvcc compressed (zstd) is expanded, so the cubins are compared as code, not as bytes.
data, off = b'', 0
while off + 16 <= len(raw) and struct.unpack_from('<I', raw, off)[0] == 0xBA55ED50:
    hsize, fsize = struct.unpack_from('<HQ', raw, off + 6)
    at, end = off + hsize, off + hsize + fsize
    while at + 16 <= end:
        ehsize, esize = struct.unpack_from('<IQ', raw, at + 4)
        payload = raw[at + ehsize:at + ehsize + esize]
        if payload[:4] == bytes.fromhex('28b52ffd'):
            try:
                import zstandard
            except ImportError:
                sys.exit('kernel_hashes.sh: the device code is compressed (zstd); install python3-zstandard')
            payload = zstandard.ZstdDecompressor().decompress(payload, max_output_size=1 << 31)
        data += payload
        at += ehsize + esize
    off = (end + 7) // 8 * 8
if not data:
    data = raw
at = 0
while (at := data.find(b'\x7fELF', at)) >= 0:  # the cubins inside the fatbin (uncompressed)
    shoff, = struct.unpack_from('<Q', data, at + 0x28)
    entsize, num, strndx = struct.unpack_from('<HHH', data, at + 0x3A)
    elf = data[at:at + shoff + entsize * num]
    section = lambda k: struct.unpack_from('<IIQQQQIIQQ', elf, shoff + k * entsize)
    names = section(strndx)[4]
    for k in range(num):
        h = section(k)
        name = elf[names + h[0]:elf.index(b'\0', names + h[0])].decode()
        if name.startswith('.text.'):
            print(name[6:], h[5], hashlib.sha256(elf[h[4]:h[4] + h[5]]).hexdigest()[:16])
    at += len(elf)
PY
