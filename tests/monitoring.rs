//! `deploy/monitoring/`: the Prometheus Operator's objects and the Grafana dashboard. They render
//! with kustomize, every PromQL expression in the alerts and the dashboard names metrics (and
//! labels) that evac's processes export, and the scrape configuration finds the pods and ports
//! that `deploy/` renders.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use evac::server::process_metrics::metrics;
use evac_e2e::repo_root;
use evac_evaluator::metrics::Process;
use serde::Deserialize;
use serde_json::Value;

/// `kubectl kustomize <dir>` (relative to the repository), every object in order.
fn render(dir: &str) -> Vec<Value> {
    let output = Command::new("kubectl")
        .arg("kustomize")
        .arg(repo_root().join(dir))
        .output()
        .expect("kubectl is needed to render deploy/ and deploy/monitoring/ (kubectl kustomize)");
    assert!(output.status.success(), "{dir}: {}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8(output.stdout).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("{dir}: not YAML: {e}")))
        .collect()
}

fn kind(object: &Value) -> &str {
    object["kind"].as_str().unwrap_or_default()
}

fn name(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

fn namespace(object: &Value) -> &str {
    object["metadata"]["namespace"].as_str().unwrap_or_default()
}

fn of_kind<'a>(objects: &'a [Value], wanted: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    objects.iter().filter(move |o| kind(o) == wanted)
}

/// `labels` holds every pair of `selector` (a `matchLabels`, or a Service's `selector`).
fn selects(selector: &Value, labels: &Value) -> bool {
    let selector = selector.as_object().expect("a selector");
    !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

fn dashboard() -> Value {
    let text = std::fs::read_to_string(repo_root().join("deploy/monitoring/grafana-dashboard.json")).unwrap();
    serde_json::from_str(&text).expect("grafana-dashboard.json is JSON")
}

// ---------------------------------------------------------------------------------------------
// What the processes export.

/// A metric family of a registry.
#[derive(Debug, Clone)]
struct Family {
    /// The OpenMetrics type: counter, gauge, histogram, info, ...
    kind: String,
    /// Its labels. From its samples where the registry has some; for a family without samples
    /// yet (a labelled family nothing has counted in), from docs/metrics.md's Labels column.
    /// `None` when neither says: an expression that uses it is a problem then.
    labels: Option<BTreeSet<String>>,
    /// The processes that export it.
    processes: BTreeSet<&'static str>,
}

const PROCESSES: [(&str, Process); 3] =
    [("serve", Process::Serve), ("control", Process::Control), ("hold", Process::Hold)];

/// The label names of a sample line's `{...}`, or of a label list in general. Quoted values may
/// hold any character.
fn sample_labels(line: &str) -> BTreeSet<String> {
    let mut labels = BTreeSet::new();
    let Some(open) = line.find('{') else { return labels };
    let mut chars = line[open + 1..].chars().peekable();
    let mut name = String::new();
    while let Some(c) = chars.next() {
        match c {
            '}' => break,
            '=' => {
                labels.insert(std::mem::take(&mut name).trim().to_owned());
                assert_eq!(chars.next(), Some('"'), "a quoted value in {line}");
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
            }
            ',' => {}
            c => name.push(c),
        }
    }
    labels
}

/// docs/metrics.md's tables: a metric as Prometheus stores it (counters with `_total`) -> its
/// labels.
fn documented_labels() -> BTreeMap<String, BTreeSet<String>> {
    let text = std::fs::read_to_string(repo_root().join("docs/metrics.md")).unwrap();
    let mut documented = BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let ticked =
            |cell: &str| -> Vec<String> { cell.split('`').skip(1).step_by(2).map(str::to_owned).collect() };
        let labels: BTreeSet<String> = ticked(cells[3]).into_iter().collect();
        for metric in ticked(cells[1]) {
            documented.insert(metric, labels.clone());
        }
    }
    documented
}

/// Every family of the three processes' registries, by name (as registered: counters without
/// `_total`).
fn families() -> BTreeMap<String, Family> {
    let documented = documented_labels();
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    for (process, which) in PROCESSES {
        let text = metrics(which).encode();
        let mut sampled: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                let family = families.entry(name.to_owned()).or_insert_with(|| Family {
                    kind: kind.to_owned(),
                    labels: None,
                    processes: BTreeSet::new(),
                });
                assert_eq!(family.kind, kind, "{name} has two types");
                family.processes.insert(process);
            } else if !line.starts_with('#') && !line.is_empty() {
                let sample = line.split(['{', ' ']).next().unwrap();
                // The family: the longest registered name the sample's starts with.
                let family = families
                    .keys()
                    .filter(|f| sample == f.as_str() || sample.starts_with(&format!("{f}_")))
                    .max_by_key(|f| f.len())
                    .unwrap_or_else(|| panic!("{process}: sample {sample} of no family"))
                    .clone();
                let mut labels = sample_labels(line);
                labels.remove("le");
                sampled.entry(family).or_default().extend(labels);
            }
        }
        for (name, labels) in sampled {
            families.get_mut(&name).unwrap().labels = Some(labels);
        }
    }
    for (name, family) in &mut families {
        if family.labels.is_none() {
            let stored = if family.kind == "counter" { format!("{name}_total") } else { name.clone() };
            family.labels = documented.get(&stored).cloned();
        }
    }
    families
}

/// The family of a metric name as a query uses it (counters with `_total`, histograms' series
/// with `_bucket`, `_sum`, `_count`), and whether it is a histogram's `_bucket` (labelled `le`).
fn resolve<'a>(families: &'a BTreeMap<String, Family>, metric: &str) -> Option<(&'a Family, bool)> {
    if let Some(family) = families.get(metric) {
        if matches!(family.kind.as_str(), "gauge" | "unknown") {
            return Some((family, false));
        }
    }
    // An info family `x` is stored as `x_info`.
    let suffixes: [(&str, &[&str]); 5] = [
        ("_total", &["counter"]),
        ("_bucket", &["histogram"]),
        ("_sum", &["histogram", "summary"]),
        ("_count", &["histogram", "summary"]),
        ("_info", &["info"]),
    ];
    for (suffix, kinds) in suffixes {
        if let Some(base) = metric.strip_suffix(suffix) {
            if let Some(family) = families.get(base) {
                if kinds.contains(&family.kind.as_str()) {
                    return Some((family, suffix == "_bucket"));
                }
            }
        }
    }
    None
}

// ---------------------------------------------------------------------------------------------
// PromQL, as far as the checks need it.

/// PromQL's functions, aggregation operators and keywords: identifiers that are no metric.
const FUNCTIONS: &str = "\
    abs absent absent_over_time acos acosh asin asinh atan atanh avg_over_time ceil changes clamp \
    clamp_max clamp_min cos cosh count_over_time day_of_month day_of_week day_of_year days_in_month \
    deg delta deriv double_exponential_smoothing exp floor histogram_avg histogram_count \
    histogram_fraction histogram_quantile histogram_stddev histogram_stdvar histogram_sum \
    holt_winters hour idelta increase info irate label_join label_replace last_over_time ln log10 \
    log2 mad_over_time max_over_time min_over_time minute month pi predict_linear present_over_time \
    quantile_over_time rad rate resets round scalar sgn sin sinh sort sort_by_label \
    sort_by_label_desc sort_desc sqrt stddev_over_time stdvar_over_time sum_over_time tan tanh time \
    timestamp vector year";
const AGGREGATIONS: &str = "\
    avg bottomk count count_values group limit_ratio limitk max min quantile stddev stdvar sum topk";
const KEYWORDS: &str = "\
    and or unless bool offset atan2 inf nan start end";
/// Clauses followed by a list of label names.
const CLAUSES: &str = "\
    by without on ignoring group_left group_right";

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Str(String),
    /// A number, a duration after `offset`, a range or subquery (`[5m]`, `[1h:5m]`), or a
    /// Grafana variable (`$__rate_interval`): nothing the checks read.
    Other,
    Punct(String),
}

fn tokenize(expr: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    let ident_start = |c: char| c.is_ascii_alphabetic() || c == '_' || c == ':';
    let ident_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    while i < chars.len() {
        let c = chars[i];
        match c {
            c if c.is_whitespace() => i += 1,
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '"' | '\'' | '`' => {
                let mut value = String::new();
                i += 1;
                loop {
                    match chars.get(i) {
                        None => return Err(format!("an unterminated string in {expr}")),
                        Some('\\') if c != '`' => {
                            value.extend(chars.get(i + 1));
                            i += 2;
                        }
                        Some(&q) if q == c => {
                            i += 1;
                            break;
                        }
                        Some(&other) => {
                            value.push(other);
                            i += 1;
                        }
                    }
                }
                tokens.push(Token::Str(value));
            }
            '[' => {
                let end =
                    chars[i..].iter().position(|&c| c == ']').ok_or(format!("an unclosed [ in {expr}"))?;
                i += end + 1;
                tokens.push(Token::Other);
            }
            '$' => {
                i += 1;
                if chars.get(i) == Some(&'{') {
                    i += chars[i..]
                        .iter()
                        .position(|&c| c == '}')
                        .ok_or(format!("an unclosed ${{ in {expr}"))?
                        + 1;
                } else {
                    while i < chars.len() && ident_char(chars[i]) {
                        i += 1;
                    }
                }
                tokens.push(Token::Other);
            }
            c if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) => {
                while i < chars.len() {
                    let d = chars[i];
                    if (d == 'e' || d == 'E') && matches!(chars.get(i + 1), Some('+' | '-')) {
                        i += 2;
                    } else if d.is_ascii_alphanumeric() || d == '.' || d == '_' {
                        i += 1;
                    } else {
                        break;
                    }
                }
                tokens.push(Token::Other);
            }
            c if ident_start(c) => {
                let start = i;
                while i < chars.len() && ident_char(chars[i]) {
                    i += 1;
                }
                tokens.push(Token::Ident(chars[start..i].iter().collect()));
            }
            _ => {
                let two: String = chars[i..chars.len().min(i + 2)].iter().collect();
                if ["=~", "!~", "!=", "==", ">=", "<="].contains(&two.as_str()) {
                    tokens.push(Token::Punct(two));
                    i += 2;
                } else if "(){},=<>+-*/%^@".contains(c) {
                    tokens.push(Token::Punct(c.to_string()));
                    i += 1;
                } else {
                    return Err(format!("an unexpected {c:?} in {expr}"));
                }
            }
        }
    }
    Ok(tokens)
}

/// A metric an expression selects, with its label matchers (label, operator, value).
#[derive(Debug)]
struct Selector {
    metric: String,
    /// Its token's position in the expression.
    at: usize,
    matchers: Vec<(String, String, String)>,
}

/// A clause's label list (`by (a, b)`), with the token positions of the expression it applies
/// to: an aggregation's argument for `by` and `without`, the whole expression otherwise.
#[derive(Debug)]
struct Clause {
    keyword: String,
    labels: Vec<String>,
    scope: std::ops::Range<usize>,
}

/// `word` is one of the words of `list`.
fn listed(list: &str, word: &str) -> bool {
    list.split_whitespace().any(|w| w == word)
}

fn is(token: Option<&Token>, punct: &str) -> bool {
    matches!(token, Some(Token::Punct(p)) if p == punct)
}

/// The position of the parenthesis that closes the one at `open`.
fn closing(tokens: &[Token], open: usize) -> Result<usize, String> {
    let mut depth = 0;
    for (i, token) in tokens.iter().enumerate().skip(open) {
        if is(Some(token), "(") {
            depth += 1;
        } else if is(Some(token), ")") {
            depth -= 1;
            if depth == 0 {
                return Ok(i);
            }
        }
    }
    Err("an unclosed (".into())
}

/// The position of the parenthesis that opens the one at `close`.
fn opening(tokens: &[Token], close: usize) -> Result<usize, String> {
    let mut depth = 0;
    for i in (0..=close).rev() {
        if is(tokens.get(i), ")") {
            depth += 1;
        } else if is(tokens.get(i), "(") {
            depth -= 1;
            if depth == 0 {
                return Ok(i);
            }
        }
    }
    Err("an unopened )".into())
}

/// The selectors and label clauses of an expression.
fn parse(expr: &str) -> Result<(Vec<Selector>, Vec<Clause>), String> {
    let tokens = tokenize(expr)?;
    let mut selectors = Vec::new();
    let mut clauses = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let token = &tokens[i];
        match token {
            Token::Ident(word) if listed(CLAUSES, word) => {
                if !is(tokens.get(i + 1), "(") {
                    // group_left and group_right may go without a list.
                    if word.starts_with("group_") {
                        i += 1;
                        continue;
                    }
                    return Err(format!("{word} without a label list in {expr}"));
                }
                let close = closing(&tokens, i + 1)?;
                let mut labels = Vec::new();
                for token in &tokens[i + 2..close] {
                    match token {
                        Token::Ident(label) => labels.push(label.clone()),
                        Token::Punct(p) if p == "," => {}
                        other => return Err(format!("{other:?} in {word}'s labels in {expr}")),
                    }
                }
                let scope = if !["by", "without"].contains(&word.as_str()) {
                    0..tokens.len()
                } else if matches!(tokens.get(i.wrapping_sub(1)), Some(Token::Ident(a)) if listed(AGGREGATIONS, a))
                {
                    // sum by (a) (argument)
                    if !is(tokens.get(close + 1), "(") {
                        return Err(format!("{word} ( ... ) without an argument in {expr}"));
                    }
                    close + 2..closing(&tokens, close + 1)?
                } else if i > 0 && is(tokens.get(i - 1), ")") {
                    // sum(argument) by (a)
                    opening(&tokens, i - 1)? + 1..i - 1
                } else {
                    return Err(format!("{word} after no aggregation in {expr}"));
                };
                clauses.push(Clause { keyword: word.clone(), labels, scope });
                i = close + 1;
            }
            Token::Ident(word)
                if listed(FUNCTIONS, word) || listed(AGGREGATIONS, word) || listed(KEYWORDS, word) =>
            {
                i += 1;
            }
            Token::Ident(metric) => {
                if is(tokens.get(i + 1), "(") {
                    return Err(format!("{metric}( is no PromQL function, in {expr}"));
                }
                let mut selector = Selector { metric: metric.clone(), at: i, matchers: Vec::new() };
                i += 1;
                if is(tokens.get(i), "{") {
                    i += 1;
                    loop {
                        match (tokens.get(i), tokens.get(i + 1), tokens.get(i + 2)) {
                            (Some(Token::Punct(p)), _, _) if p == "}" => {
                                i += 1;
                                break;
                            }
                            (Some(Token::Punct(p)), _, _) if p == "," => i += 1,
                            (Some(Token::Ident(label)), Some(Token::Punct(op)), Some(Token::Str(value)))
                                if ["=", "!=", "=~", "!~"].contains(&op.as_str()) =>
                            {
                                selector.matchers.push((label.clone(), op.clone(), value.clone()));
                                i += 3;
                            }
                            other => return Err(format!("a matcher of {metric} reads {other:?}, in {expr}")),
                        }
                    }
                }
                selectors.push(selector);
            }
            Token::Punct(p) if p == "{" => return Err(format!("a selector without a metric name in {expr}")),
            _ => i += 1,
        }
    }
    if selectors.is_empty() {
        return Err(format!("no metric in {expr}"));
    }
    Ok((selectors, clauses))
}

/// What the scrape configuration adds to every series: job -> the process it scrapes, and the
/// target labels each process's series carry.
struct Targets {
    jobs: BTreeMap<String, &'static str>,
    labels: BTreeMap<&'static str, BTreeSet<String>>,
}

/// The problems of one expression, each a sentence naming it.
fn check_expr(expr: &str, families: &BTreeMap<String, Family>, targets: &Targets) -> Vec<String> {
    let (selectors, clauses) = match parse(expr) {
        Ok(parsed) => parsed,
        Err(e) => return vec![e],
    };
    let mut problems = Vec::new();
    // The labels a selector's series have, or None where they are not known.
    let mut known: Vec<Option<BTreeSet<String>>> = Vec::new();
    for selector in &selectors {
        let metric = &selector.metric;
        let (processes, mut labels, bucket): (BTreeSet<&str>, Option<BTreeSet<String>>, bool) =
            if metric == "up" {
                (targets.labels.keys().copied().collect(), Some(BTreeSet::new()), false)
            } else if let Some((family, bucket)) = resolve(families, metric) {
                (family.processes.clone(), family.labels.clone(), bucket)
            } else {
                problems.push(format!("{metric} is exported by no evac process (in {expr})"));
                known.push(None);
                continue;
            };
        if labels.is_none() {
            problems.push(format!("{metric}: its labels are unknown (not in docs/metrics.md) (in {expr})"));
        }
        if let Some(labels) = &mut labels {
            if bucket {
                labels.insert("le".into());
            }
            for process in &processes {
                labels.extend(targets.labels[process].iter().cloned());
            }
        }
        for (label, op, value) in &selector.matchers {
            if let Some(labels) = &labels {
                if !labels.contains(label) {
                    problems.push(format!("{metric} has no label {label} (in {expr})"));
                }
            }
            if label == "job" && op == "=" {
                match targets.jobs.get(value) {
                    None => problems.push(format!("no scrape configuration has job {value} (in {expr})")),
                    Some(process) if !processes.contains(process) => {
                        problems.push(format!("{metric} is not exported by job {value} (in {expr})"))
                    }
                    Some(_) => {}
                }
            }
        }
        known.push(labels);
    }
    for clause in &clauses {
        let scoped: Vec<(&Selector, &Option<BTreeSet<String>>)> =
            selectors.iter().zip(&known).filter(|(s, _)| clause.scope.contains(&s.at)).collect();
        for label in &clause.labels {
            let on_every = scoped.iter().all(|(_, labels)| labels.as_ref().is_none_or(|l| l.contains(label)));
            let on_any = scoped.iter().any(|(_, labels)| labels.as_ref().is_none_or(|l| l.contains(label)));
            // by and without group their argument's series: each must have the label. on,
            // ignoring and group_* match two sides: one at least has it.
            let ok = if ["by", "without"].contains(&clause.keyword.as_str()) { on_every } else { on_any };
            if !ok || scoped.is_empty() {
                let metrics: Vec<&str> = scoped.iter().map(|(s, _)| s.metric.as_str()).collect();
                problems
                    .push(format!("{} ({label}): not a label of {metrics:?} (in {expr})", clause.keyword));
            }
        }
    }
    problems
}

// ---------------------------------------------------------------------------------------------
// The scrape configuration against deploy/.

/// The evac process a workload's first container runs (`evac serve`, ...), and its arguments.
fn process_of(workload: &Value) -> (&'static str, Vec<String>) {
    let container = &workload["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<String> =
        container["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_owned()).collect();
    let process = PROCESSES
        .iter()
        .map(|(p, _)| *p)
        .find(|p| args.first().map(String::as_str) == Some(*p))
        .unwrap_or_else(|| panic!("{} runs no evac process: {args:?}", name(workload)));
    (process, args)
}

/// The address a process serves /metrics on: `--probe-addr` (serve, hold) or `--metrics-addr`
/// (control), as (host, port).
fn metrics_address(args: &[String]) -> (String, u16) {
    let address = args
        .iter()
        .find_map(|a| a.strip_prefix("--probe-addr=").or_else(|| a.strip_prefix("--metrics-addr=")))
        .unwrap_or_else(|| panic!("no --probe-addr or --metrics-addr in {args:?}"));
    let (host, port) = address.rsplit_once(':').unwrap();
    (host.to_owned(), port.parse().unwrap())
}

/// The container port named `port` (or numbered so) of a workload's first container.
fn container_port(workload: &Value, port: &Value) -> Option<u16> {
    let ports = workload["spec"]["template"]["spec"]["containers"][0]["ports"].as_array()?;
    ports
        .iter()
        .find(|p| match port {
            Value::String(name) => p["name"].as_str() == Some(name),
            number => p["containerPort"] == *number,
        })
        .map(|p| p["containerPort"].as_u64().unwrap() as u16)
}

/// The Deployments and DaemonSets in `namespaces` whose pods `selector` selects.
fn selected_workloads<'a>(deploy: &'a [Value], namespaces: &[&str], selector: &Value) -> Vec<&'a Value> {
    deploy
        .iter()
        .filter(|o| ["Deployment", "DaemonSet"].contains(&kind(o)))
        .filter(|o| namespaces.contains(&namespace(o)))
        .filter(|o| selects(selector, &o["spec"]["template"]["metadata"]["labels"]))
        .collect()
}

fn match_names(monitor: &Value) -> Vec<&str> {
    let names = monitor["spec"]["namespaceSelector"]["matchNames"].as_array().unwrap_or_else(|| {
        panic!("{}: namespaceSelector.matchNames, to find evac's namespaces", name(monitor))
    });
    names.iter().map(|n| n.as_str().unwrap()).collect()
}

/// The job a monitor's relabelings give its targets (each sets its own), and the other target
/// labels they add.
fn relabeled(monitor: &Value, endpoint: &Value) -> (String, BTreeSet<String>) {
    let mut job = None;
    let mut added = BTreeSet::new();
    for rule in endpoint["relabelings"].as_array().into_iter().flatten() {
        let target = rule["targetLabel"].as_str().unwrap_or_default();
        if target == "job" {
            job = Some(rule["replacement"].as_str().unwrap().to_owned());
        } else if !target.starts_with("__") && !target.is_empty() {
            added.insert(target.to_owned());
        }
    }
    (job.unwrap_or_else(|| panic!("{}: no job relabeling", name(monitor))), added)
}

/// Checks the monitors against `deploy/` and says what their targets are.
fn scrape_targets(deploy: &[Value], monitoring: &[Value]) -> Targets {
    let namespaces: BTreeSet<&str> = of_kind(deploy, "Namespace").map(name).collect();
    let services: Vec<&Value> = deploy.iter().chain(monitoring).filter(|o| kind(o) == "Service").collect();
    let mut targets = Targets { jobs: BTreeMap::new(), labels: BTreeMap::new() };
    let mut scraped = BTreeSet::new();
    let mut add = |job: String, process: &'static str, labels: BTreeSet<String>| {
        assert!(targets.jobs.insert(job.clone(), process).is_none_or(|p| p == process), "job {job} twice");
        targets.labels.entry(process).or_default().extend(labels);
        scraped.insert(process);
    };
    // The labels Prometheus gives every target of a ServiceMonitor or a PodMonitor.
    let base = |of: &[&str]| -> BTreeSet<String> {
        ["job", "instance", "namespace", "pod", "container", "endpoint"]
            .iter()
            .chain(of)
            .map(|l| l.to_string())
            .collect()
    };

    for monitor in of_kind(monitoring, "ServiceMonitor") {
        let within = match_names(monitor);
        for ns in &within {
            assert!(namespaces.contains(ns), "{}: namespace {ns} is not deploy/'s", name(monitor));
        }
        let selector = &monitor["spec"]["selector"]["matchLabels"];
        let chosen: Vec<&&Value> = services
            .iter()
            .filter(|s| within.contains(&namespace(s)) && selects(selector, &s["metadata"]["labels"]))
            .collect();
        assert!(!chosen.is_empty(), "ServiceMonitor {} selects no Service", name(monitor));
        for endpoint in monitor["spec"]["endpoints"].as_array().unwrap() {
            let port = endpoint["port"].as_str().expect("an endpoint's port, by name");
            let (job, added) = relabeled(monitor, endpoint);
            for service in &chosen {
                let service_port = service["spec"]["ports"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|p| p["name"].as_str() == Some(port))
                    .unwrap_or_else(|| panic!("Service {} has no port named {port}", name(service)));
                let workloads =
                    selected_workloads(deploy, &[namespace(service)], &service["spec"]["selector"]);
                assert!(!workloads.is_empty(), "Service {} selects no pods of deploy/", name(service));
                for workload in workloads {
                    let target = service_port.get("targetPort").unwrap_or(&service_port["port"]);
                    let number = container_port(workload, target).unwrap_or_else(|| {
                        panic!(
                            "{} has no container port {target} (Service {})",
                            name(workload),
                            name(service)
                        )
                    });
                    let (process, args) = process_of(workload);
                    let (host, listening) = metrics_address(&args);
                    assert_eq!(
                        number,
                        listening,
                        "{}: port {target} is not where /metrics is",
                        name(workload)
                    );
                    assert!(!host.starts_with("127."), "{}: /metrics on {host} only", name(workload));
                    add(job.clone(), process, base(&["service"]).into_iter().chain(added.clone()).collect());
                }
            }
        }
    }

    for monitor in of_kind(monitoring, "PodMonitor") {
        let within = match_names(monitor);
        let workloads = selected_workloads(deploy, &within, &monitor["spec"]["selector"]["matchLabels"]);
        assert!(!workloads.is_empty(), "PodMonitor {} selects no pods of deploy/", name(monitor));
        for endpoint in monitor["spec"]["podMetricsEndpoints"].as_array().unwrap() {
            let (job, added) = relabeled(monitor, endpoint);
            for workload in &workloads {
                let (process, args) = process_of(workload);
                let (host, listening) = metrics_address(&args);
                // A named port, or (a pod that declares none) the address set by relabeling.
                let port = match endpoint.get("port") {
                    Some(port) => container_port(workload, port)
                        .unwrap_or_else(|| panic!("{} has no container port {port}", name(workload))),
                    None => {
                        let rules = endpoint["relabelings"].as_array().unwrap();
                        let addresses: Vec<&Value> =
                            rules.iter().filter(|r| r["targetLabel"] == "__address__").collect();
                        assert!(
                            !addresses.is_empty(),
                            "PodMonitor {}: neither a port nor an address",
                            name(monitor)
                        );
                        let ports: BTreeSet<u16> = addresses
                            .iter()
                            .map(|r| {
                                r["replacement"]
                                    .as_str()
                                    .unwrap()
                                    .rsplit_once(':')
                                    .unwrap()
                                    .1
                                    .parse()
                                    .unwrap()
                            })
                            .collect();
                        assert_eq!(ports.len(), 1, "PodMonitor {}: addresses on {ports:?}", name(monitor));
                        ports.into_iter().next().unwrap()
                    }
                };
                assert_eq!(
                    port,
                    listening,
                    "{}: PodMonitor {} scrapes another port",
                    name(workload),
                    name(monitor)
                );
                // Prometheus reaches no loopback address.
                assert!(
                    !host.starts_with("127."),
                    "{}: /metrics on {host}, which no scraper reaches",
                    name(workload)
                );
                add(job.clone(), process, base(&[]).into_iter().chain(added.clone()).collect());
            }
        }
    }
    let all: BTreeSet<&str> = PROCESSES.iter().map(|(p, _)| *p).collect();
    assert_eq!(scraped, all, "every process is scraped");
    targets
}

// ---------------------------------------------------------------------------------------------
// The tests.

/// Every expression of the PrometheusRule and the dashboard, with where it is.
fn expressions(monitoring: &[Value]) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for rule in of_kind(monitoring, "PrometheusRule") {
        for group in rule["spec"]["groups"].as_array().unwrap() {
            for rule in group["rules"].as_array().unwrap() {
                let what = rule["alert"].as_str().or(rule["record"].as_str()).unwrap();
                found.push((format!("alert {what}"), rule["expr"].as_str().unwrap().to_owned()));
            }
        }
    }
    fn walk(panels: &Value, found: &mut Vec<(String, String)>) {
        for panel in panels.as_array().into_iter().flatten() {
            for target in panel["targets"].as_array().into_iter().flatten() {
                let title = panel["title"].as_str().unwrap_or_default();
                found.push((format!("panel {title}"), target["expr"].as_str().unwrap().to_owned()));
            }
            walk(&panel["panels"], found);
        }
    }
    walk(&dashboard()["panels"], &mut found);
    found
}

#[test]
fn monitoring_renders_the_objects_it_should() {
    let objects = render("deploy/monitoring");
    let kinds: Vec<String> = objects.iter().map(|o| format!("{}/{}", kind(o), name(o))).collect();
    let expected = [
        "ConfigMap/evac-grafana-dashboard",
        "PodMonitor/evac-hold",
        "PrometheusRule/evac",
        "Service/evac-controller-metrics",
        "ServiceMonitor/evac-control",
        "ServiceMonitor/evac-serve",
    ];
    let expected: BTreeSet<String> = expected.iter().map(|e| e.to_string()).collect();
    assert_eq!(kinds.into_iter().collect::<BTreeSet<_>>(), expected);
    for object in &objects {
        let api = object["apiVersion"].as_str().unwrap();
        match kind(object) {
            "ServiceMonitor" | "PodMonitor" | "PrometheusRule" => assert_eq!(api, "monitoring.coreos.com/v1"),
            _ => assert_eq!(api, "v1"),
        }
        assert!(!namespace(object).is_empty(), "{} names its namespace", name(object));
    }
    // The Service decodes as one.
    let service = of_kind(&objects, "Service").next().unwrap();
    let _: k8s_openapi::api::core::v1::Service = serde_json::from_value(service.clone()).unwrap();

    // The dashboard's ConfigMap: a fixed name, the sidecar's label, the file as it is.
    let config = of_kind(&objects, "ConfigMap").next().unwrap();
    assert_eq!(config["metadata"]["labels"]["grafana_dashboard"], "1");
    let data = config["data"].as_object().unwrap();
    assert_eq!(data.len(), 1);
    let embedded: Value = serde_json::from_str(data.values().next().unwrap().as_str().unwrap()).unwrap();
    assert_eq!(embedded, dashboard());

    // deploy/ does not include it (it needs the Prometheus Operator's CRDs).
    let base = std::fs::read_to_string(repo_root().join("deploy/kustomization.yaml")).unwrap();
    assert!(!base.contains("monitoring"), "deploy/kustomization.yaml must not include deploy/monitoring");
}

#[test]
fn every_alert_says_how_severe_it_is_and_what_to_look_at() {
    let objects = render("deploy/monitoring");
    let mut names = BTreeSet::new();
    for rule in of_kind(&objects, "PrometheusRule") {
        for group in rule["spec"]["groups"].as_array().unwrap() {
            assert!(group["name"].as_str().is_some_and(|n| !n.is_empty()));
            for rule in group["rules"].as_array().unwrap() {
                let alert = rule["alert"].as_str().expect("alerting rules only");
                assert!(names.insert(alert.to_owned()), "{alert} twice");
                let severity = rule["labels"]["severity"].as_str();
                assert!(
                    matches!(severity, Some("critical" | "warning" | "info")),
                    "{alert}: severity {severity:?}"
                );
                for annotation in ["summary", "description"] {
                    let text = rule["annotations"][annotation].as_str().unwrap_or_default();
                    assert!(text.len() > 20, "{alert}: no {annotation}");
                }
                if let Some(wait) = rule.get("for") {
                    let wait = wait.as_str().unwrap();
                    let (number, unit) = wait.split_at(wait.len() - 1);
                    assert!(number.parse::<u32>().is_ok() && "smh".contains(unit), "{alert}: for {wait}");
                }
            }
        }
    }
    for wanted in [
        "EvacEvacuationsFailing",
        "EvacHoldsNearBound",
        "EvacHeldVMShutDown",
        "EvacPolicyEvaluationErrors",
        "EvacAdmissionRequestsRefused",
        "EvacWebhookDown",
        "EvacDisruptionsLeftToKubeVirt",
        "EvacControllerNotLeading",
    ] {
        assert!(names.contains(wanted), "no alert {wanted}: {names:?}");
    }
}

#[test]
fn the_dashboard_is_a_grafana_dashboard_on_a_prometheus_variable() {
    let dashboard = dashboard();
    assert!(dashboard["uid"].as_str().is_some_and(|u| !u.is_empty() && u.len() <= 40));
    assert!(dashboard["title"].as_str().is_some_and(|t| !t.is_empty()));
    assert!(dashboard["schemaVersion"].as_u64().is_some_and(|v| v >= 36), "schemaVersion");
    let variables = dashboard["templating"]["list"].as_array().unwrap();
    assert!(
        variables
            .iter()
            .any(|v| v["type"] == "datasource" && v["name"] == "datasource" && v["query"] == "prometheus"),
        "a ${{datasource}} variable of Prometheus data sources"
    );
    let mut ids = BTreeSet::new();
    let mut queried = 0;
    fn walk(panels: &Value, ids: &mut BTreeSet<u64>, queried: &mut usize) {
        for panel in panels.as_array().into_iter().flatten() {
            let title = panel["title"].as_str().unwrap();
            assert!(ids.insert(panel["id"].as_u64().unwrap()), "panel id of {title} twice");
            let grid = &panel["gridPos"];
            assert!(grid["x"].as_u64().unwrap() + grid["w"].as_u64().unwrap() <= 24, "{title} is too wide");
            for target in panel["targets"].as_array().into_iter().flatten() {
                assert_eq!(target["datasource"]["uid"], "${datasource}", "{title}");
                assert_eq!(panel["datasource"]["uid"], "${datasource}", "{title}");
                *queried += 1;
            }
            walk(&panel["panels"], ids, queried);
        }
    }
    walk(&dashboard["panels"], &mut ids, &mut queried);
    assert!(queried >= 15, "{queried} queries");
}

/// Every expression names metrics evac exports, with their labels, and scrapes what `deploy/`
/// runs.
#[test]
fn every_expression_names_exported_metrics_and_labels() {
    let deploy = render("deploy");
    let monitoring = render("deploy/monitoring");
    let targets = scrape_targets(&deploy, &monitoring);
    let families = families();
    let found = expressions(&monitoring);
    assert!(found.len() >= 25, "{} expressions", found.len());
    let problems: Vec<String> = found
        .iter()
        .flat_map(|(place, expr)| {
            check_expr(expr, &families, &targets).into_iter().map(move |p| format!("{place}: {p}"))
        })
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    // The families the panels and alerts are meant to show are each used somewhere.
    let used: BTreeSet<String> =
        found.iter().flat_map(|(_, expr)| parse(expr).unwrap().0).map(|s| s.metric).collect();
    for metric in [
        "evac_policy_evaluations_total",
        "evac_evacuations_total",
        "evac_evacuations_pending",
        "evac_evacuations_running",
        "evac_evacuation_duration_seconds_bucket",
        "evac_disruptions_total",
        "evac_holds",
        "evac_holds_near_bound",
        "evac_holds_ended_total",
        "evac_policy_evaluation_duration_seconds_bucket",
        "evac_policy_faults_total",
        "evac_policy_effects_total",
        "evac_policy_version_info",
        "evac_leader_election_master_status",
        "evac_admission_requests_refused_total",
        "process_resident_memory_bytes",
        "process_cpu_seconds_total",
        "evac_build_info",
        "up",
    ] {
        assert!(used.contains(metric), "{metric} is in no expression");
    }
}

/// The checker finds what it is for: a misspelled metric or label, a label of another metric, a
/// metric of another job, a misspelled function.
#[test]
fn the_expression_check_finds_mistakes() {
    let deploy = render("deploy");
    let monitoring = render("deploy/monitoring");
    let targets = scrape_targets(&deploy, &monitoring);
    let families = families();
    let check = |expr: &str| check_expr(expr, &families, &targets);
    for good in [
        r#"sum by (code) (rate(evac_policy_evaluations_total{policy="pod-eviction"}[5m]))"#,
        "histogram_quantile(0.95, sum by (le) (rate(evac_evacuation_duration_seconds_bucket[30m])))",
        "sum(rate(evac_policy_faults_total[5m])) by (kind, job)",
        r#"absent(up{job="evac-serve"} == 1)"#,
        r#"max(up{job="evac-serve"}) == 0"#,
        "max by (node) (evac_holds_near_bound) > 0",
        "evac_build_info",
    ] {
        assert_eq!(check(good), Vec::<String>::new(), "{good}");
    }
    for bad in [
        "sum(rate(evac_evacuation_total[5m]))",
        "sum(rate(evac_evacuations[5m]))",
        "evac_holds_total",
        "sum by (outcome) (rate(evac_disruptions_total[5m]))",
        r#"rate(evac_evacuations_total{outcom="failed"}[5m])"#,
        r#"evac_holds{job="evac-control"}"#,
        "rat(evac_evacuations_total[5m])",
        "sum by (le) (rate(evac_evacuations_total[5m]))",
        r#"up{jb="evac-serve"}"#,
    ] {
        assert!(!check(bad).is_empty(), "{bad} passed");
    }
}
