// A real OAuth 2.1 authorization server for outpost-mcp's sign-in tests: oidc-provider
// (certified OpenID/OAuth server) with open dynamic client registration (RFC 7591), PKCE
// (S256, required for public clients), refresh tokens, revocation (RFC 7009),
// introspection (RFC 7662, for the MCP server) and resource indicators (RFC 8707).
// Env: AS_PORT, RESOURCE (the MCP server's URL), AT_TTL (access token lifetime, s).
// Its dev login and consent pages accept any login and password.
import Provider from 'oidc-provider';

const port = Number(process.env.AS_PORT);
const issuer = `http://127.0.0.1:${port}`;
const resource = process.env.RESOURCE;
const ttl = Number(process.env.AT_TTL ?? 60);

const provider = new Provider(issuer, {
  // The MCP server's own client, for introspection only.
  clients: [{ client_id: 'mcp-rs', client_secret: 'rs-secret', grant_types: [], response_types: [], redirect_uris: [] }],
  scopes: ['openid', 'offline_access', 'mcp:tools'],
  cookies: { keys: ['outpost-test-cookie-key'] },
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: true },
    revocation: { enabled: true },
    introspection: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: async (ctx, client, oneOf) => oneOf ?? resource,
      useGrantedResource: async () => true,
      getResourceServerInfo: async (ctx, indicator) => {
        if (indicator !== resource) throw new Provider.errors.InvalidTarget();
        return { scope: 'mcp:tools', audience: resource, accessTokenTTL: ttl, accessTokenFormat: 'opaque' };
      },
    },
  },
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
  ttl: {
    AccessToken: () => ttl, RefreshToken: () => 3600, Grant: () => 3600, Session: () => 3600,
    Interaction: () => 600, AuthorizationCode: () => 60, IdToken: () => 3600,
  },
});
// Every token grant on stdout, for the test to count refreshes.
provider.on('grant.success', (ctx) => console.log(`grant ${ctx.oidc.params.grant_type}`));
provider.listen(port, '127.0.0.1', () => console.log(`ready ${issuer}`));
