import { randomBytes, randomUUID } from "node:crypto";
import { errors, jwtVerify, SignJWT } from "jose";

export type TokenUse = "access" | "refresh";

export interface VerifiedToken {
  username: string;
  /** The token's id (a refresh token names its access token's in `aid`). */
  jti: string;
  aid?: string;
  /** epoch ms */
  expiresAt: number;
  /** epoch s (the `iat` claim) */
  issuedAt: number;
  /** The user's session stamp when the token was issued (the `ses` claim; absent in tokens of earlier releases). */
  session?: string;
}

/** Why a token was refused, for the 401's message (never which part of a signature failed). */
export class TokenRefused extends Error {}

const ALG = "HS256";

/**
 * Signs and checks the JWTs (contract §7): HS256 only (jose refuses `alg: none` and every other algorithm), a `use`
 * claim saying access or refresh (one is never accepted for the other), and a refresh token bound to its access token.
 */
export function createTokens(secret: string, validity: { accessMs: number; refreshMs: number }, now: () => number = Date.now) {
  const key = new TextEncoder().encode(secret);
  const issue = async (username: string, session: string | undefined): Promise<{ accessToken: string; refreshToken: string }> => {
    const iat = Math.floor(now() / 1000);
    const aid = randomUUID();
    const ses = session === undefined ? {} : { ses: session };
    const accessToken = await new SignJWT({ use: "access", ...ses })
      .setProtectedHeader({ alg: ALG, typ: "JWT" })
      .setSubject(username)
      .setJti(aid)
      .setIssuedAt(iat)
      .setExpirationTime(iat + Math.ceil(validity.accessMs / 1000))
      .sign(key);
    const refreshToken = await new SignJWT({ use: "refresh", aid, ...ses })
      .setProtectedHeader({ alg: ALG, typ: "JWT" })
      .setSubject(username)
      .setJti(randomUUID())
      .setIssuedAt(iat)
      .setExpirationTime(iat + Math.ceil(validity.refreshMs / 1000))
      .sign(key);
    return { accessToken, refreshToken };
  };
  const verify = async (token: string, use: TokenUse, opts: { ignoreExpiry?: boolean } = {}): Promise<VerifiedToken> => {
    let payload;
    try {
      ({ payload } = await jwtVerify(token, key, {
        algorithms: [ALG],
        currentDate: new Date(now()),
        // an expired access token may still be traded with its (valid) refresh token
        ...(opts.ignoreExpiry ? { clockTolerance: Number.MAX_SAFE_INTEGER } : {}),
      }));
    } catch (err) {
      if (err instanceof errors.JWTExpired) throw new TokenRefused(`the ${use} token has expired: ${use === "access" ? "refresh it or log in again" : "log in again"}`);
      throw new TokenRefused(`the ${use} token is not valid: log in again`);
    }
    if (payload.use !== use) {
      const sent = String(payload.use ?? "foreign");
      // "an access token", not "a access token": the article follows the word sent
      throw new TokenRefused(`${/^[aeiou]/i.test(sent) ? "an" : "a"} ${sent} token was sent where the ${use} token is expected: send the ${use}Token the login answered with`);
    }
    if (typeof payload.sub !== "string" || typeof payload.jti !== "string" || typeof payload.exp !== "number" || typeof payload.iat !== "number") throw new TokenRefused(`the ${use} token is not valid: log in again`);
    return {
      username: payload.sub,
      jti: payload.jti,
      aid: typeof payload.aid === "string" ? payload.aid : undefined,
      expiresAt: payload.exp * 1000,
      issuedAt: payload.iat,
      session: typeof payload.ses === "string" ? payload.ses : undefined,
    };
  };
  return { issue, verify };
}

export type Tokens = ReturnType<typeof createTokens>;

/** A new session stamp for a user (see UserRecord.session). */
export const newSession = () => randomBytes(12).toString("base64url");

/** A fresh JWT key for when no secret is configured (stored in the system namespace, shared by every replica). */
export const generateJwtKey = () => randomBytes(48).toString("base64url");
