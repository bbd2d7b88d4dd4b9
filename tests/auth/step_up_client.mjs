// The official TypeScript client (@modelcontextprotocol/client 2.4.0) stepping up its OAuth token, for
// tests/auth/test_resource_server.py: a client-credentials client that starts with the scope mcp:read calls a tool
// needing mcp:write. On the server's 403 insufficient_scope it asks the authorization server for a token with the
// union of its scopes and the challenge's (SEP-2350), and calls again.
//   node step_up_client.mjs URL ISSUER ERA      ERA: 2026-07-28, or legacy (initialize, a session)
// Prints one line of JSON: the era it spoke, the tools' results, and every request it sent to the MCP endpoint
// (method, the status it got, the session id it carried, the WWW-Authenticate of a refusal).
import { Client, ClientCredentialsProvider, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const [url, issuer, era] = process.argv.slice(2);
const endpoint = [];
const logged = async (input, init) => {
  const response = await fetch(input, init);
  if (String(input) === url) {
    const headers = new Headers(init?.headers);
    endpoint.push({ method: init?.method ?? "GET", status: response.status, session: headers.get("mcp-session-id"),
      challenge: response.headers.get("www-authenticate") });
  }
  return response;
};
const provider = new ClientCredentialsProvider({ clientId: "mcp-client", clientSecret: "client-secret-0123456789",
  scope: "mcp:read", expectedIssuer: issuer });
const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider, fetch: logged });
const client = new Client({ name: "step-up", version: "1.0.0" },
  era === "legacy" ? {} : { versionNegotiation: { mode: { pin: era } } });
await client.connect(transport);
try {
  const before = await client.callTool({ name: "whoami", arguments: {} });
  const renamed = await client.callTool({ name: "rename_account", arguments: { account: "acme", name: "Acme" } });
  const after = await client.callTool({ name: "whoami", arguments: {} });
  const text = (result) => result.content[0].text;
  console.log(JSON.stringify({ protocol: client.getNegotiatedProtocolVersion(), before: JSON.parse(text(before)),
    renamed: text(renamed), after: JSON.parse(text(after)), endpoint }));
} finally {
  await client.close();
}
