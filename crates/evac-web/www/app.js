// The playground's page: every decision and every scenario runs in this page's WebAssembly
// (evac-web). State lives in the URL, so that a case can be shared as a link.
import init, { decide, runScenario, examples, example as findExample, scenarioExample } from "./evac_web.js";

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
let catalog = { requests: [], scenarios: [] };

// The example request named `name` with its policy's cluster and settings, or null.
function exampleNamed(name) {
  for (const policy of catalog.requests) {
    const example = policy.requests.find((e) => e.name === name);
    if (example) return { ...example, policy: policy.policy, context: policy.context, settings: policy.settings };
  }
  return null;
}

// What the page says of a name it has no example of: the wasm's message, with the names there are.
function unknown(lookup, name) {
  try {
    lookup(name);
    return "";
  } catch (error) {
    return String(error.message || error);
  }
}

function setParams(values) {
  const next = new URLSearchParams();
  for (const [key, value] of Object.entries(values)) {
    if (value !== undefined && value !== null && value !== "") next.set(key, value);
  }
  history.replaceState(null, "", `${location.pathname}?${next}`);
}

function showTab(name) {
  for (const tab of ["decide", "scenario"]) {
    $(tab).hidden = tab !== name;
    $(`tab-${tab}`).setAttribute("aria-selected", String(tab === name));
  }
}

// --- Decide ---------------------------------------------------------------------------------

function decideState() {
  const example = $("example").value;
  const original = exampleNamed(example);
  const state = { tab: "decide", policy: $("policy").value, example };
  // An edited case carries its text; an example untouched is named only.
  if (!original || $("request").value !== original.text) state.request = $("request").value;
  if (!original || $("objects").value !== original.context) state.objects = $("objects").value;
  if (!original || $("settings").value !== original.settings) state.settings = $("settings").value;
  return state;
}

function runDecision() {
  setParams(decideState());
  for (const id of ["verdict", "message", "effects", "trace", "reads", "response", "error"]) $(id).textContent = "";
  $("verdict").className = "verdict";
  if (!$("request").value.trim()) return;
  const started = performance.now();
  let answer;
  try {
    answer = JSON.parse(decide($("policy").value, $("request").value, $("objects").value, $("settings").value, Date.now() / 1000));
  } catch (error) {
    $("error").textContent = String(error.message || error);
    return;
  }
  const elapsed = performance.now() - started;
  const response = answer.response;
  $("verdict").textContent = response.accepted ? "allowed" : `denied: ${response.code ?? 400}`;
  $("verdict").classList.add(response.accepted ? "allowed" : "denied");
  $("verdict").dataset.code = response.accepted ? "200" : String(response.code ?? 400);
  $("verdict").dataset.ms = elapsed.toFixed(3);
  $("verdict").dataset.policy = $("policy").value;
  $("message").textContent = response.message || (response.accepted ? "the request is allowed" : "");
  for (const effect of response.effects) {
    const item = document.createElement("li");
    const vmi = effect.vmi ? ` ${effect.vmi.namespace}/${effect.vmi.name}` : "";
    const node = effect.node ? ` from ${effect.node}` : "";
    item.textContent = `${effect.type}${vmi}${node}${effect.dryRun ? " (dry run)" : ""}`;
    item.dataset.type = effect.type;
    $("effects").append(item);
  }
  if (!response.effects.length) $("effects").innerHTML = "<li>none</li>";
  answer.trace.forEach((step, i) => {
    const item = document.createElement("li");
    item.textContent = step;
    if (i === answer.trace.length - 1) item.className = "decisive";
    $("trace").append(item);
  });
  for (const read of answer.reads) {
    const item = document.createElement("li");
    item.textContent = read;
    $("reads").append(item);
  }
  $("response").textContent = JSON.stringify(response, null, 2);
  if (answer.settings_refused) {
    $("error").textContent = `A Kubewarden host would not serve the policy with these settings: ${answer.settings_refused}`;
  }
}

function openExample(name) {
  const example = exampleNamed(name);
  if (!example) return false;
  $("policy").value = example.policy;
  $("example").value = name;
  $("request").value = example.text;
  $("objects").value = example.context;
  $("settings").value = example.settings;
  return true;
}

// --- Scenarios --------------------------------------------------------------------------------

function runTheScenario() {
  const name = $("scenario-example").value;
  const original = catalog.scenarios.find((s) => s.name === name);
  const text = $("scenario-text").value;
  const runs = $("runs").value;
  setParams({
    tab: "scenario", scenario: name, runs: runs === "both" ? "" : runs,
    "scenario-text": original && original.text === text ? "" : text,
  });
  $("scenario-error").textContent = "";
  $("scenario-problems").replaceChildren();
  $("scenario-timelines").replaceChildren();
  $("scenario-report").textContent = "Running…";
  // Let the page paint "Running…" before the simulation takes the thread.
  setTimeout(() => {
    const started = performance.now();
    try {
      const result = JSON.parse(runScenario(text, runs));
      const elapsed = performance.now() - started;
      $("scenario-report").innerHTML = result.html;
      $("scenario-report").dataset.ms = elapsed.toFixed(1);
      $("scenario-report").dataset.fates = JSON.stringify(Object.fromEntries(result.runs.map((r) => [r.label, r.report.vms])));
      $("run-time").textContent = `ran in ${elapsed.toFixed(0)} ms in this page`;
      for (const problem of result.problems) {
        const item = document.createElement("li");
        item.textContent = problem;
        $("scenario-problems").append(item);
      }
      for (const run of result.runs) {
        const details = document.createElement("details");
        const summary = document.createElement("summary");
        summary.textContent = `Timeline, ${run.label}`;
        const pre = document.createElement("pre");
        pre.dataset.run = run.label;
        pre.textContent = run.timeline.map((e) => `${e.at.toFixed(1).padStart(8)} s  ${e.what}`).join("\n");
        details.append(summary, pre);
        $("scenario-timelines").append(details);
      }
    } catch (error) {
      $("scenario-report").textContent = "";
      $("scenario-error").textContent = String(error.message || error);
    }
  }, 0);
}

// --- Start ------------------------------------------------------------------------------------

async function main() {
  await init();
  catalog = JSON.parse(examples());
  for (const policy of catalog.requests) {
    const group = document.createElement("optgroup");
    group.label = policy.policy;
    for (const example of policy.requests) group.append(new Option(example.name, example.name));
    $("example").append(group);
  }
  for (const scenario of catalog.scenarios) $("scenario-example").append(new Option(scenario.name, scenario.name));

  $("policy").value = params.get("policy") || "pod-eviction";
  // A link naming an example the page does not have says so, rather than open an empty form.
  const missingExample = params.get("example") ? unknown(findExample, params.get("example")) : "";
  if (!openExample(params.get("example") || (params.has("request") ? "" : "01-drain-live-migratable"))) {
    $("example").value = "";
  }
  if (params.has("policy")) $("policy").value = params.get("policy");
  if (params.has("request")) $("request").value = params.get("request");
  if (params.has("objects")) $("objects").value = params.get("objects");
  if (params.has("settings")) $("settings").value = params.get("settings");

  $("example").addEventListener("change", () => { if (openExample($("example").value)) runDecision(); });
  for (const id of ["policy", "request", "objects", "settings"]) $(id).addEventListener("input", runDecision);
  $("share").addEventListener("click", () => navigator.clipboard && navigator.clipboard.writeText(location.href));
  for (const button of document.querySelectorAll("nav button")) {
    button.addEventListener("click", () => showTab(button.dataset.tab));
  }
  $("scenario-example").addEventListener("change", () => {
    const scenario = catalog.scenarios.find((s) => s.name === $("scenario-example").value);
    if (scenario) $("scenario-text").value = scenario.text;
  });
  $("run").addEventListener("click", runTheScenario);
  if (["kubevirt", "evac", "both"].includes(params.get("runs"))) $("runs").value = params.get("runs");

  const missingScenario =
    params.get("scenario") && !params.has("scenario-text") ? unknown(scenarioExample, params.get("scenario")) : "";
  const scenario = catalog.scenarios.find((s) => s.name === (params.get("scenario") || "drain"));
  if (scenario) {
    $("scenario-example").value = scenario.name;
    $("scenario-text").value = scenario.text;
  }
  if (params.has("scenario-text")) {
    $("scenario-example").value = "";
    $("scenario-text").value = params.get("scenario-text");
  }

  // Since the navigation started (the page's time origin): loading, compiling the wasm, examples.
  const ready = performance.now();
  $("status").textContent = `Ready (${ready.toFixed(0)} ms).`;
  $("status").dataset.readyMs = ready.toFixed(1);
  if (params.has("bench")) {
    bench(ready, Number(params.get("bench")) || 100);
    return;
  }
  if (missingScenario) {
    showTab("scenario");
    $("scenario-example").value = "";
    $("scenario-error").textContent = missingScenario;
    $("scenario-error").dataset.unknown = params.get("scenario");
  } else if (params.get("tab") === "scenario" || params.has("scenario")) {
    showTab("scenario");
    runTheScenario();
  } else if (missingExample) {
    $("error").textContent = missingExample;
    $("error").dataset.unknown = params.get("example");
  } else {
    runDecision();
  }
}

// `?bench=N` (make bench-playground): N verdicts of the current request, then the scenario in
// `scenario-text` once (the runs `?runs=` names, both by default), timed with the page's clock;
// the numbers go in #bench as JSON.
function bench(readyMs, verdicts) {
  const args = [$("policy").value, $("request").value, $("objects").value, $("settings").value, Date.now() / 1000];
  decide(...args); // warm-up
  let started = performance.now();
  for (let i = 0; i < verdicts; i++) decide(...args);
  const verdictMs = (performance.now() - started) / verdicts;
  let scenarioMs = null;
  let fates = null;
  if ($("scenario-text").value && params.has("scenario-text")) {
    started = performance.now();
    const result = JSON.parse(runScenario($("scenario-text").value, $("runs").value));
    fates = Object.fromEntries(result.runs.map((r) => [r.label, r.report.vms]));
    scenarioMs = performance.now() - started;
  }
  const result = { readyMs, verdicts, verdictMs, scenarioMs, fates };
  const out = document.createElement("pre");
  out.id = "bench";
  out.textContent = JSON.stringify(result);
  document.body.append(out);
}

main().catch((error) => {
  $("status").textContent = `The page could not start: ${error.message || error}`;
  $("status").className = "error";
});
