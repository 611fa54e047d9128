// The browser playground's benchmark (make bench-playground; docs/benchmarks.md): opens
// `?bench=...` in headless Chromium over the DevTools protocol, in real time (the dump-dom mode
// of the tests runs on virtual time, where the page's clock stands still), and prints the
// numbers the page measured. Needs Node 20 or later (`--experimental-websocket` below 22).
// Usage: node --experimental-websocket bench/playground.mjs <playground URL> <scenario.yaml> <verdicts> [runs]
// (runs: kubevirt, evac or both, the default).
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [base, scenario, verdicts, runs] = process.argv.slice(2);
const query = new URLSearchParams({
  example: "01-drain-live-migratable",
  bench: verdicts || "200",
  runs: runs || "both",
  "scenario-text": readFileSync(scenario, "utf8"),
});
const url = `${base}index.html?${query}`;
const browser = spawn(process.env.CHROMIUM || "chromium", [
  "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--remote-debugging-port=0",
  `--user-data-dir=${mkdtempSync(join(tmpdir(), "evac-bench-"))}`, "about:blank",
]);
const endpoint = await new Promise((resolve, reject) => {
  let text = "";
  browser.stderr.on("data", (chunk) => {
    text += chunk;
    const found = text.match(/DevTools listening on (ws:\/\/\S+)/);
    if (found) resolve(found[1]);
  });
  browser.on("exit", () => reject(new Error(`chromium exited: ${text}`)));
});
const targets = await (await fetch(endpoint.replace("ws://", "http://").replace(/\/devtools\/browser\/.*/, "/json"))).json();
const page = new WebSocket(targets.find((t) => t.type === "page").webSocketDebuggerUrl);
await new Promise((resolve) => page.addEventListener("open", resolve));
let next = 0;
const pending = new Map();
page.addEventListener("message", (event) => {
  const message = JSON.parse(event.data);
  if (pending.has(message.id)) pending.get(message.id)(message.result);
});
const send = (method, params = {}) =>
  new Promise((resolve) => {
    const id = ++next;
    pending.set(id, resolve);
    page.send(JSON.stringify({ id, method, params }));
  });

await send("Page.navigate", { url });
const deadline = Date.now() + 120000;
let result = null;
while (!result && Date.now() < deadline) {
  await new Promise((r) => setTimeout(r, 200));
  const { result: value } = await send("Runtime.evaluate", {
    expression: "document.getElementById('bench')?.textContent ?? null",
    returnByValue: true,
  });
  result = value && value.value;
}
browser.kill();
if (!result) {
  console.error("the page did not finish its benchmark within 120 s");
  process.exit(1);
}
console.log(result);
process.exit(0);
