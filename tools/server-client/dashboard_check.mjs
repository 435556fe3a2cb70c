// Headless Chromium (Debian's) through the dashboard of a running `tern serve`:
//   node dashboard_check.mjs NODE_MODULES BASE_URL CHROMIUM OUT_DIR
// Loads the page, sends a chat message, waits for the streamed reply and its
// stats, counts the expert-grid cells lit by the routing feed, and saves
// screenshots. Prints one JSON line; tests/server/test_dashboard.py judges it.
import { createRequire } from "node:module";
import path from "node:path";

const [modules, baseURL, chromium, outDir] = process.argv.slice(2);
const require = createRequire(path.join(modules, "noop.js"));
const { chromium: launcher } = require("playwright-core");

const browser = await launcher.launch({ executablePath: chromium, headless: true,
                                        args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
const result = {};
try {
  const page = await browser.newPage({ viewport: { width: 1366, height: 800 } });
  const requests = [];
  page.on("request", (r) => requests.push(r.url()));
  const consoleErrors = [];
  page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });
  page.on("pageerror", (e) => consoleErrors.push(String(e)));
  await page.goto(baseURL + "/", { waitUntil: "load" });
  await page.waitForFunction(() => document.getElementById("model").textContent.includes("MoE layers"));
  await page.waitForFunction(() => document.getElementById("conn").textContent === "feed: live");
  result.model = await page.textContent("#model");
  await page.screenshot({ path: path.join(outDir, "dashboard-loaded.png") });

  // Grid cells drawn in the orange of recent routing.
  const countLit = () => {
    const c = document.getElementById("grid"), cell = +c.dataset.cell, ctx = c.getContext("2d");
    let lit = 0, cells = 0;
    const rows = Math.round(c.height / cell), cols = Math.round((c.width - 30) / cell);
    for (let l = 0; l < rows; l++)
      for (let e = 0; e < cols; e++) {
        const [r, g, b] = ctx.getImageData(30 + e * cell + 1, l * cell + 1, 1, 1).data;
        cells++;
        if (r > 120 && r > b + 40) lit++;  // the orange of recent routing
      }
    return { lit, cells };
  };
  const litCells = () => page.evaluate(countLit);
  result.before = await litCells();  // before any request: none

  await page.fill("#prompt", "Which experts fire for this?");
  await page.click("#send");
  // Streaming: text appears before the stats line that ends a reply.
  await page.waitForFunction(() => document.querySelector(".msg.assistant .content")?.textContent.length > 0);
  result.during = await litCells();
  await page.waitForFunction(() => document.querySelector(".msg.assistant .stats")?.textContent.includes("tok/s"),
                             null, { timeout: 120000 });
  // The feed's next event (every 250 ms while steps run) lights the cells.
  await page.waitForFunction(`(${countLit.toString()})().lit > 0`, null, { timeout: 10000 });
  result.after = await litCells();
  result.reply = await page.textContent(".msg.assistant .content");
  result.stats = await page.textContent(".msg.assistant .stats");
  result.io = await page.evaluate(() => Object.fromEntries(
      [...document.querySelectorAll("#io .stat")].map((s) => [s.querySelector(".k").textContent, s.querySelector(".v").textContent])));
  await page.screenshot({ path: path.join(outDir, "dashboard-reply.png") });
  result.external = requests.filter((u) => !u.startsWith(baseURL));
  result.consoleErrors = consoleErrors;
} finally {
  await browser.close();
}
console.log(JSON.stringify(result));
