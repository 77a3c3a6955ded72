/** What stands for a secret in a log line or a message. */
export const REDACTED = '[redacted]';

/**
 * A function that hides each of `secrets` (longest first, as `secretValues` orders them) in a text:
 * what an upstream writes to stderr or says in an error may hold a token its config gave it.
 */
export function redactor(secrets: readonly string[]): (text: string) => string {
  if (secrets.length === 0) return (text) => text;
  return (text) => {
    let out = text;
    for (const secret of secrets) if (out.includes(secret)) out = out.split(secret).join(REDACTED);
    return out;
  };
}
