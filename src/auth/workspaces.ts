import { randomBytes } from 'node:crypto';
import type { KeySpec } from './keyring.js';
import { mappingRules, mapRules, type OAuthMapping } from './mapping.js';

const LABEL = 'oauth ';

/**
 * The callers of access tokens as keys, for `openKeyWorkspaces`, so that the workspaces a mapping
 * gives subjects and groups are opened and checked as keys' are (they exist, do not nest, Bash is
 * sandboxed when there are several): one per rule with a workspace, in the mapping's order, and
 * one for every token caller without a workspace of its own, who works in the server's. Their
 * secrets are random and never used. Throws for a key whose label would look like a token's caller.
 */
export function tokenCallersAsKeys(mapping: OAuthMapping | undefined, keys: readonly KeySpec[]): KeySpec[] {
  const clash = keys.find((key) => key.label.startsWith('sub:'));
  if (clash !== undefined) {
    throw new Error(`Invalid key label "${clash.label}": with TOOLPORT_OAUTH_ISSUER set, labels starting "sub:" name the callers of access tokens`);
  }
  const anyone: KeySpec = { label: `${LABEL}callers without a workspace of their own`, key: secret() };
  return [anyone, ...rulesWithWorkspaces(mapping).map(([name, rule]) => ({ label: `${LABEL}${name}`, key: secret(), workspace: rule.workspace }))];
}

/** The mapping with each workspace as `openKeyWorkspaces` made it canonical (`opened`: its keys for `tokenCallersAsKeys`' keys, in order). */
export function withWorkspaces(mapping: OAuthMapping, opened: readonly KeySpec[]): OAuthMapping {
  const roots = opened.slice(1).map((key) => key.workspace);
  let next = 0;
  return mapRules(mapping, (rule) => (rule.workspace === undefined ? rule : { ...rule, workspace: roots[next++] }));
}

/** Each entry with a workspace, as a key's label and the rule: `subject "alice"`, or `subject "alice" of <issuer>` in an issuer's section. */
function rulesWithWorkspaces(mapping: OAuthMapping | undefined): Array<[string, { workspace?: string }]> {
  if (mapping === undefined) return [];
  return mappingRules(mapping)
    .filter(({ rule }) => rule.workspace !== undefined)
    .map(({ section, kind, name, rule }) => [
      `${kind === 'subjects' ? 'subject' : 'group'} ${JSON.stringify(name)}${section.issuer === undefined ? '' : ` of ${section.issuer}`}`,
      rule,
    ]);
}

function secret(): string {
  return randomBytes(32).toString('hex');
}
