import { hash } from "node:crypto";

/** A member's SHA-256 (one-shot: no Hash object per member), as 8 words: a digest XORs it in 8 steps, not 32. */
export function memberHash(text: string): Uint32Array {
  const words = new Uint32Array(8);
  new Uint8Array(words.buffer).set(hash("sha256", text, "buffer"));
  return words;
}

/**
 * The digest of a set that a registry watch's messages carry as `hash` (the SSE `id:`): the XOR of its members' hashes.
 * XOR makes it independent of the order the set was built in, and lets a watch add or remove one member per change
 * instead of hashing the whole set again (a service may have 8,000 instances and 50 watches).
 */
export class SetDigest {
  private readonly words = new Uint32Array(8);

  /** `members` as a fresh digest (the first message's: one pass). */
  static of(members: Iterable<Uint32Array>): SetDigest {
    const digest = new SetDigest();
    digest.reset(members);
    return digest;
  }

  /** Adds a member that is not in the set. */
  add(member: Uint32Array): void {
    const w = this.words;
    for (let i = 0; i < 8; i++) w[i] ^= member[i];
  }

  /** Removes a member that is in the set (XOR is its own inverse). */
  remove(member: Uint32Array): void {
    this.add(member);
  }

  /** Makes it the digest of `members` alone. */
  reset(members: Iterable<Uint32Array>): void {
    this.words.fill(0);
    for (const m of members) this.add(m);
  }

  /** Lower-case hex (XOR works on the same bytes whatever the words' byte order): visible ASCII, fit for an SSE `id:`. */
  hex(): string {
    return Buffer.from(this.words.buffer).toString("hex");
  }
}
