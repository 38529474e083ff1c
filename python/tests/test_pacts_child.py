"""The package's own tests: exact formats, the protocol's lines, and the NumPy example judged by
pacts through the process backend (the catalogue passes; a planted off-by-one window fails).

    python3 -m unittest discover -s python/tests     (PACTS_BUILD: the build folder, default build)
"""
import io
import json
import os
import struct
import subprocess
import sys
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
import pacts_child  # noqa: E402
from pacts_child import formats  # noqa: E402

BUILD = os.environ.get("PACTS_BUILD", os.path.join(ROOT, "build"))
CONFORMANCE = os.path.join(BUILD, "conformance", "pacts-conformance")
EXAMPLE = os.path.join(ROOT, "python", "examples", "numpy_decode.py")


def bf16_bits(x):
    return formats.encode(np.array([x]), "bf16")[0]


class Formats(unittest.TestCase):
    def test_bf16_rounds_once_to_nearest_even(self):
        one = 0x3F80
        ulp = 2.0 ** -7
        self.assertEqual(bf16_bits(1.0), one)
        self.assertEqual(bf16_bits(1.0 + ulp / 2), one)             # a tie: to the even code
        self.assertEqual(bf16_bits(1.0 + 3 * ulp / 2), one + 2)     # a tie: up to the even code
        self.assertEqual(bf16_bits(1.0 + ulp / 2 + 2.0 ** -40), one + 1)  # above the tie
        # A value whose rounding through fp32 first would tie and go to even: once, it goes up.
        x = 1.0 + ulp / 2 + 2.0 ** -30
        self.assertEqual(bf16_bits(x), one + 1)
        self.assertNotEqual(bf16_bits(float(np.float32(x))), one + 1)

    def test_bf16_edges(self):
        self.assertEqual(bf16_bits(2.0 ** -133), 0x0001)            # the least subnormal
        self.assertEqual(bf16_bits(2.0 ** -134), 0x0000)            # a tie to even: zero
        self.assertEqual(bf16_bits(-0.0), 0x8000)
        self.assertEqual(bf16_bits(3.5e38), 0x7F80)                 # overflow: +inf
        self.assertEqual(bf16_bits(float("nan")) & 0x7FC0, 0x7FC0)
        codes = np.arange(0, 65536, dtype=np.uint32).astype(np.uint16)
        finite = codes[(codes & 0x7F80) != 0x7F80]
        again = formats.encode(formats.decode(finite, "bf16"), "bf16")
        np.testing.assert_array_equal(again, finite)                # every finite code round-trips

    def test_fp16_and_fp32(self):
        codes = np.arange(0, 65536, dtype=np.uint32).astype(np.uint16)
        finite = codes[(codes & 0x7C00) != 0x7C00]
        np.testing.assert_array_equal(formats.encode(formats.decode(finite, "fp16"), "fp16"), finite)
        self.assertEqual(formats.encode(np.array([1.0 + 2.0 ** -11]), "fp16")[0], 0x3C00)  # tie
        self.assertEqual(formats.encode(np.array([1.0 + 2.0 ** -11 + 2.0 ** -40]), "fp16")[0], 0x3C01)
        self.assertEqual(struct.pack("<f", formats.encode(np.array([0.1]), "fp32")[0]),
                         struct.pack("<f", 0.1))


class Protocol(unittest.TestCase):
    def test_handshake_then_exit(self):
        out = io.StringIO()
        status = pacts_child.serve(lambda call: None, name="t", device="cpu",
                                   stdin=io.StringIO('{"op": "exit"}\n'), stdout=out)
        self.assertEqual(status, 0)
        hello = json.loads(out.getvalue().splitlines()[0])
        self.assertEqual(hello["protocol"], "pacts-process")
        self.assertEqual(hello["version"], 1)
        self.assertEqual(hello["capabilities"]["kv_formats"], ["bf16", "fp16"])
        with self.assertRaises(KeyError):
            pacts_child.capabilities(no_such_field=1)


@unittest.skipUnless(os.path.exists(CONFORMANCE), f"no {CONFORMANCE}: build pacts first")
class NumpyKernelThroughPacts(unittest.TestCase):
    def run_catalogue(self, cases, env=None, only=None):
        cmd = [CONFORMANCE, "--backend", f"exec:{sys.executable} {EXAMPLE}", "--cases", str(cases),
               "--case-dir", os.path.join(BUILD, "python-failures")]
        if only:
            cmd.append(f"--gtest_filter={only}")
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)

    def test_the_catalogue_passes(self):
        r = self.run_catalogue(20)
        self.assertEqual(r.returncode, 0, r.stdout[-4000:] + r.stderr[-2000:])
        self.assertIn("[  PASSED  ] 31 tests.", r.stdout)

    def test_a_planted_window_off_by_one_fails(self):
        env = dict(os.environ, PACTS_NUMPY_FAULT="window_plus_one")
        r = self.run_catalogue(40, env=env, only="PACTS_ACC_1*:PACTS_POISON_1*")
        self.assertNotEqual(r.returncode, 0, r.stdout[-4000:])
        self.assertIn("FAILED", r.stdout)

    def test_timed_beside_pacts_host_kernels(self):
        """spec/process.md section 6: pacts-bench gates the child and times its prepared call
        beside the host kernels on the same inputs (the side-by-side table names it)."""
        bench = os.path.join(BUILD, "bench", "pacts-bench")
        cmd = [bench, "--backend", "host", "--backend", f"exec:{sys.executable} {EXAMPLE}",
               "--set", "peers", "--limit", "1", "--repeats", "2", "--warmup", "0",
               "--gate-cases", "1", "--no-unsafe", "--peers", "none", "--threads", "2",
               "--ceiling-mib", "8", "--case-dir", os.path.join(BUILD, "python-failures")]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        self.assertEqual(r.returncode, 0, r.stdout[-4000:] + r.stderr[-2000:])
        self.assertIn("peer:numpy-decode", r.stdout)
        self.assertIn("timed by the child: host clock (time.perf_counter)", r.stdout)
        self.assertIn("peer:numpy-decode: geomean ratio", r.stdout)


if __name__ == "__main__":
    unittest.main()
