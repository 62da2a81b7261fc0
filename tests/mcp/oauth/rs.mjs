// An MCP server (the official TypeScript SDK, Streamable HTTP) that requires bearer tokens
// of the authorization server at AS_URL (checked by introspection), with the SDK's
// protected resource metadata (RFC 9728) and 401 challenges. Env: RS_PORT, AS_URL.
import express from 'express';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { requireBearerAuth } from '@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js';
import { mcpAuthMetadataRouter, getOAuthProtectedResourceMetadataUrl } from '@modelcontextprotocol/sdk/server/auth/router.js';
import { InvalidTokenError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import { z } from 'zod';

const port = Number(process.env.RS_PORT);
const resource = new URL(`http://127.0.0.1:${port}/mcp`);
const asMeta = await (await fetch(`${process.env.AS_URL}/.well-known/oauth-authorization-server`)).json();
const basic = 'Basic ' + Buffer.from('mcp-rs:rs-secret').toString('base64');

const verifier = {
  async verifyAccessToken(token) {
    const r = await fetch(asMeta.introspection_endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic },
      body: new URLSearchParams({ token }),
    });
    const i = await r.json();
    if (!i.active) throw new InvalidTokenError('inactive token');
    const aud = Array.isArray(i.aud) ? i.aud[0] : i.aud;
    return { token, clientId: i.client_id, scopes: (i.scope ?? '').split(' ').filter(Boolean), expiresAt: i.exp, resource: aud ? new URL(aud) : undefined };
  },
};

const app = express();
// Each request on stdout: method, path, whether it carried a token, the answer.
app.use((req, res, next) => {
  res.on('finish', () => console.log(`${req.method} ${req.path} ${req.headers.authorization ? 'bearer' : 'none'} ${res.statusCode}`));
  next();
});
app.use(mcpAuthMetadataRouter({ oauthMetadata: asMeta, resourceServerUrl: resource, scopesSupported: ['mcp:tools'], resourceName: 'Outpost OAuth test' }));
const auth = requireBearerAuth({ verifier, requiredScopes: ['mcp:tools'], resourceMetadataUrl: getOAuthProtectedResourceMetadataUrl(resource), expectedResource: resource });
app.post('/mcp', auth, express.json(), async (req, res) => {
  const server = new McpServer({ name: 'oauth-test', version: '1.0.0' });
  server.tool('whoami', 'Which OAuth client is calling', async () => ({ content: [{ type: 'text', text: `client ${req.auth.clientId}` }] }));
  server.tool('echo', 'Echoes the message', { message: z.string() }, async ({ message }) => ({ content: [{ type: 'text', text: `Echo: ${message}` }] }));
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
  res.on('close', () => { transport.close(); server.close(); });
  await server.connect(transport);
  await transport.handleRequest(req, res, req.body);
});
app.listen(port, '127.0.0.1', () => console.log(`ready ${resource}`));
