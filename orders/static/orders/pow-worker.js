// A proof of work's solver, in a Web Worker so that the page stays responsive: given
// {challenge, bits}, finds the first nonce such that SHA-256 of "<challenge>:<nonce>"
// starts with `bits` zero bits (common/challenges.py checks it), posting
// {tried} every 16,384 tries and {solution: "<challenge>:<nonce>", tried} at the end.
// SHA-256 by hand (FIPS 180-4): crypto.subtle's digest is a promise per hash, many
// times slower in a loop of hundreds of thousands.
"use strict";

const K = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);
const W = new Uint32Array(64);
const H = new Uint32Array(8);

// SHA-256 of `bytes` (its first `length`), the 8 words of the digest into H.
function sha256(bytes, length) {
  const blocks = Math.ceil((length + 9) / 64);
  const padded = new Uint8Array(blocks * 64);
  padded.set(bytes.subarray(0, length));
  padded[length] = 0x80;
  const view = new DataView(padded.buffer);
  view.setUint32(padded.length - 4, length * 8);
  H.set([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
  for (let block = 0; block < blocks; block++) {
    for (let t = 0; t < 16; t++) W[t] = view.getUint32(block * 64 + t * 4);
    for (let t = 16; t < 64; t++) {
      const a = W[t - 15], b = W[t - 2];
      const s0 = ((a >>> 7) | (a << 25)) ^ ((a >>> 18) | (a << 14)) ^ (a >>> 3);
      const s1 = ((b >>> 17) | (b << 15)) ^ ((b >>> 19) | (b << 13)) ^ (b >>> 10);
      W[t] = (W[t - 16] + s0 + W[t - 7] + s1) | 0;
    }
    let [a, b, c, d, e, f, g, h] = H;
    for (let t = 0; t < 64; t++) {
      const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
      const t1 = (h + S1 + ((e & f) ^ (~e & g)) + K[t] + W[t]) | 0;
      const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
      const t2 = (S0 + ((a & b) ^ (a & c) ^ (b & c))) | 0;
      h = g; g = f; f = e; e = (d + t1) | 0; d = c; c = b; b = a; a = (t1 + t2) | 0;
    }
    H[0] += a; H[1] += b; H[2] += c; H[3] += d; H[4] += e; H[5] += f; H[6] += g; H[7] += h;
  }
  return H;
}

// How many zero bits the digest in H starts with.
function zeroBits(digest) {
  let bits = 0;
  for (const word of digest) {
    if (word === 0) { bits += 32; continue; }
    return bits + Math.clz32(word);
  }
  return bits;
}

function solve(challenge, bits) {
  const prefix = new TextEncoder().encode(challenge + ":");
  const buffer = new Uint8Array(prefix.length + 20);
  buffer.set(prefix);
  for (let nonce = 0; ; nonce++) {
    const digits = String(nonce);
    for (let i = 0; i < digits.length; i++) buffer[prefix.length + i] = digits.charCodeAt(i);
    if (zeroBits(sha256(buffer, prefix.length + digits.length)) >= bits) {
      return {solution: `${challenge}:${digits}`, tried: nonce + 1};
    }
    if ((nonce & 0x3fff) === 0x3fff) self.postMessage({tried: nonce + 1});
  }
}

self.onmessage = (event) => {
  if (event.data.digest !== undefined) {  // a test's: the hex digest of a string
    const bytes = new TextEncoder().encode(event.data.digest);
    self.postMessage({hex: Array.from(sha256(bytes, bytes.length), (w) => w.toString(16).padStart(8, "0")).join("")});
    return;
  }
  self.postMessage(solve(event.data.challenge, event.data.bits));
};
