// What a web page can do to an open `skald serve` on the user's loopback, from a real headless
// Chromium (Debian's `chromium`, through playwright-core). Two pages:
//
// - A cross-site page (http://attacker.test:APORT, served by the test) sends the "simple"
//   requests any page may send anywhere without asking: text/plain and form POSTs to the proxy
//   (which would spend the user's provider credits), to count_tokens, to the memory and
//   ingest routes, an HTML form posted into an iframe, and a JSON fetch that needs a preflight;
//   and tries to read the sessions list.
// - A DNS-rebinding page: the document at http://rebound.test:SKALDPORT/ is the attacker's
//   (served by Playwright, as the attacker's server served it before its name was rebound to
//   127.0.0.1); every request it then makes to its own origin reaches skald, with
//   `Host: rebound.test:SKALDPORT`. It reads the sessions, a session, the dashboard and its
//   CSRF token, posts the dashboard's form with it, plants a memory, calls the proxy with JSON
//   and opens an MCP session.
//
// Chromium resolves both names to 127.0.0.1 (`--host-resolver-rules`). Prints one JSON object:
// each attack with what the page could see (status, readable body), for the Rust test to
// judge; the test also checks skald's stores and the upstream. Screenshot in SHOTS.
//
// Environment: SKALD (the server's http://127.0.0.1:PORT), ATTACKER (http://attacker.test:APORT),
// SESSION (a session holding a secret), SHOTS, CHROMIUM.
import { chromium } from "playwright-core";

const { SKALD, ATTACKER, SESSION, SHOTS } = process.env;
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
const skaldPort = new URL(SKALD).port;
const rebound = `http://rebound.test:${skaldPort}`;
const browser = await chromium.launch({
  executablePath,
  headless: true,
  args: [
    "--no-sandbox",
    "--host-resolver-rules=MAP attacker.test 127.0.0.1, MAP rebound.test 127.0.0.1",
    // Chromium's Private Network Access would stop some of these on its own in newer builds;
    // skald must not rely on the browser's goodwill, so the test runs without it.
    "--disable-features=PrivateNetworkAccessSendPreflights,PrivateNetworkAccessRespectPreflightResults,BlockInsecurePrivateNetworkRequests,LocalNetworkAccessChecks",
  ],
});

const anthropic = JSON.stringify({
  model: "claude-scripted",
  max_tokens: 64,
  messages: [{ role: "user", content: "spend the user's credits" }],
});

const seen = { crossSite: [], rebinding: [] };
try {
  // --- the cross-site page -------------------------------------------------------------------
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`${ATTACKER}/attack.html`);
  seen.crossSite = await page.evaluate(
    async ({ SKALD, SESSION, anthropic }) => {
      const results = [];
      const attempt = async (name, run) => {
        try {
          results.push({ name, ...(await run()) });
        } catch (error) {
          results.push({ name, blocked: String(error) });
        }
      };
      const simple = (path, body, type) =>
        fetch(`${SKALD}${path}`, {
          method: "POST",
          mode: "no-cors",
          headers: type ? { "content-type": type } : {},
          body,
        }).then((response) => ({ type: response.type, status: response.status }));
      await attempt("text/plain POST /v1/messages", () =>
        simple("/v1/messages", anthropic, "text/plain"));
      await attempt("text/plain POST /v1/messages/count_tokens", () =>
        simple("/v1/messages/count_tokens", anthropic, "text/plain"));
      await attempt("text/plain POST /v1/chat/completions", () =>
        simple("/v1/chat/completions", anthropic, "text/plain"));
      await attempt("untyped Blob POST /v1/messages", () =>
        simple("/v1/messages", new Blob([anthropic]), null));
      await attempt("text/plain POST /v1/memory/remember", () =>
        simple("/v1/memory/remember", JSON.stringify({ content: "planted by a web page" }), "text/plain"));
      await attempt("form POST /v1/sessions/planted/messages", () =>
        simple(
          "/v1/sessions/planted/messages",
          "message=planted",
          "application/x-www-form-urlencoded",
        ));
      await attempt("JSON POST /v1/messages (preflighted)", () =>
        fetch(`${SKALD}/v1/messages`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: anthropic,
        }).then(async (response) => ({ status: response.status, body: await response.text() })));
      await attempt("read GET /v1/sessions", () =>
        fetch(`${SKALD}/v1/sessions`).then(async (response) => ({
          status: response.status,
          body: await response.text(),
        })));
      await attempt("read GET /v1/sessions/{id}/context", () =>
        fetch(`${SKALD}/v1/sessions/${SESSION}/context`).then(async (response) => ({
          status: response.status,
          body: await response.text(),
        })));
      // An HTML form, posted into an iframe the way a page does it without any script fetch.
      await attempt("HTML form into an iframe", async () => {
        const frame = document.createElement("iframe");
        frame.name = "sink";
        document.body.appendChild(frame);
        const form = document.createElement("form");
        form.method = "POST";
        form.enctype = "text/plain";
        form.target = "sink";
        form.action = `${SKALD}/v1/messages`;
        const field = document.createElement("input");
        field.name = anthropic.slice(0, -2) + ',"x":"';
        field.value = '"}';
        form.appendChild(field);
        document.body.appendChild(form);
        const loaded = new Promise((resolve) => (frame.onload = resolve));
        form.submit();
        await loaded;
        return { submitted: true };
      });
      return results;
    },
    { SKALD, SESSION, anthropic },
  );
  await page.screenshot({ path: `${SHOTS}/attacker.png`, fullPage: true });

  // --- the DNS-rebinding page ----------------------------------------------------------------
  const rebinding = await browser.newContext();
  await rebinding.route(`${rebound}/attack.html`, (route) =>
    route.fulfill({ status: 200, contentType: "text/html", body: "<html><body>rebound</body></html>" }));
  const rebindPage = await rebinding.newPage();
  await rebindPage.goto(`${rebound}/attack.html`);
  seen.rebinding = await rebindPage.evaluate(
    async ({ SESSION, anthropic }) => {
      const results = [];
      const read = async (name, path, init) => {
        try {
          const response = await fetch(path, init);
          results.push({ name, status: response.status, body: await response.text() });
        } catch (error) {
          results.push({ name, blocked: String(error) });
        }
      };
      const json = (body) => ({
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      await read("GET /v1/sessions", "/v1/sessions");
      await read("GET /v1/sessions/{id}/context", `/v1/sessions/${SESSION}/context`);
      await read("GET /ui", "/ui");
      await read("GET /ui/sessions/{id}", `/ui/sessions/${SESSION}`);
      await read("GET /ui/memory", "/ui/memory");
      // The dashboard's form, with the CSRF token read off its page when it could be.
      const page = results.find((result) => result.name === "GET /ui/sessions/{id}");
      const token = /name="csrf" value="([^"]+)"/.exec(page?.body || "")?.[1] || "none";
      await read("POST the dashboard's switches form", `/ui/sessions/${SESSION}/switches`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: `csrf=${encodeURIComponent(token)}&pause_compaction=on`,
      });
      await read("POST /v1/memory/remember", "/v1/memory/remember", json({ content: "planted by a web page" }));
      await read("POST /v1/messages", "/v1/messages", {
        method: "POST",
        headers: { "content-type": "application/json", "anthropic-version": "2023-06-01" },
        body: anthropic,
      });
      await read("POST /mcp initialize", "/mcp", {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "initialize",
          params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "page", version: "1" } },
        }),
      });
      return results;
    },
    { SESSION, anthropic },
  );
  await rebindPage.screenshot({ path: `${SHOTS}/rebinding.png`, fullPage: true });
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(seen));
