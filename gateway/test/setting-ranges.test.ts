import { describe, expect, it } from "vitest";
import { createTestGateway } from "./harness.js";

/**
 * Values a setting's form allows but the product cannot use stop startup, naming the setting and the range, instead of
 * running wrongly: a heartbeat past the longest timer fired ~900 times a second; a request timeout of 0 switched the
 * slow-request cut off; a body limit of 0 stopped startup with Fastify's own words, or refused every body.
 */
describe("settings out of their range stop startup with the setting named", () => {
  it.each([
    ["GOV_SSE_HEARTBEAT", "25d", /setting gov\.sse\.heartbeat \(from environment variable GOV_SSE_HEARTBEAT\) is invalid: "25d" is out of range: use a duration from 100ms to 2147483647ms/],
    ["GOV_LIMITS_REQUEST_TIMEOUT", "0s", /setting gov\.limits\.request-timeout \(from environment variable GOV_LIMITS_REQUEST_TIMEOUT\) is invalid: "0s" is out of range: use a duration from 1s to/],
    ["GOV_SHUTDOWN_GRACE", "30d", /setting gov\.shutdown\.grace .* is out of range/],
    ["GOV_LIMITS_JSON_BODY", "0", /setting gov\.limits\.json-body \(from environment variable GOV_LIMITS_JSON_BODY\) is invalid: "0" is out of range: use a size at least 1 byte/],
    ["GOV_LIMITS_CONFIG_CONTENT", "0", /setting gov\.limits\.config-content .* is out of range: use a size at least 1 byte/],
    ["GOV_LIMITS_ZIP_UPLOAD", "0", /setting gov\.limits\.zip-upload .* is out of range/],
    ["GOV_LIMITS_ZIP_UNCOMPRESSED", "0", /setting gov\.limits\.zip-uncompressed .* is out of range/],
  ])("%s=%s", async (name, value, message) => {
    await expect(createTestGateway(undefined, undefined, true, { [name]: value })).rejects.toThrow(message);
  });
});
