import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { UnauthorizedError, type OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { decodeJwt } from 'jose';
import { freePort } from '../support/ports.js';
import { followAuthorization, startTestIssuer, TEST_USER, type TestIssuer } from '../support/oidc-provider.js';
import { kill, startServer, type ServerProcess } from '../support/server-process.js';

const REDIRECT = 'http://127.0.0.1:1/callback';

/** What an MCP client keeps of its OAuth state, in memory; the "browser" follows the redirects at once. */
class TestAuthProvider implements OAuthClientProvider {
  #client: OAuthClientInformationMixed | undefined;
  #tokens: OAuthTokens | undefined;
  #verifier = '';
  /** The authorization code, once the browser came back with it. */
  code: Promise<string> | undefined;

  get redirectUrl(): string {
    return REDIRECT;
  }
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: 'toolport e2e',
      redirect_uris: [REDIRECT],
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  clientInformation(): OAuthClientInformationMixed | undefined {
    return this.#client;
  }
  saveClientInformation(info: OAuthClientInformationMixed): void {
    this.#client = info;
  }
  tokens(): OAuthTokens | undefined {
    return this.#tokens;
  }
  saveTokens(tokens: OAuthTokens): void {
    this.#tokens = tokens;
  }
  redirectToAuthorization(url: URL): void {
    this.code = followAuthorization(url, REDIRECT);
  }
  saveCodeVerifier(verifier: string): void {
    this.#verifier = verifier;
  }
  codeVerifier(): string {
    return this.#verifier;
  }
}

let idp: TestIssuer;
let server: ServerProcess;
let publicUrl: string;
before(async () => {
  idp = await startTestIssuer();
  const port = await freePort();
  publicUrl = `http://127.0.0.1:${port}`;
  server = await startServer({
    PORT: String(port),
    TOOLPORT_TOOLS: 'Echo,Read',
    TOOLPORT_OAUTH_ISSUER: idp.issuer,
    TOOLPORT_PUBLIC_URL: publicUrl,
    TOOLPORT_BASH_SANDBOX: 'false',
  });
});
after(async () => {
  kill(server);
  await idp.close();
});

test("the MCP SDK client's own OAuth finds the issuer, registers, gets a token for /mcp, lists and calls tools; the token works on REST", async () => {
  const provider = new TestAuthProvider();
  const first = new StreamableHTTPClientTransport(new URL(`${publicUrl}/mcp`), { authProvider: provider });
  // No token yet: the 401 names the metadata, the SDK discovers the issuer, registers a client and sends the browser.
  await assert.rejects(new Client({ name: 'e2e', version: '1.0.0' }).connect(first), UnauthorizedError);
  assert.ok(provider.clientInformation()?.client_id, 'registered with the authorization server');
  await first.finishAuth(await provider.code!);
  const token = provider.tokens()!.access_token;
  const claims = decodeJwt(token);
  assert.equal(claims.sub, TEST_USER);
  assert.equal(claims.aud, `${publicUrl}/mcp`);

  const client = new Client({ name: 'e2e', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${publicUrl}/mcp`), { authProvider: provider }));
  try {
    const { tools } = await client.listTools();
    assert.deepEqual(
      tools.map((t) => t.name),
      ['Echo', 'Read'],
    );
    const result = await client.callTool({ name: 'Echo', arguments: { text: 'over oauth' } });
    assert.deepEqual(result.content, [{ type: 'text', text: 'over oauth' }]);
  } finally {
    await client.close();
  }
  const audit = await server.logLine((line) => line.tool === 'Echo' && line.transport === 'mcp');
  assert.equal(audit.key, `sub:${TEST_USER}`);

  const rest = await fetch(`${publicUrl}/tools/Echo`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ text: 'over rest' }),
  });
  assert.equal(rest.status, 200);
  assert.deepEqual(await rest.json(), { content: [{ type: 'text', text: 'over rest' }], isError: false });
});

test('a service token from client credentials calls REST', async () => {
  const token = await idp.clientCredentials({ resource: publicUrl, scope: 'tools:Echo' });
  const response = await fetch(`${publicUrl}/tools/Echo`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ text: 'service' }),
  });
  assert.equal(response.status, 200);
});
