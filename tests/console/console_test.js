// console_test.js — the console (GET /) in headless Chromium against live nodes, driven by
// playwright-core. Run by tests/console/console.sh, which starts the nodes and passes:
//   PLAYWRIGHT   the playwright-core module directory
//   CHROMIUM     the browser (Debian's /usr/bin/chromium)
//   NODE_URL     a node without --token-file
//   AUTH_URL     a node with --token-file, whose token named "alice" is AUTH_TOKEN
//   SHOT         where the screenshot goes (PNG)
// Prints "ok - ..." / "not ok - ..." lines; exits 1 when one failed.
"use strict";
const { chromium } = require(process.env.PLAYWRIGHT);
const fs = require("fs");

let failed = 0;
function ok(cond, what, detail) {
  if (cond) console.log("ok - " + what);
  else { failed++; console.log("not ok - " + what + (detail ? " (" + detail + ")" : "")); }
}

async function http(method, url, body, headers) {
  const r = await fetch(url, { method, body, headers: headers || {} });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch (e) { json = null; }
  return { status: r.status, json, text };
}

// The page with every console error, page error, failed request and 4xx/5xx kept.
async function open(browser, url) {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const problems = [];
  page.on("console", (m) => { if (m.type() === "error") problems.push("console: " + m.text()); });
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  page.on("requestfailed", (r) => problems.push("failed: " + r.url() + " " + (r.failure() || {}).errorText));
  page.on("response", (r) => { if (r.status() >= 400) problems.push(r.status() + " " + r.url()); });
  page.on("dialog", (d) => d.accept());
  page.setDefaultTimeout(20000);
  await page.goto(url + "/");
  return { page, problems };
}

const NDJSON = { "Content-Type": "application/x-ndjson" };
const DEFAULT = fs.readFileSync(__dirname + "/../../policies/default.lua", "utf8");

async function main() {
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM, headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
  try {
    await plain(browser, process.env.NODE_URL);
    await withToken(browser, process.env.AUTH_URL, process.env.AUTH_TOKEN);
  } finally {
    await browser.close();
  }
}

async function plain(browser, url) {
  const { page, problems } = await open(browser, url);
  await page.waitForFunction(() => window.strataConsole && window.strataConsole.polls >= 2);
  ok(!(await page.locator("#app").isHidden()), "the console shows the node without a token when it has no --token-file");
  // A steady trickle of appends to shard 2 while the page runs, so its charts have a line.
  let trickle = true, n = 0;
  const load = (async () => {
    while (trickle) {
      const rows = Array.from({ length: 20 }, () => JSON.stringify({ key: "t" + n++, value: "x".repeat(64) })).join("\n");
      await http("POST", url + "/v1/shards/2/rows", rows, NDJSON);
      await new Promise((r) => setTimeout(r, 50));
    }
  })();

  // Rows and a seal: the charts get points and the backlog table its generation.
  for (let i = 0; i < 20; i++) {
    const rows = Array.from({ length: 50 }, (_, k) => JSON.stringify({ key: "k" + i + "-" + k, value: "v".repeat(100) })).join("\n");
    const r = await http("POST", url + "/v1/shards/0/rows", rows, NDJSON);
    if (r.status !== 200) throw new Error("append: " + r.status + " " + r.text);
  }
  const seal = await http("POST", url + "/v1/shards/0/seal");
  ok(seal.status === 200 && seal.json.sealed === true, "the test sealed shard 0", seal.text);
  await page.waitForFunction(() => {
    const td = document.querySelector("#shards tr[data-shard='0'] td.gens");
    return td && +td.textContent >= 1;
  });
  const gens = await page.locator("#shards tr[data-shard='0'] td.gens").textContent();
  const want = (await http("GET", url + "/v1/shards/0/stats")).json.generations;
  ok(+gens === want && want >= 1, "the backlog table shows shard 0's pending generations as the node counts them", gens + " vs " + want);
  await page.waitForFunction(() => {
    const c = window.strataConsole.charts;
    return c.rate && c.rate.data[0].length >= 3 && c.rate.data[1].some((v) => v > 0);
  });
  const pts = await page.evaluate(() => {
    const c = window.strataConsole.charts;
    return { rate: c.rate.data[1].filter((v) => v > 0).length, lat: c.lat.data[1].filter((v) => v != null).length,
      gens: c.gens.data[1].filter((v) => v >= 1).length, markers: window.strataConsole.markers.length };
  });
  ok(pts.rate >= 1 && pts.lat >= 1 && pts.gens >= 1, "the charts hold the appends' rate, their latency and the generations", JSON.stringify(pts));

  // A typo: Check shows it at its line, and the running policy stays.
  const before = (await http("GET", url + "/v1/policy")).json;
  const typo = DEFAULT.replace("merge_after_generations = 50,", "merge_after_generations = = 50,");
  const typoLine = typo.split("\n").findIndex((l) => l.includes("= = 50")) + 1;
  await page.fill("#editor", typo);
  await page.click("#btn-check");
  await page.waitForSelector("#msgs li.err");
  const msg = await page.locator("#msgs li.err").first().textContent();
  ok(msg.startsWith("line " + typoLine + ":"), "Check shows the typo's error at its line " + typoLine, msg);
  const marked = await page.locator("#gutter div[data-line='" + typoLine + "']").getAttribute("class");
  ok(marked === "err", "the editor's gutter marks line " + typoLine, String(marked));
  const after = (await http("GET", url + "/v1/policy")).json;
  ok(after.version === before.version && after.settings.merge_after_generations === 50,
    "the running policy is unchanged by a Check", JSON.stringify(after.settings));

  // A valid policy: Compare names the setting that changes and shows the what-if of the
  // node's trace (recorded here while rows go to shard 0), Apply puts it live.
  const tr = await http("POST", url + "/v1/trace", JSON.stringify({ name: "console", seconds: 30 }));
  ok(tr.status === 200, "the test records a trace on the node", tr.text);
  for (let i = 0; i < 5; i++) {
    const rows = Array.from({ length: 50 }, (_, k) => JSON.stringify({ key: "w" + i + "-" + k, value: "v".repeat(200) })).join("\n");
    await http("POST", url + "/v1/shards/0/rows", rows, NDJSON);
    await http("POST", url + "/v1/shards/0/seal");
  }
  await page.waitForTimeout(1200); /* the trace's writer flushes its block within a second */
  const good = DEFAULT.replace("merge_after_generations = 50,", "merge_after_generations = 2,");
  await page.fill("#editor", good);
  await page.click("#btn-compare");
  await page.waitForSelector("#compare table#whatif");
  const cmp = await page.locator("#compare p").first().textContent();
  ok(cmp.includes("merge_after_generations 50 → 2"), "Compare names the setting that changes", cmp);
  const wi = await page.evaluate(() => Array.from(document.querySelectorAll("#whatif tbody tr")).map((tr) => Array.from(tr.cells).map((c) => c.textContent)));
  const seals = wi.find((r) => r[0] === "seals during the trace"), merges = wi.find((r) => r[0] === "merges during the trace");
  ok(seals && +seals[1] >= 5 && seals[1] === seals[3] && +merges[2] > +merges[1],
    "Compare shows the what-if: the replay seals as the node did, and the candidate merges more", JSON.stringify(wi));
  const tpg = wi.find((r) => r[0] === "tables per get, p50 / p99"), mem = wi.find((r) => r[0].startsWith("peak merge inputs"));
  ok(tpg && /^\d+ \/ \d+$/.test(tpg[1]) && mem && /^\d+ \/ /.test(mem[2]) && wi.some((r) => r[0].endsWith("CPU") && / ms$/.test(r[1])),
    "Compare shows the reads' tables per get, the merge inputs and memory, and the hooks' CPU", JSON.stringify(wi));
  await http("DELETE", url + "/v1/trace");
  await page.click("#btn-apply");
  await page.waitForSelector("#msgs li.ok:has-text('Applied')");
  const live = (await http("GET", url + "/v1/policy")).json;
  ok(live.settings.merge_after_generations === 2 && live.version === before.version + 1,
    "Apply makes it the running policy (GET /v1/policy agrees)", JSON.stringify(live.settings));
  await page.waitForFunction(() => window.strataConsole.markers.some((m) => m.kind === "policy"));
  ok(true, "a marker is on the time axis at the policy change");
  await page.waitForSelector("#history tr[data-id='2']");
  const hist = (await http("GET", url + "/v1/policy/history")).json.entries;
  ok(hist.length === 2 && hist[0].who === "anonymous" && hist[1].who === "start", "the history holds the start and the apply",
    JSON.stringify(hist.map((e) => [e.id, e.who])));

  // One click rolls back to the first.
  await page.click("#history button.rollback[data-id='1']");
  await page.waitForSelector("#msgs li.ok:has-text('Rolled back')");
  const back = (await http("GET", url + "/v1/policy?source=1")).json;
  ok(back.settings.merge_after_generations === 50 && back.version === before.version + 2, "rollback restores the previous policy",
    JSON.stringify(back.settings));
  const hist2 = (await http("GET", url + "/v1/policy/history")).json.entries;
  ok(hist2[0].note === "rollback to #1" && hist2[0].hash === hist2[2].hash, "the rollback is in the history with the first policy's hash",
    JSON.stringify(hist2[0]));

  // An action with its result.
  await http("POST", url + "/v1/shards/1/rows", JSON.stringify({ key: "a", value: "b" }), NDJSON);
  await page.selectOption("#act-shard", "1");
  await page.click("#act-seal");
  await page.waitForFunction(() => document.querySelector("#act-result").textContent.includes("HTTP 200"));
  const res = await page.locator("#act-result").textContent();
  ok(res.includes('"sealed": true') && res.includes('"shard": 1'), "Seal on shard 1 runs and shows its answer", res.slice(0, 120));

  await page.waitForTimeout(1500);
  trickle = false;
  await load;
  await page.screenshot({ path: process.env.SHOT, fullPage: true });
  ok(fs.statSync(process.env.SHOT).size > 10000, "a screenshot is written to " + process.env.SHOT);
  ok(problems.length === 0, "no console errors and no failed requests", problems.join("; "));
  await page.close();
}

async function withToken(browser, url, token) {
  const { page, problems } = await open(browser, url);
  await page.waitForSelector("#login.show");
  await page.waitForTimeout(1500);
  const seen = await page.evaluate(() => ({ polls: window.strataConsole.polls, app: document.querySelector("#app").hidden,
    rows: document.querySelectorAll("#shards tbody tr").length }));
  ok(seen.polls === 0 && seen.app && seen.rows === 0, "without the token the page gets nothing and asks for it", JSON.stringify(seen));
  const raw = await http("GET", url + "/v1/console/state");
  const hist = await http("GET", url + "/v1/policy/history");
  ok(raw.status === 401 && hist.status === 401, "the console's reads need the token", raw.status + " " + hist.status);
  ok(problems.every((p) => p.startsWith("401 ") || p.includes("401 (Unauthorized)")), "the only failures are the 401s", problems.join("; "));

  await page.fill("#token", "wrong");
  await page.click("#login-form button");
  await page.waitForFunction(() => document.querySelector("#login-msg").textContent.includes("refused"));
  ok(true, "a wrong token is refused and said so");

  await page.fill("#token", token);
  await page.click("#login-form button");
  await page.waitForFunction(() => window.strataConsole.polls >= 2 && !document.querySelector("#app").hidden);
  ok(true, "with the token the live view runs");
  const good = DEFAULT.replace("base_max_runs = 8,", "base_max_runs = 6,");
  await page.waitForSelector("#history tr[data-id='1']");
  await page.fill("#editor", good);
  await page.click("#btn-apply");
  await page.waitForSelector("#msgs li.ok:has-text('Applied')");
  const h = (await http("GET", url + "/v1/policy/history", undefined, { Authorization: "Bearer " + token })).json.entries;
  ok(h[0].who === "alice", "an apply sends the token, and the history names its owner", JSON.stringify(h[0] && h[0].who));
  await page.close();
}

main().then(() => process.exit(failed ? 1 : 0), (e) => {
  console.log("not ok - the browser run: " + (e && e.stack ? e.stack.split("\n").slice(0, 3).join(" | ") : e));
  process.exit(1);
});
