/**
 * Seed namespace rule 3: the client library converts a configured plain namespace such as `dev` to `{dev}`, so that
 * a service configured with a bare name lands in the tagged namespace the server requires (the server itself never
 * adds braces). A name that already has braces — `{dev}`, `cosky-{dev}` — is sent exactly as given; one with braces
 * but no valid tag is sent as given too, so the server's invalid_argument explains it instead of a guess here.
 */
export function toNamespace(name: string): string {
  return name.includes("{") || name.includes("}") ? name : `{${name}}`;
}
