// A Skills host for tests/extensions/test_skills_client.py: the TypeScript SDK's SkillsClient (SEP-2640's host
// side) on an MCP client of our server over HTTP, in 2026-07-28 (the extension's base revision). It lists every skill, reads every file of each the way a host
// loads a skill (size and digest checked against the entry; SKILL.md's frontmatter parsed as YAML 1.2 and
// compared field by field), walks each skill's root directory and gets each skill again. Given a file's URI and
// path, it then changes that file, as an editor would after the listing: the held entry must no longer verify,
// and a fresh skills/get must.
//   node skills_host.mjs URL [URI PATH]      prints one line of JSON: what the host saw
import { appendFileSync } from "node:fs";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { SkillsClient, SkillVerificationError } from "@modelcontextprotocol/client/ext/skills";

const [url, changedUri, changedPath] = process.argv.slice(2);
const client = new Client({ name: "skills-test-host", version: "1.0.0" }, { versionNegotiation: { mode: "auto" } });
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
try {
  const skills = new SkillsClient(client);
  const listing = await skills.list();  // throws on any invalid entry
  const report = { protocol: client.getNegotiatedProtocolVersion(), supported: skills.supported, directoryRead: skills.directoryRead, ttlMs: listing.ttlMs,
    cacheScope: listing.cacheScope, skills: [] };
  for (const entry of listing.skills) {
    const files = [];
    for (const resource of entry.resources) {
      const file = await skills.read(entry, resource.uri);  // throws SkillVerificationError on a mismatch
      files.push({ uri: file.uri, bytes: file.bytes.length, verified: file.verified,
        frontmatter: file.frontmatter ?? null });
    }
    const directory = await skills.readDirectory(entry.uri.slice(0, -"/SKILL.md".length));
    const again = await skills.get(entry.uri);
    report.skills.push({ uri: entry.uri, frontmatter: entry.frontmatter, files,
      directory: directory.resources.map((child) => [child.uri, child.mimeType]),
      same: JSON.stringify(again.skill) === JSON.stringify(entry) });
  }
  if (changedUri) {
    const held = listing.skills.find((entry) => entry.resources.some((resource) => resource.uri === changedUri));
    appendFileSync(changedPath, "A line added after the listing.\n");
    try {
      await skills.read(held, changedUri, { cacheMode: "refresh" });  // past the client's cache of the first read
      report.stale = "read";
    } catch (error) {
      report.stale = error instanceof SkillVerificationError ? error.reason : String(error);
    }
    const fresh = (await skills.get(held.uri)).skill;
    report.fresh = (await skills.read(fresh, changedUri)).verified;
  }
  console.log(JSON.stringify(report));
} finally {
  await client.close();
}
