import { Type } from 'typebox';

/** The `Prefer` request header of a tool call, as the document describes it. */
export const PreferHeader = Type.Object({
  prefer: Type.Optional(
    Type.String({
      description:
        '`respond-async` (RFC 7240): run the call as a task and answer 202 at once, with `Location: /tasks/{id}` and `Preference-Applied: respond-async`; not with `format`. Other preferences are ignored.',
    }),
  ),
});

/** The 202 of a call run as a task. */
export const TASK_ACCEPTED = {
  description: 'With `Prefer: respond-async`: the call runs as a task. The body is the task (usually `working`); `Location` is where to ask for it.',
  content: { 'application/json': { schema: Type.Ref('Task') } },
  headers: {
    Location: { type: 'string', description: 'The task: `/tasks/{id}`.' },
    'Preference-Applied': { type: 'string', enum: ['respond-async'], description: 'The preference honoured.' },
  },
};

/**
 * Whether a request's `Prefer` headers ask for `respond-async` (RFC 7240 section 4.1): the
 * preferences are comma-separated, each a token with an optional value and parameters after `;`,
 * and their names are case-insensitive; several headers count as one list.
 */
export function prefersAsync(prefer: string | string[] | undefined): boolean {
  if (prefer === undefined) return false;
  for (const header of Array.isArray(prefer) ? prefer : [prefer]) {
    for (const preference of header.split(',')) {
      const name = preference.split(/[;=]/, 1)[0]!.trim().toLowerCase();
      if (name === 'respond-async') return true;
    }
  }
  return false;
}
