import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";

/** scrypt cost: N=2^14, r=8 (~16 MiB, tens of ms per hash): slow for guessing, bearable for logins. */
const PARAMS: ScryptOptions = { N: 16384, r: 8, p: 1, maxmem: 64 * 1024 * 1024 };
const KEY_BYTES = 32;
/** The longest password hashed: longer ones are refused before any work (scrypt's cost grows with the input). */
export const MAX_PASSWORD_BYTES = 1024;

/**
 * Hashes running or waiting at once. Each costs tens of ms of a libuv thread (shared with file and DNS work); past this
 * many, a flood of logins is refused (429) instead of queueing minutes of work.
 */
export const MAX_CONCURRENT_HASHES = 32;
let running = 0;

function derive(password: string, salt: Buffer): Promise<Buffer> {
  if (running >= MAX_CONCURRENT_HASHES) return Promise.reject(new ConnectError("too many logins at once: retry in a moment", Code.ResourceExhausted));
  running++;
  return new Promise<Buffer>((resolve, reject) => scrypt(password.normalize("NFC"), salt, KEY_BYTES, PARAMS, (err, key) => (err ? reject(err) : resolve(key)))).finally(() => running--);
}

/** A new salted hash of `password`, base64 parts as the store keeps them. */
export async function hashPassword(password: string): Promise<{ salt: string; hash: string }> {
  const salt = randomBytes(16);
  return { salt: salt.toString("base64"), hash: (await derive(password, salt)).toString("base64") };
}

/** A salted hash no password matches: checked for unknown users, so they take the same time as known ones. */
export const DUMMY_HASH = { salt: randomBytes(16).toString("base64"), hash: randomBytes(KEY_BYTES).toString("base64") };

/** Whether `password` matches; the comparison takes the same time wherever the bytes differ. */
export async function verifyPassword(password: string, stored: { salt: string; hash: string }): Promise<boolean> {
  const expected = Buffer.from(stored.hash, "base64");
  const actual = await derive(password, Buffer.from(stored.salt, "base64"));
  return expected.length === actual.length && timingSafeEqual(expected, actual);
}

/** A random password for the super user: 24 characters of base64url (144 bits). */
export const generatePassword = () => randomBytes(18).toString("base64url");
