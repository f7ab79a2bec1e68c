// Drives skald's dashboard in headless Chromium (Debian's `chromium`, through playwright-core):
// log in with a key, open the sessions list, open a session, follow its first placeholder to the
// original, grep it, search memory; then log in as another tenant's key. Prints what each page
// showed as one JSON object on stdout; the Rust test asserts on it. Screenshots go to SHOTS.
//
// Then: the proxied conversation's timeline of calls, pausing compaction on the imported
// session's page, the savings page and its chart.
//
// Environment: BASE (the server's URL), KEY, FOREIGN_KEY, SESSION (imported), PROXIED (the
// proxied conversation's session), SHOTS, CHROMIUM.
import { chromium } from "playwright-core";

const { BASE, KEY, FOREIGN_KEY, SESSION, PROXIED, SHOTS } = process.env;
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
const browser = await chromium.launch({
  executablePath,
  headless: true,
  // The test may run as root, where Chromium refuses its sandbox.
  args: ["--no-sandbox"],
});
const seen = {};
try {
  const page = await (await browser.newContext()).newPage();
  const login = await page.goto(`${BASE}/ui`);
  seen.loginStatus = login.status();
  await page.screenshot({ path: `${SHOTS}/login.png`, fullPage: true });
  await page.fill("input[name=key]", KEY);
  await page.click("button[type=submit]");
  await page.waitForSelector("table#sessions");
  seen.sessions = await page.textContent("table#sessions");
  await page.screenshot({ path: `${SHOTS}/sessions.png`, fullPage: true });

  await page.click(`a[href="/ui/sessions/${SESSION}"]`);
  await page.waitForSelector("pre#context");
  seen.sessionTitle = await page.textContent("h1");
  seen.compactions = await page.textContent("table#compactions");
  seen.refLinks = await page.locator("pre#context a.ref").count();
  await page.screenshot({ path: `${SHOTS}/session.png`, fullPage: true });

  await page.locator("pre#context a.ref").first().click();
  await page.waitForSelector("pre#original");
  seen.originalUrl = page.url();
  seen.original = (await page.textContent("pre#original")).slice(0, 400);
  await page.fill("input[name=grep]", "rounding mismatch");
  await page.fill("input[name=context]", "0");
  await page.click("form#slice button[type=submit]");
  await page.waitForURL(/grep=/);
  seen.grepped = await page.textContent("pre#original");
  await page.screenshot({ path: `${SHOTS}/original.png`, fullPage: true });

  await page.click("header a[href='/ui/memory']");
  await page.waitForSelector("form#memory-search");
  seen.memoryRoot = await page.textContent("main");
  await page.fill("form#memory-search input[name=q]", "invoice rounding");
  await page.click("form#memory-search button[type=submit]");
  await page.waitForSelector("table#results");
  seen.memoryResults = await page.textContent("table#results");
  await page.screenshot({ path: `${SHOTS}/memory.png`, fullPage: true });

  await page.goto(`${BASE}/ui`);
  await page.click(`a[href="/ui/sessions/${encodeURIComponent(PROXIED)}"]`);
  await page.waitForSelector("table#calls");
  seen.proxiedCalls = await page.locator("table#calls tr.call").count();
  seen.proxiedTotals = await page.textContent("#call-totals");
  seen.proxiedPipelines = await page.locator("table#calls tr.call td.pipeline").allTextContents();
  await page.screenshot({ path: `${SHOTS}/timeline.png`, fullPage: true });

  await page.goto(`${BASE}/ui/sessions/${SESSION}`);
  await page.check("form#switches input[name=pause_compaction]");
  await page.click("form#switches button[type=submit]");
  await page.waitForSelector("#switch-state");
  seen.switchState = await page.textContent("#switch-state");
  await page.screenshot({ path: `${SHOTS}/switches.png`, fullPage: true });

  await page.click("header a[href='/ui/savings']");
  await page.waitForSelector("table#per-session");
  seen.savingsCharts = await page.locator("div#chart svg").count();
  await page.screenshot({ path: `${SHOTS}/savings.png`, fullPage: true });

  const foreign = await (await browser.newContext()).newPage();
  await foreign.goto(`${BASE}/ui`);
  await foreign.fill("input[name=key]", FOREIGN_KEY);
  await foreign.click("button[type=submit]");
  await foreign.waitForSelector("main");
  seen.foreignSessions = await foreign.textContent("main");
  const direct = await foreign.goto(`${BASE}/ui/sessions/${SESSION}`);
  seen.foreignSessionStatus = direct.status();
  const proxied = await foreign.goto(`${BASE}/ui/sessions/${encodeURIComponent(PROXIED)}`);
  seen.foreignProxiedStatus = proxied.status();
  await foreign.screenshot({ path: `${SHOTS}/foreign.png`, fullPage: true });
} finally {
  await browser.close();
}
console.log(JSON.stringify(seen));
