// A real OpenID Connect / OAuth 2.1 authorization server for the end-to-end tests:
// oidc-provider (a certified implementation) on 127.0.0.1, issuing JWT access tokens for the
// gateway's resource.
//
//   node provider.mjs <port>
//
// Prints one line of JSON on stdout once it listens: {"issuer": ..., "jwks": <public keys>}.
// What it offers: dynamic client registration (open, as MCP clients expect), the
// authorization code flow with PKCE, resource indicators (RFC 8707) with JWT access tokens
// (RFC 9068) whose `aud` is the resource the client asked for and whose scope is what the
// resource allows (`mcpvectordb:read mcpvectordb:write`), and its development login and
// consent pages (any user name signs in). Accounts named in LIBRARIES get that list in the
// `mcpvectordb_libraries` claim, everyone else `["*"]`; clients whose registered name says
// "read-only" get only `mcpvectordb:read`.
import { generateKeyPairSync } from "node:crypto";
import Provider from "oidc-provider";

const port = Number(process.argv[2]);
const issuer = `http://127.0.0.1:${port}`;
const RESOURCE_SCOPES = "mcpvectordb:read mcpvectordb:write";
const LIBRARIES = { bob: ["team-a"] };

function signingKey(kid, type, options) {
  const { privateKey } = generateKeyPairSync(type, options);
  return { ...privateKey.export({ format: "jwk" }), kid, use: "sig" };
}

const keys = [
  signingKey("rsa-e2e", "rsa", { modulusLength: 2048 }),
  signingKey("ec-e2e", "ec", { namedCurve: "P-256" }),
];

const provider = new Provider(issuer, {
  jwks: { keys },
  clients: [],
  // The gateway's scopes are the provider's too: clients register with them (DCR) and ask for
  // them; the resource server info below decides which of them a token for the gateway gets.
  scopes: ["openid", "offline_access", ...RESOURCE_SCOPES.split(" ")],
  findAccount: async (ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: async () => undefined,
      useGrantedResource: async () => true,
      // A client registered under a name with "read-only" gets tokens that can only read.
      getResourceServerInfo: async (ctx, resourceIndicator, client) => ({
        scope: /read-only/.test(client.clientName ?? "") ? "mcpvectordb:read" : RESOURCE_SCOPES,
        audience: resourceIndicator,
        accessTokenTTL: 600,
        accessTokenFormat: "jwt",
        jwt: { sign: { alg: "RS256" } },
      }),
    },
  },
  extraTokenClaims: async (ctx, token) => ({
    mcpvectordb_libraries: LIBRARIES[token.accountId] ?? ["*"],
  }),
});

provider.on("server_error", (ctx, error) => console.error("server_error", error));

const server = provider.listen(port, "127.0.0.1", () => {
  const jwks = keys.map(({ d, p, q, dp, dq, qi, ...publicPart }) => publicPart);
  process.stdout.write(JSON.stringify({ issuer, jwks }) + "\n");
});

for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => server.close(() => process.exit(0)));
}
