// A real OAuth 2.1 / OpenID authorization server (oidc-provider) on 127.0.0.1 for tests/auth.
//
//   node oidc_server.mjs [PORT]     prints one JSON line {"issuer": ...} when ready
//
// Clients: "mcp-client" (client_credentials) and "mcp-server" (the resource server, which may only
// introspect). Resources (RFC 8707), each with scopes mcp:read mcp:write mcp:admin:
//   https://mcp.example.test/rs256    JWT access tokens signed RS256
//   https://mcp.example.test/es256    JWT access tokens signed ES256
//   https://mcp.example.test/opaque   opaque tokens, for the introspection endpoint
//   https://mcp.example.test/brief    opaque tokens that live 1 second
//   http://127.0.0.1:PORT/PATH        an mcpserver the tests started: JWTs (RS256; ES256 if PATH has "es256"),
//                                     or opaque tokens if PATH has "opaque"
// Test-only endpoints under /__test/ (never part of a real server):
//   POST /__test/rotate {"keep_old": bool}   new signing keys (new kids), the old ones kept or dropped
//   POST /__test/sign {"header", "payload", "key": "current"|"outsider"}   sign anything with jose
//   GET  /__test/stats                        how often the key set and introspection were asked for, and the
//                                            scope of every client-credentials token issued
import crypto from 'node:crypto';
import http from 'node:http';

import * as jose from 'jose';
import Provider, { errors } from 'oidc-provider';

const SECRETS = { 'mcp-client': 'client-secret-0123456789', 'mcp-server': 'server-secret-0123456789' };
const SCOPES = 'mcp:read mcp:write mcp:admin';
const RESOURCES = {
  'https://mcp.example.test/rs256': { format: 'jwt', alg: 'RS256', ttl: 300 },
  'https://mcp.example.test/es256': { format: 'jwt', alg: 'ES256', ttl: 300 },
  'https://mcp.example.test/opaque': { format: 'opaque', ttl: 300 },
  'https://mcp.example.test/brief': { format: 'opaque', ttl: 1 },
};

let generation = 0;
let signingKeys = [];  // private JWKs of the current generation, first RSA then EC
let publishedKeys = [];  // what the provider holds (current, maybe followed by the previous generation)
const outsider = {
  RS256: crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey,
  ES256: crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey,
};
const stats = { jwks: 0, introspection: 0, tokens: [] };  // tokens: the scope of each client-credentials token issued

function newGeneration() {
  generation += 1;
  const rsa = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
  const ec = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
  return [
    { ...rsa.export({ format: 'jwk' }), kid: `rsa-${generation}`, alg: 'RS256', use: 'sig' },
    { ...ec.export({ format: 'jwk' }), kid: `ec-${generation}`, alg: 'ES256', use: 'sig' },
  ];
}

// An MCP server the tests start on 127.0.0.1 (its URL is its resource): JWTs signed RS256, or ES256
// when the path says es256, or opaque tokens (for introspection) when it says opaque.
function loopbackResource(resource) {
  let url;
  try { url = new URL(resource); } catch { return undefined; }
  if (url.hostname !== '127.0.0.1' && url.hostname !== 'localhost') return undefined;
  if (url.pathname.includes('opaque')) return { format: 'opaque', ttl: 300 };
  return { format: 'jwt', alg: url.pathname.includes('es256') ? 'ES256' : 'RS256', ttl: 300 };
}

function currentKid(alg) {
  return signingKeys.find((key) => key.alg === alg).kid;
}

function buildProvider(issuer) {
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: 'mcp-client', client_secret: SECRETS['mcp-client'],
        grant_types: ['client_credentials'], response_types: [], redirect_uris: [],
      },
      {
        client_id: 'mcp-server', client_secret: SECRETS['mcp-server'],
        grant_types: [], response_types: [], redirect_uris: [],
      },
    ],
    jwks: { keys: publishedKeys },
    cookies: { keys: ['test-only-cookie-key'] },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      revocation: { enabled: true },
      introspection: {
        enabled: true,
        allowedPolicy: async (ctx, client, token) => client.clientId === 'mcp-server'
          || token.clientId === client.clientId,
      },
      resourceIndicators: {
        enabled: true,
        defaultResource: async (ctx, client, oneOf) => oneOf,
        useGrantedResource: async () => true,
        getResourceServerInfo: async (ctx, resource) => {
          const server = RESOURCES[resource] || loopbackResource(resource);
          if (!server) throw new errors.InvalidTarget();
          return {
            scope: SCOPES,
            audience: resource,
            accessTokenTTL: server.ttl,
            accessTokenFormat: server.format,
            ...(server.format === 'jwt' ? { jwt: { sign: { alg: server.alg, kid: currentKid(server.alg) } } } : {}),
          };
        },
      },
    },
  });
  provider.on('server_error', (ctx, error) => console.error('server_error', error));
  // 'saved' for an opaque token (kept to be introspected), 'issued' for a JWT (kept nowhere)
  for (const event of ['client_credentials.saved', 'client_credentials.issued']) {
    provider.on(event, (token) => stats.tokens.push(token.scope));
  }
  return provider.callback();
}

async function readJson(request) {
  const chunks = [];
  for await (const chunk of request) chunks.push(chunk);
  return chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : {};
}

function reply(response, status, body) {
  const data = JSON.stringify(body);
  response.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) });
  response.end(data);
}

let issuer;
let handler;

async function control(request, response) {
  if (request.url === '/__test/stats') return reply(response, 200, stats);
  const body = await readJson(request);
  if (request.url === '/__test/rotate') {
    const previous = signingKeys;
    signingKeys = newGeneration();
    publishedKeys = body.keep_old ? [...signingKeys, ...previous] : [...signingKeys];
    handler = buildProvider(issuer);
    return reply(response, 200, { kids: publishedKeys.map((key) => key.kid) });
  }
  if (request.url === '/__test/sign') {
    const alg = body.key_alg || body.header.alg;
    const key = body.key === 'outsider'
      ? outsider[alg]
      : crypto.createPrivateKey({ key: signingKeys.find((k) => k.alg === alg), format: 'jwk' });
    const token = await new jose.CompactSign(new TextEncoder().encode(JSON.stringify(body.payload)))
      .setProtectedHeader(body.header).sign(key);
    return reply(response, 200, { token, kid: currentKid(alg) });
  }
  return reply(response, 404, { error: 'no such test endpoint' });
}

const server = http.createServer((request, response) => {
  if (request.url.startsWith('/__test/')) {
    control(request, response).catch((error) => reply(response, 500, { error: String(error) }));
    return;
  }
  if (request.url === '/jwks') stats.jwks += 1;
  if (request.url === '/token/introspection') stats.introspection += 1;
  handler(request, response);
});

server.listen(Number(process.argv[2] || 0), '127.0.0.1', () => {
  issuer = `http://127.0.0.1:${server.address().port}`;
  signingKeys = newGeneration();
  publishedKeys = [...signingKeys];
  handler = buildProvider(issuer);
  process.stdout.write(`${JSON.stringify({ issuer })}\n`);
});

for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => process.exit(0));
