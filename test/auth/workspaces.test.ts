import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseMapping } from '#src/auth/mapping.js';
import { tokenCallersAsKeys, withWorkspaces } from '#src/auth/workspaces.js';

const ISS = 'https://idp.example.com';
const OTHER = 'https://partner.example.org';

test("the workspaces of every section's entries are opened as keys', named with their issuer, and put back in place", () => {
  const mapping = parseMapping(
    {
      issuers: {
        [ISS]: { subjects: { alice: { workspace: '/srv/alice' } }, groups: { ops: { workspace: '/srv/ops' }, readers: { tools: ['Read'] } } },
        [OTHER]: { subjects: { alice: { workspace: '/srv/partner-alice' } } },
      },
    },
    'oauth.json',
  );
  const keys = tokenCallersAsKeys(mapping, []);
  assert.deepEqual(
    keys.map((key) => [key.label, key.workspace]),
    [
      ['oauth callers without a workspace of their own', undefined],
      [`oauth subject "alice" of ${ISS}`, '/srv/alice'],
      [`oauth group "ops" of ${ISS}`, '/srv/ops'],
      [`oauth subject "alice" of ${OTHER}`, '/srv/partner-alice'],
    ],
  );
  // As openKeyWorkspaces hands them back, made canonical: each goes back to its own entry.
  const opened = keys.map((key) => (key.workspace === undefined ? key : { ...key, workspace: `/real${key.workspace}` }));
  const canonical = withWorkspaces(mapping, opened);
  assert.equal(canonical.issuers[ISS]?.subjects.alice?.workspace, '/real/srv/alice');
  assert.equal(canonical.issuers[ISS]?.groups.ops?.workspace, '/real/srv/ops');
  assert.deepEqual(canonical.issuers[ISS]?.groups.readers, { tools: ['Read'] });
  assert.equal(canonical.issuers[OTHER]?.subjects.alice?.workspace, '/real/srv/partner-alice');
});
