// console_tabs.js — bench_console.sh's browser: headless Chromium with TABS pages open on
// the console of the node at URL, each polling it as an operator's tab does, until the
// process gets SIGTERM. Prints "console_tabs: N open" once every page polled twice, and at
// the end "console_tabs: polls=N errors=N" (the pages' own counts).
"use strict";
const { chromium } = require(process.env.PLAYWRIGHT);
const url = process.env.URL, tabs = +(process.env.TABS || 3);
(async () => {
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM, headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
  const pages = [];
  let errors = 0;
  for (let i = 0; i < tabs; i++) {
    const p = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    p.on("pageerror", () => errors++);
    p.on("response", (r) => { if (r.status() >= 400) errors++; });
    await p.goto(url + "/");
    pages.push(p);
  }
  for (const p of pages) await p.waitForFunction(() => window.strataConsole && window.strataConsole.polls >= 2, null, { timeout: 30000 });
  console.log("console_tabs: " + tabs + " open");
  const stop = async () => {
    let polls = 0;
    for (const p of pages) polls += await p.evaluate(() => window.strataConsole.polls);
    console.log("console_tabs: polls=" + polls + " errors=" + errors);
    await browser.close();
    process.exit(0);
  };
  process.on("SIGTERM", stop);
})().catch((e) => { console.log("console_tabs: failed: " + e.message); process.exit(1); });
