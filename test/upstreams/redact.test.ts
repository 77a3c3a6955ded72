import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { copyStructuredContent } from '#src/core/result.js';
import type { ContentBlock, ToolResult } from '#src/core/types.js';
import { NO_SECRETS, redactor, redactProgress, redactResult } from '#src/upstreams/redact.js';

const TOKEN = 'tok-0123456789abcdef';
const redact = redactor([TOKEN]);
const base64 = (text: string | Buffer) => Buffer.from(text).toString('base64');

describe('redactor', () => {
  it('hides each secret, the longer first, and gives back the text itself when it holds none', () => {
    const hide = redactor(['abcdefgh-long-secret', 'abcdefgh']);
    assert.equal(hide('x abcdefgh-long-secret y abcdefgh z'), 'x [redacted] y [redacted] z');
    const clean = 'nothing here';
    assert.equal(hide(clean), clean);
    assert.equal(redactor([]), NO_SECRETS);
  });

  it('hides the base64 and base64url forms of a secret at each of the three byte alignments, with the group each side, as in an echoed Basic header', () => {
    for (const user of ['', 'u', 'us', 'use', 'user', 'user1']) {
      const basic = base64(`${user}:${TOKEN}`);
      // The group of four characters the token starts in is hidden, or the group before when it starts one (which holds none of it).
      const before = user.length + 1;
      const kept = basic.slice(0, 4 * (before % 3 === 0 ? Math.max(0, before / 3 - 1) : Math.floor(before / 3)));
      assert.equal(redact(`Authorization: Basic ${basic}`), `Authorization: Basic ${kept}[redacted]`, user);
      assert.equal(redact(`Basic ${basic}, then more`), `Basic ${kept}[redacted], then more`, user);
    }
    const urlSafe = 'tok?>>?>>?~~~~';
    const encoded = Buffer.from(`x${urlSafe}`).toString('base64url');
    assert.ok(encoded.includes('-') || encoded.includes('_'));
    assert.equal(redactor([urlSafe])(`id=${encoded}&next=1`), 'id=[redacted]&next=1');
  });

  it('hides a secret as JSON writes it inside a string, and percent-encoded', () => {
    const quoted = 'pa"ss\\word-12345';
    const hide = redactor([quoted]);
    assert.equal(hide(`{"password":${JSON.stringify(quoted)}}`), '{"password":"[redacted]"}');
    assert.equal(hide(`https://x.example/?p=${encodeURIComponent(quoted)}&q=1`), 'https://x.example/?p=[redacted]&q=1');
  });

  it('does not look for encoded forms shorter than 8 characters, which ordinary text holds by chance', () => {
    // base64 of "abcdef" at an offset is "YmNk..." etc.: a 5-byte secret has forms of 4 characters at most.
    assert.equal(redactor(['abcde'])('YWJj ZGVm abc'), 'YWJj ZGVm abc');
  });
});

describe('redactResult', () => {
  it('hides a secret in every string of every kind of block: text, resource and resource-link fields, annotations, _meta', () => {
    const at = `https://api.example.com/${TOKEN}/report`;
    const annotations = { audience: ['user' as const], lastModified: `2025-01-01 ${TOKEN}` };
    const result: ToolResult = {
      content: [
        { type: 'text', text: `token ${TOKEN}`, annotations },
        { type: 'resource', resource: { uri: at, mimeType: `text/${TOKEN}`, text: `body ${TOKEN}` } },
        { type: 'resource_link', uri: at, name: `name ${TOKEN}`, title: `title ${TOKEN}`, description: `about ${TOKEN}`, mimeType: `x/${TOKEN}`, size: 3 },
        { type: 'text', text: 'clean', _meta: { note: TOKEN } } as ContentBlock,
      ],
      isError: false,
    };
    const link = 'https://api.example.com/[redacted]/report';
    assert.deepEqual(redactResult(result, redact), {
      content: [
        { type: 'text', text: 'token [redacted]', annotations: { audience: ['user'], lastModified: '2025-01-01 [redacted]' } },
        { type: 'resource', resource: { uri: link, mimeType: 'text/[redacted]', text: 'body [redacted]' } },
        {
          type: 'resource_link',
          uri: link,
          name: 'name [redacted]',
          title: 'title [redacted]',
          description: 'about [redacted]',
          mimeType: 'x/[redacted]',
          size: 3,
        },
        { type: 'text', text: 'clean', _meta: { note: '[redacted]' } },
      ],
      isError: false,
    });
  });

  it('hides a secret at any depth of structuredContent, in values and keys, keeping a __proto__ key its own', () => {
    const structured = copyStructuredContent(JSON.parse(`{"a":{"b":[1,"x ${TOKEN}",{"${TOKEN}":true}]},"__proto__":{"k":"${TOKEN}"},"n":null}`));
    assert.equal(typeof structured, 'object');
    const redacted = redactResult({ content: [], structuredContent: structured as Record<string, unknown> }, redact).structuredContent!;
    assert.equal(JSON.stringify(redacted), '{"a":{"b":[1,"x [redacted]",{"[redacted]":true}]},"__proto__":{"k":"[redacted]"},"n":null}');
    assert.ok(Object.hasOwn(redacted, '__proto__'));
    assert.equal(Object.getPrototypeOf(redacted), Object.prototype);
  });

  it('finds a secret JSON escapes, in structuredContent whose JSON text does not hold it as it is', () => {
    const quoted = 'pa"ss\\word-12345';
    const structured = copyStructuredContent({ deep: [{ value: `is ${quoted}` }] }) as Record<string, unknown>;
    assert.deepEqual(redactResult({ content: [], structuredContent: structured }, redactor([quoted])).structuredContent, {
      deep: [{ value: 'is [redacted]' }],
    });
  });

  it('copies nothing that holds no secret: the same result, and the same blocks and branches beside a change', () => {
    const untouched = { list: Array.from({ length: 100 }, (_, i) => ({ i, text: `item ${i}` })) };
    const structured = copyStructuredContent({ untouched, touched: { secret: TOKEN } }) as Record<string, unknown>;
    const image: ContentBlock = { type: 'image', source: { type: 'base64', media_type: 'image/png', data: base64(Buffer.from([0x89, 0x50, 0x4e, 0x47])) } };
    const text: ContentBlock = { type: 'text', text: 'clean' };
    const clean: ToolResult = { content: [text, image], structuredContent: copyStructuredContent({ untouched }) as Record<string, unknown> };
    assert.equal(redactResult(clean, redact), clean);

    const result: ToolResult = { content: [text, image, { type: 'text', text: TOKEN }], structuredContent: structured };
    const redacted = redactResult(result, redact);
    assert.equal(redacted.content[0], text);
    assert.equal(redacted.content[1], image);
    assert.deepEqual(redacted.content[2], { type: 'text', text: '[redacted]' });
    assert.equal((redacted.structuredContent as typeof structured)['untouched'], structured['untouched']);
    assert.deepEqual((redacted.structuredContent as typeof structured)['touched'], { secret: '[redacted]' });
    assert.equal((result.content[2] as { text: string }).text, TOKEN, 'the result given is not changed');
  });

  it('looks at nothing when the upstream has no secrets', () => {
    const result = { content: [] } as unknown as ToolResult;
    Object.defineProperty(result, 'content', {
      get() {
        throw new Error('read');
      },
    });
    assert.equal(redactResult(result, NO_SECRETS), result);
    assert.equal(redactResult(result, redactor([])), result);
  });

  it('takes a secret out of a text blob, whatever its byte alignment, and encodes the rest again', () => {
    for (const before of ['', 'a', 'ab']) {
      const block: ContentBlock = { type: 'resource', resource: { uri: 'file:///r.txt', mimeType: 'text/plain', blob: base64(`${before}key=${TOKEN}; é`) } };
      const [out] = redactResult({ content: [block] }, redact).content;
      assert.deepEqual(out, { type: 'resource', resource: { uri: 'file:///r.txt', mimeType: 'text/plain', blob: base64(`${before}key=[redacted]; é`) } });
    }
  });

  it('leaves out an image, audio or binary blob whose bytes hold a secret, saying so where it stood', () => {
    const binary = (offset: number) => base64(Buffer.concat([Buffer.from([0x89, 0xff, 0xfe].slice(0, offset + 1)), Buffer.from(TOKEN), Buffer.from([0xc3])]));
    const result: ToolResult = {
      content: [
        { type: 'text', text: 'before' },
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: binary(0) } },
        { type: 'audio', source: { type: 'base64', media_type: 'audio/wav', data: binary(1) } },
        { type: 'resource', resource: { uri: 'file:///a.bin', blob: binary(2) } },
      ],
    };
    assert.deepEqual(redactResult(result, redact).content, [
      { type: 'text', text: 'before' },
      { type: 'text', text: '[content[1] is an image whose data held a secret; left out]' },
      { type: 'text', text: '[content[2] is audio whose data held a secret; left out]' },
      { type: 'text', text: '[content[3] is a resource whose blob held a secret; left out]' },
    ]);
  });

  it('hides a secret in the other fields of a block whose data holds none, and leaves its data as it is', () => {
    const data = base64(Buffer.from([1, 2, 3, 4, 5, 6]));
    const block: ContentBlock = { type: 'resource', resource: { uri: `https://x.example/${TOKEN}`, blob: data } };
    assert.deepEqual(redactResult({ content: [block] }, redact).content, [{ type: 'resource', resource: { uri: 'https://x.example/[redacted]', blob: data } }]);
  });
});

describe('redactProgress', () => {
  it("hides a secret in a progress report's message and any other string, and gives back a clean report itself", () => {
    const update = { progress: 1, total: 3, message: `calling with ${TOKEN}`, _meta: { [`k ${TOKEN}`]: 'v' } };
    assert.deepEqual(redactProgress(update, redact), { progress: 1, total: 3, message: 'calling with [redacted]', _meta: { 'k [redacted]': 'v' } });
    const clean = { progress: 2, message: 'step 2' };
    assert.equal(redactProgress(clean, redact), clean);
    assert.equal(redactProgress(update, NO_SECRETS), update);
  });
});
