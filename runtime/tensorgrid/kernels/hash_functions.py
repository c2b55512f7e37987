"""TensorFlow's string hash functions, bit for bit, over numpy arrays of bytes.

Feature columns turn strings into bucket ids with these hashes, and a model trained by
TensorFlow and one trained by tensorgrid agree only when every string lands in the same
bucket. So each function here is TensorFlow's own, in the same arithmetic:

- ``fingerprint64``: TensorFlow's ``Fingerprint64`` (``tensorflow/core/platform/fingerprint.h``),
  which is FarmHash's ``Fingerprint64``, i.e. ``farmhashna::Hash64``
  (``tf.strings.to_hash_bucket_fast``, vocabulary tables' OOV buckets, ``crossed_column``);
- ``fingerprint_cat64``: ``FingerprintCat64`` of the same header, which combines two
  fingerprints (``tf.sparse.cross_hashed``);
- ``siphash24``: SipHash-2-4 with a 128-bit key, as TensorFlow's ``StrongKeyedHash``
  (``tf.strings.to_hash_bucket_strong``);
- ``murmur_hash64``: TensorFlow's own ``Hash64`` (``tensorflow/core/lib/hash/hash.cc``, a
  MurmurHash64A with seed ``0xDECAFCAFFE``; the legacy ``tf.string_to_hash_bucket``).

Every function takes a sequence of ``bytes`` and returns a uint64 array of one hash per
string. The work is vectorised: strings are packed into one byte buffer and each 8-byte
fetch of the algorithm is one gather over all strings that take the same branch, so the
Python overhead is per batch and per branch, not per string. Arithmetic is numpy's uint64,
which wraps modulo 2**64 as C's ``uint64_t`` does; fetches are little-endian, as on the
x86 and ARM machines TensorFlow runs on.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

U64 = np.dtype(np.uint64)
_LITTLE_U64 = np.dtype("<u8")
_LITTLE_U32 = np.dtype("<u4")

# FarmHash's primes (farmhash.cc: k0, k1, k2).
K0 = np.uint64(0xC3A5C85C97CB3127)
K1 = np.uint64(0xB492B66FBE98F273)
K2 = np.uint64(0x9AE16A3B2F90404F)
_CAT_MUL = np.uint64(0xC6A4A7935BD1E995)
"""The multiplier of ``FingerprintCat64`` and of MurmurHash64A (``Hash64``'s ``m``)."""
MURMUR_SEED = 0xDECAFCAFFE
"""The seed TensorFlow's ``Hash64(data, n)`` passes to ``Hash64(data, n, seed)``."""


class _Packed:
    """Strings laid end to end in one byte buffer, with 8 zero bytes after the last, so an
    8-byte fetch at any offset inside a string stays inside the buffer."""

    def __init__(self, strings: Sequence[bytes]) -> None:
        self.lengths = np.fromiter((len(s) for s in strings), dtype=np.int64, count=len(strings))
        self.buffer = np.frombuffer(b"".join(strings) + bytes(8), dtype=np.uint8)
        self.starts = np.cumsum(self.lengths) - self.lengths

    def fetch64(self, positions: np.ndarray) -> np.ndarray:
        """The little-endian uint64 at each absolute position of the buffer."""
        gathered = self.buffer[positions[:, None] + np.arange(8)]
        return gathered.view(_LITTLE_U64)[:, 0].astype(U64)

    def fetch32(self, positions: np.ndarray) -> np.ndarray:
        gathered = self.buffer[positions[:, None] + np.arange(4)]
        return gathered.view(_LITTLE_U32)[:, 0].astype(U64)

    def byte(self, positions: np.ndarray) -> np.ndarray:
        byte: np.ndarray = self.buffer[positions].astype(U64)
        return byte


def _as_bytes_list(strings: Sequence[bytes]) -> list[bytes]:
    out = []
    for value in strings:
        if isinstance(value, str):
            value = value.encode("utf-8")
        elif not isinstance(value, bytes):
            raise TypeError(f"String hashes take bytes or str, got {type(value).__name__}: {value!r}")
        out.append(value)
    return out


def _rotate(value: np.ndarray, shift: int) -> np.ndarray:
    """FarmHash's ``Rotate64``: a rotation to the right."""
    return (value >> np.uint64(shift)) | (value << np.uint64(64 - shift))


def _rotate_left(value: np.ndarray, shift: int) -> np.ndarray:
    """SipHash's rotation."""
    return (value << np.uint64(shift)) | (value >> np.uint64(64 - shift))


def _shift_mix(value: np.ndarray) -> np.ndarray:
    mixed: np.ndarray = value ^ (value >> np.uint64(47))
    return mixed


def _hash_len16(u: np.ndarray, v: np.ndarray, mul: np.ndarray) -> np.ndarray:
    a = _shift_mix((u ^ v) * mul)
    b: np.ndarray = _shift_mix((v ^ a) * mul) * mul
    return b


def _len0to16(p: _Packed, s: np.ndarray, n: np.ndarray) -> np.ndarray:
    out = np.empty(len(s), dtype=U64)
    ln = n.astype(U64)
    long8 = n >= 8
    if long8.any():
        s8, n8 = s[long8], ln[long8]
        mul = K2 + n8 * np.uint64(2)
        a = p.fetch64(s8) + K2
        b = p.fetch64(s8 + n[long8] - 8)
        c = _rotate(b, 37) * mul + a
        d = (_rotate(a, 25) + b) * mul
        out[long8] = _hash_len16(c, d, mul)
    long4 = (n >= 4) & (n < 8)
    if long4.any():
        s4, n4 = s[long4], ln[long4]
        mul = K2 + n4 * np.uint64(2)
        a = p.fetch32(s4)
        out[long4] = _hash_len16(n4 + (a << np.uint64(3)), p.fetch32(s4 + n[long4] - 4), mul)
    short = (n > 0) & (n < 4)
    if short.any():
        s1, n1 = s[short], n[short]
        a = p.byte(s1)
        b = p.byte(s1 + (n1 >> 1))
        c = p.byte(s1 + n1 - 1)
        # y and z are uint32 in C: they cannot overflow for bytes and lengths below 4.
        y = a + (b << np.uint64(8))
        z = n1.astype(U64) + (c << np.uint64(2))
        out[short] = _shift_mix(y * K2 ^ z * K0) * K2
    out[n == 0] = K2
    return out


def _len17to32(p: _Packed, s: np.ndarray, n: np.ndarray) -> np.ndarray:
    mul = K2 + n.astype(U64) * np.uint64(2)
    a = p.fetch64(s) * K1
    b = p.fetch64(s + 8)
    c = p.fetch64(s + n - 8) * mul
    d = p.fetch64(s + n - 16) * K2
    return _hash_len16(_rotate(a + b, 43) + _rotate(c, 30) + d, a + _rotate(b + K2, 18) + c, mul)


def _len33to64(p: _Packed, s: np.ndarray, n: np.ndarray) -> np.ndarray:
    mul = K2 + n.astype(U64) * np.uint64(2)
    a = p.fetch64(s) * K2
    b = p.fetch64(s + 8)
    c = p.fetch64(s + n - 8) * mul
    d = p.fetch64(s + n - 16) * K2
    y = _rotate(a + b, 43) + _rotate(c, 30) + d
    z = _hash_len16(y, a + _rotate(b + K2, 18) + c, mul)
    e = p.fetch64(s + 16) * mul
    f = p.fetch64(s + 24)
    g = (y + p.fetch64(s + n - 32)) * mul
    h = (z + p.fetch64(s + n - 24)) * mul
    return _hash_len16(_rotate(e + f, 43) + _rotate(g, 30) + h, e + _rotate(f + a, 18) + g, mul)


def _weak_hash_len32_with_seeds(p: _Packed, s: np.ndarray, a: np.ndarray,
                                b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    w, x, y, z = p.fetch64(s), p.fetch64(s + 8), p.fetch64(s + 16), p.fetch64(s + 24)
    a = a + w
    b = _rotate(b + a + z, 21)
    c = a
    a = a + x + y
    b = b + _rotate(a, 44)
    return a + z, b + c


def _len65plus(p: _Packed, s: np.ndarray, n: np.ndarray) -> np.ndarray:
    """farmhashna::Hash64's loop over 64-byte blocks, then its last (overlapping) 64 bytes."""
    count = len(s)
    seed = np.uint64(81)
    x = np.full(count, seed, dtype=U64)
    y = x * K1 + np.uint64(113)
    z = _shift_mix(y * K2 + np.uint64(113)) * K2
    v0, v1, w0, w1 = (np.zeros(count, dtype=U64) for _ in range(4))
    x = x * K2 + p.fetch64(s)
    blocks = (n - 1) // 64
    for block in range(int(blocks.max())):
        rows = np.nonzero(blocks > block)[0]
        at = s[rows] + 64 * block
        xr, yr, zr = x[rows], y[rows], z[rows]
        v0r, v1r, w0r, w1r = v0[rows], v1[rows], w0[rows], w1[rows]
        xr = _rotate(xr + yr + v0r + p.fetch64(at + 8), 37) * K1
        yr = _rotate(yr + v1r + p.fetch64(at + 48), 42) * K1
        xr = xr ^ w1r
        yr = yr + v0r + p.fetch64(at + 40)
        zr = _rotate(zr + w0r, 33) * K1
        v0r, v1r = _weak_hash_len32_with_seeds(p, at, v1r * K1, xr + w0r)
        w0r, w1r = _weak_hash_len32_with_seeds(p, at + 32, zr + w1r, yr + p.fetch64(at + 16))
        x[rows], y[rows], z[rows] = zr, yr, xr  # std::swap(z, x)
        v0[rows], v1[rows], w0[rows], w1[rows] = v0r, v1r, w0r, w1r
    mul = K1 + ((z & np.uint64(0xFF)) << np.uint64(1))
    last64 = s + n - 64
    w0 = w0 + ((n - 1) & 63).astype(U64)
    v0 = v0 + w0
    w0 = w0 + v0
    x = _rotate(x + y + v0 + p.fetch64(last64 + 8), 37) * mul
    y = _rotate(y + v1 + p.fetch64(last64 + 48), 42) * mul
    x = x ^ (w1 * np.uint64(9))
    y = y + v0 * np.uint64(9) + p.fetch64(last64 + 40)
    z = _rotate(z + w0, 33) * mul
    v0, v1 = _weak_hash_len32_with_seeds(p, last64, v1 * mul, x + w0)
    w0, w1 = _weak_hash_len32_with_seeds(p, last64 + 32, z + w1, y + p.fetch64(last64 + 16))
    x, z = z, x
    return _hash_len16(_hash_len16(v0, w0, mul) + _shift_mix(y) * K0 + z, _hash_len16(v1, w1, mul) + x, mul)


def fingerprint64(strings: Sequence[bytes]) -> np.ndarray:
    """TensorFlow's ``Fingerprint64`` (FarmHash ``farmhashna::Hash64``) of each string."""
    p = _Packed(_as_bytes_list(strings))
    out = np.empty(len(p.lengths), dtype=U64)
    n = p.lengths
    for branch, chosen in ((_len0to16, n <= 16), (_len17to32, (n > 16) & (n <= 32)),
                           (_len33to64, (n > 32) & (n <= 64)), (_len65plus, n > 64)):
        if chosen.any():
            out[chosen] = branch(p, p.starts[chosen], n[chosen])
    return out


def fingerprint_cat64(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """TensorFlow's ``FingerprintCat64(fp1, fp2)``: two fingerprints combined (order matters)."""
    first = np.asarray(first).astype(U64)
    second = np.asarray(second).astype(U64)
    result = first ^ _CAT_MUL
    result = result ^ (_shift_mix(second * _CAT_MUL) * _CAT_MUL)
    result = result * _CAT_MUL
    result = _shift_mix(result) * _CAT_MUL
    return _shift_mix(result)


def _sip_round(v0: np.ndarray, v1: np.ndarray, v2: np.ndarray,
               v3: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    v0 = v0 + v1
    v1 = _rotate_left(v1, 13) ^ v0
    v0 = _rotate_left(v0, 32)
    v2 = v2 + v3
    v3 = _rotate_left(v3, 16) ^ v2
    v0 = v0 + v3
    v3 = _rotate_left(v3, 21) ^ v0
    v2 = v2 + v1
    v1 = _rotate_left(v1, 17) ^ v2
    v2 = _rotate_left(v2, 32)
    return v0, v1, v2, v3


def _last_word(p: _Packed, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The final SipHash/Murmur word: the 0..7 bytes after the last whole 8-byte word,
    little-endian (later bytes of the buffer masked off)."""
    tail = lengths & 7
    word = p.fetch64(starts + lengths - tail)
    keep = (np.uint64(1) << (tail.astype(U64) * np.uint64(8))) - np.uint64(1)
    last: np.ndarray = word & keep
    return last


def siphash24(strings: Sequence[bytes], key: Sequence[int]) -> np.ndarray:
    """SipHash-2-4 of each string under the 128-bit ``key`` (two uint64 words, as TensorFlow's
    ``StrongKeyedHash`` takes them)."""
    if len(key) != 2:
        raise ValueError(f"SipHash takes a key of 2 integers, got {list(key)}")
    k0, k1 = (np.uint64(int(k) & 0xFFFFFFFFFFFFFFFF) for k in key)
    p = _Packed(_as_bytes_list(strings))
    count, n = len(p.lengths), p.lengths
    v0 = np.full(count, k0 ^ np.uint64(0x736F6D6570736575), dtype=U64)
    v1 = np.full(count, k1 ^ np.uint64(0x646F72616E646F6D), dtype=U64)
    v2 = np.full(count, k0 ^ np.uint64(0x6C7967656E657261), dtype=U64)
    v3 = np.full(count, k1 ^ np.uint64(0x7465646279746573), dtype=U64)
    words = n // 8
    for index in range(int(words.max()) if count else 0):
        rows = np.nonzero(words > index)[0]
        m = p.fetch64(p.starts[rows] + 8 * index)
        a, b, c, d = v0[rows], v1[rows], v2[rows], v3[rows] ^ m
        for _ in range(2):
            a, b, c, d = _sip_round(a, b, c, d)
        v0[rows], v1[rows], v2[rows], v3[rows] = a ^ m, b, c, d
    last = _last_word(p, p.starts, n) | ((n.astype(U64) & np.uint64(0xFF)) << np.uint64(56))
    v3 = v3 ^ last
    for _ in range(2):
        v0, v1, v2, v3 = _sip_round(v0, v1, v2, v3)
    v0 = v0 ^ last
    v2 = v2 ^ np.uint64(0xFF)
    for _ in range(4):
        v0, v1, v2, v3 = _sip_round(v0, v1, v2, v3)
    return v0 ^ v1 ^ v2 ^ v3


def murmur_hash64(strings: Sequence[bytes], seed: int = MURMUR_SEED) -> np.ndarray:
    """TensorFlow's ``Hash64(data, n, seed)`` (MurmurHash64A) of each string."""
    p = _Packed(_as_bytes_list(strings))
    count, n = len(p.lengths), p.lengths
    r = np.uint64(47)
    h = np.uint64(seed) ^ (n.astype(U64) * _CAT_MUL)
    words = n // 8
    for index in range(int(words.max()) if count else 0):
        rows = np.nonzero(words > index)[0]
        k = p.fetch64(p.starts[rows] + 8 * index) * _CAT_MUL
        k = (k ^ (k >> r)) * _CAT_MUL
        h[rows] = (h[rows] ^ k) * _CAT_MUL
    tail = (n & 7) > 0
    h[tail] = (h[tail] ^ _last_word(p, p.starts[tail], n[tail])) * _CAT_MUL
    h = (h ^ (h >> r)) * _CAT_MUL
    hashes: np.ndarray = h ^ (h >> r)
    return hashes
