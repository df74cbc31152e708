//! template.yaml against the workspace: (a) one `AWS::Serverless::Function` per function crate
//! and no other, (b) every hookledger metric an alarm or the dashboard names is in
//! `shared::telemetry::REGISTRY` (same string, same dimensions), (c) each function's IAM
//! actions are exactly the expected set, no `*` resource, each reads only its own secrets, (d)
//! the optional console: every route of its API behind the JWT authorizer, everything of it
//! under the `HasConsole` condition, its role reading only its login, the sources and its CSRF
//! key. No database.
//!
//! The template is read by cfn-lint's decoder (`cfnlint.decode.cfn_yaml`, in the tools venv as
//! a dependency of the SAM CLI) through `HOOKLEDGER_TOOLS_PYTHON`: it is how AWS's own linter
//! reads CloudFormation YAML, and it turns every short-form tag (`!Ref`, `!Sub`, `!GetAtt`,
//! `!If`, ...) into the long form (`{"Ref": ..}`, `{"Fn::Sub": ..}`), so the checks below see
//! plain JSON. `HOOKLEDGER_TEMPLATE` names another template file to check (e.g. a merge
//! candidate); the default is the repository's template.yaml.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use shared::telemetry::{MetricName, METRIC_NAMESPACE};

/// The template as JSON, read by cfn-lint's decoder.
fn decode(path: &Path) -> Value {
    let python = std::env::var("HOOKLEDGER_TOOLS_PYTHON").expect(
        "HOOKLEDGER_TOOLS_PYTHON: run with make test (its venv has cfn-lint, which reads the template)",
    );
    let output = Command::new(python)
        .args([
            "-c",
            "import json, sys\n\
             from cfnlint.decode import cfn_yaml\n\
             print(json.dumps(cfn_yaml.load(sys.argv[1])))",
        ])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "decoding {}: {}",
        path.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

fn template_path() -> PathBuf {
    std::env::var_os("HOOKLEDGER_TEMPLATE")
        .map(PathBuf::from)
        .unwrap_or_else(|| hookledger_tests::repo_root().join("template.yaml"))
}

fn template() -> Value {
    decode(&template_path())
}

/// A template from YAML text (the checks' own tests).
fn template_from(yaml: &str) -> Value {
    let dir = std::env::temp_dir().join(format!("hookledger-template-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("t{}.yaml", rand_suffix()));
    std::fs::write(&path, yaml).unwrap();
    let decoded = decode(&path);
    let _ = std::fs::remove_file(&path);
    decoded
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

fn resources(template: &Value) -> Vec<(&str, &Value)> {
    template["Resources"]
        .as_object()
        .map(|r| r.iter().map(|(k, v)| (k.as_str(), v)).collect())
        .unwrap_or_default()
}

fn functions(template: &Value) -> Vec<(&str, &Value)> {
    resources(template)
        .into_iter()
        .filter(|(_, r)| r["Type"] == "AWS::Serverless::Function")
        .collect()
}

// ---- (a) functions and crates ----

/// The crates under `functions/` (directories with a Cargo.toml).
fn function_crates() -> BTreeSet<String> {
    let dir = hookledger_tests::repo_root().join("functions");
    std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.join("Cargo.toml").is_file())
        .map(|path| path.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

/// What is wrong between the template's function resources and `crates`: each is built from
/// the reference deployment (`CodeUri: handlers`, the crate whose `src/bin/` hands
/// `handlers::APP` to each function, as a team's project does from its own root), as the
/// binary named after its function crate, which must exist.
fn function_problems(template: &Value, crates: &BTreeSet<String>) -> Vec<String> {
    let mut problems = Vec::new();
    let mut by_crate: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let bins = hookledger_tests::repo_root().join("handlers/src/bin");
    for (id, resource) in functions(template) {
        let code_uri = resource["Properties"]["CodeUri"].as_str().unwrap_or("");
        let krate = resource["Metadata"]["BuildProperties"]["Binary"]
            .as_str()
            .unwrap_or("");
        if code_uri != "handlers" {
            problems.push(format!(
                "{id}: CodeUri {code_uri:?} is not the reference deployment, handlers"
            ));
            continue;
        }
        if !crates.contains(krate) {
            problems.push(format!(
                "{id}: BuildProperties.Binary {krate:?} is no function crate"
            ));
        } else if !bins.join(format!("{krate}.rs")).is_file() {
            problems.push(format!("{id}: handlers/src/bin/{krate}.rs is missing"));
        }
        if resource["Metadata"]["BuildMethod"] != "rust-cargolambda" {
            problems.push(format!(
                "{id}: Metadata.BuildMethod is not rust-cargolambda"
            ));
        }
        by_crate.entry(krate).or_default().push(id);
    }
    for krate in crates {
        match by_crate.get(krate.as_str()).map(Vec::len).unwrap_or(0) {
            1 => {}
            0 => problems.push(format!(
                "functions/{krate} has no AWS::Serverless::Function"
            )),
            n => problems.push(format!(
                "functions/{krate} has {n} function resources: {:?}",
                by_crate[krate.as_str()]
            )),
        }
    }
    problems
}

#[test]
fn template_has_one_function_per_function_crate_and_no_other() {
    let crates = function_crates();
    assert!(
        crates.contains("receiver") && crates.contains("worker"),
        "{crates:?}"
    );
    let problems = function_problems(&template(), &crates);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ---- (b) metric names ----

/// A hookledger metric as a template names it: where, the name, its dimension names (sorted).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Named {
    place: String,
    name: String,
    dimensions: BTreeSet<String>,
}

/// The text of a string or of `Fn::Sub`'s template string.
fn text(value: &Value) -> Option<&str> {
    match value {
        Value::String(s) => Some(s),
        Value::Object(o) => match o.get("Fn::Sub") {
            Some(Value::String(s)) => Some(s),
            Some(Value::Array(a)) => a.first().and_then(Value::as_str),
            _ => None,
        },
        _ => None,
    }
}

/// Every `FUNC(metric) FROM SCHEMA(namespace, dims..)` or `FROM namespace` of a Metrics
/// Insights query, as `(metric, namespace, Some(dims) | None)`.
fn insights_metrics(query: &str) -> Vec<(String, String, Option<BTreeSet<String>>)> {
    let mut found = Vec::new();
    let upper = query.to_ascii_uppercase();
    let mut from = 0;
    while let Some(at) = upper[from..].find("SELECT ") {
        let select = from + at + "SELECT ".len();
        let open = select + query[select..].find('(').unwrap_or(0);
        let close = open + query[open..].find(')').unwrap_or(0);
        let metric = query[open + 1..close].trim().trim_matches('"').to_owned();
        let rest = &query[close..];
        let rest_upper = &upper[close..];
        let Some(f) = rest_upper.find(" FROM ") else {
            break;
        };
        let source = rest[f + " FROM ".len()..].trim_start();
        if source.to_ascii_uppercase().starts_with("SCHEMA(") {
            let inner = &source["SCHEMA(".len()..source.find(')').unwrap_or(source.len())];
            let mut parts = inner
                .split(',')
                .map(|p| p.trim().trim_matches('"').to_owned());
            let namespace = parts.next().unwrap_or_default();
            found.push((metric, namespace, Some(parts.collect())));
        } else {
            let namespace = source
                .split_whitespace()
                .next()
                .unwrap_or("")
                .trim_matches('"')
                .to_owned();
            found.push((metric, namespace, None));
        }
        from = close;
    }
    found
}

fn from_query(place: &str, query: &str, out: &mut Vec<Named>) {
    for (name, namespace, dimensions) in insights_metrics(query) {
        if namespace == METRIC_NAMESPACE {
            out.push(Named {
                place: place.to_owned(),
                name,
                // A FROM without SCHEMA covers any dimensions: nothing to compare.
                dimensions: dimensions.unwrap_or_default(),
            });
        }
    }
}

/// The hookledger metrics the alarms name (`MetricName`, `Metrics[].MetricStat`, Metrics
/// Insights `Expression`s) and the dashboard names (metric arrays, `expression`s).
fn named_metrics(template: &Value) -> Vec<Named> {
    let mut out = Vec::new();
    for (id, resource) in resources(template) {
        let properties = &resource["Properties"];
        match resource["Type"].as_str() {
            Some("AWS::CloudWatch::Alarm") => {
                if properties["Namespace"] == METRIC_NAMESPACE {
                    out.push(Named {
                        place: id.to_owned(),
                        name: properties["MetricName"].as_str().unwrap_or("").to_owned(),
                        dimensions: dimension_names(&properties["Dimensions"]),
                    });
                }
                for metric in properties["Metrics"].as_array().into_iter().flatten() {
                    let stat = &metric["MetricStat"]["Metric"];
                    if stat["Namespace"] == METRIC_NAMESPACE {
                        out.push(Named {
                            place: id.to_owned(),
                            name: stat["MetricName"].as_str().unwrap_or("").to_owned(),
                            dimensions: dimension_names(&stat["Dimensions"]),
                        });
                    }
                    if let Some(query) = text(&metric["Expression"]) {
                        from_query(id, query, &mut out);
                    }
                }
            }
            Some("AWS::CloudWatch::Dashboard") => {
                let body = text(&properties["DashboardBody"])
                    .unwrap_or_else(|| panic!("{id}: DashboardBody is not a string or !Sub"));
                dashboard_metrics(id, body, &mut out);
            }
            _ => {}
        }
    }
    out
}

fn dimension_names(dimensions: &Value) -> BTreeSet<String> {
    dimensions
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["Name"].as_str().map(str::to_owned))
        .collect()
}

/// `body` with every `${...}` of `!Sub` replaced by a placeholder (they all sit inside JSON
/// strings), parsed; then every metric array and expression of every widget.
fn dashboard_metrics(id: &str, body: &str, out: &mut Vec<Named>) {
    let mut plain = String::new();
    let mut rest = body;
    while let Some(at) = rest.find("${") {
        plain.push_str(&rest[..at]);
        let end = rest[at..]
            .find('}')
            .map(|e| at + e + 1)
            .unwrap_or(rest.len());
        plain.push_str("SUBSTITUTED");
        rest = &rest[end..];
    }
    plain.push_str(rest);
    let body: Value = serde_json::from_str(&plain)
        .unwrap_or_else(|error| panic!("{id}: the dashboard body is not JSON: {error}"));
    for (index, widget) in body["widgets"].as_array().into_iter().flatten().enumerate() {
        let place = format!("{id} widget {index} ({})", widget["properties"]["title"]);
        let (mut namespace, mut name) = (String::new(), String::new());
        let mut previous: Vec<String> = Vec::new();
        for metric in widget["properties"]["metrics"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let items = metric.as_array().cloned().unwrap_or_default();
            if let Some(query) = items
                .iter()
                .find_map(|item| item["expression"].as_str().map(str::to_owned))
            {
                from_query(&place, &query, out);
                continue;
            }
            // [namespace, name, dim, value, ..., {options}]; "." repeats the previous entry.
            let strings: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
            if strings.len() < 2 {
                continue;
            }
            if strings[0] != "." {
                namespace = strings[0].to_owned();
            }
            if strings[1] != "." {
                name = strings[1].to_owned();
            }
            let dimensions: Vec<String> = strings[2..]
                .chunks(2)
                .enumerate()
                .map(|(i, pair)| match (pair[0], previous.get(i)) {
                    (".", Some(before)) => before.clone(),
                    (name, _) => name.to_owned(),
                })
                .collect();
            if namespace == METRIC_NAMESPACE {
                out.push(Named {
                    place: place.clone(),
                    name: name.clone(),
                    dimensions: dimensions.iter().cloned().collect(),
                });
            }
            previous = dimensions;
        }
    }
}

/// What is wrong with `named`: a name not in the registry, or dimensions not the registered
/// ones.
fn metric_problems(named: &[Named]) -> Vec<String> {
    let mut problems = Vec::new();
    for metric in named {
        match MetricName::from_name(&metric.name) {
            None => problems.push(format!(
                "{}: {:?} is not in shared::telemetry::REGISTRY",
                metric.place, metric.name
            )),
            Some(registered) => {
                let expected: BTreeSet<String> = registered
                    .spec()
                    .dimensions
                    .iter()
                    .map(|d| (*d).to_owned())
                    .collect();
                if !metric.dimensions.is_empty() && metric.dimensions != expected {
                    problems.push(format!(
                        "{}: {} with dimensions {:?}, registered with {:?}",
                        metric.place, metric.name, metric.dimensions, expected
                    ));
                }
            }
        }
    }
    problems
}

#[test]
fn template_alarms_and_dashboard_name_only_registered_metrics() {
    let template = template();
    let named = named_metrics(&template);
    let problems = metric_problems(&named);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let names: BTreeSet<&str> = named.iter().map(|m| m.name.as_str()).collect();
    // The checks saw the alarms and the dashboard (not an empty list).
    for expected in [
        "stuck_claims",
        "dead_letters_new",
        "digest_mismatch",
        "signature_failed",
        "past_retention_overdue",
        "outbox_backlog_oldest_age",
        "outbox_dead_new",
        "deliveries",
        "delivery_latency",
        "backlog_due",
        "swept",
        "idle_in_transaction_sessions",
    ] {
        assert!(
            names.contains(expected),
            "{expected} not found in {names:?}"
        );
    }
    let places: BTreeSet<&str> = named.iter().map(|m| m.place.as_str()).collect();
    assert!(
        places.iter().any(|p| p.starts_with("Dashboard widget")),
        "{places:?}"
    );
}

// ---- (c) IAM ----

/// Actions of the SAM policy templates in use (from the SAM policy template list).
fn template_actions(name: &str) -> Option<&'static [&'static str]> {
    Some(match name {
        "LambdaInvokePolicy" => &["lambda:InvokeFunction"],
        "SQSSendMessagePolicy" => &["sqs:SendMessage*"],
        "EventBridgePutEventsPolicy" => &["events:PutEvents"],
        "AWSSecretsManagerGetSecretValuePolicy" => &["secretsmanager:GetSecretValue"],
        _ => return None,
    })
}

/// Both branches of an `Fn::If` (without `AWS::NoValue`), or the value itself.
fn branches(value: &Value) -> Vec<&Value> {
    match value.get("Fn::If").and_then(Value::as_array) {
        Some(parts) if parts.len() == 3 => parts[1..]
            .iter()
            .filter(|v| v.get("Ref").and_then(Value::as_str) != Some("AWS::NoValue"))
            .flat_map(branches)
            .collect(),
        _ => vec![value],
    }
}

/// The items of a list that may itself be an `Fn::If`, each item possibly an `Fn::If`.
fn items(value: &Value) -> Vec<&Value> {
    branches(value)
        .into_iter()
        .flat_map(|v| match v {
            Value::Array(a) => a.iter().flat_map(branches).collect(),
            other => vec![other],
        })
        .collect()
}

/// A statement's resources as text: strings, `!Sub` templates, `Ref:X`, `GetAtt:X.Y`.
fn resource_texts(value: &Value) -> Vec<String> {
    items(value)
        .into_iter()
        .map(|v| match v {
            Value::String(s) => s.clone(),
            Value::Object(o) => {
                if let Some(r) = o.get("Ref").and_then(Value::as_str) {
                    format!("Ref:{r}")
                } else if let Some(g) = o.get("Fn::GetAtt") {
                    let parts: Vec<&str> = match g {
                        Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                        Value::String(s) => vec![s.as_str()],
                        _ => vec![],
                    };
                    format!("GetAtt:{}", parts.join("."))
                } else if let Some(s) = text(v) {
                    s.to_owned()
                } else {
                    v.to_string()
                }
            }
            other => other.to_string(),
        })
        .collect()
}

/// One function's granted actions, and what is wrong with its policies.
fn function_actions(id: &str, function: &Value) -> (BTreeSet<String>, Vec<String>) {
    let mut actions = BTreeSet::new();
    let mut problems = Vec::new();
    let properties = &function["Properties"];
    if !properties["Role"].is_null() {
        problems.push(format!(
            "{id}: an explicit Role is not checked; use Policies"
        ));
    }
    for policy in items(&properties["Policies"]) {
        match policy {
            Value::String(name) => problems.push(format!("{id}: managed policy {name}")),
            Value::Object(o) if o.contains_key("Statement") => {
                for statement in items(&o["Statement"]) {
                    if statement["Effect"] != "Allow"
                        || statement.get("NotAction").is_some()
                        || statement.get("NotResource").is_some()
                    {
                        problems.push(format!("{id}: statement {statement} is not a plain Allow"));
                    }
                    let granted: Vec<String> = items(&statement["Action"])
                        .into_iter()
                        .filter_map(|a| a.as_str().map(str::to_owned))
                        .collect();
                    let resources = resource_texts(&statement["Resource"]);
                    for action in &granted {
                        // Every action names its resources: the outbox's queues and buses, the
                        // worker, the secrets (no `*` anywhere, not only on secrets).
                        if let Some(wild) = resources.iter().find(|r| r.contains('*')) {
                            problems.push(format!("{id}: {action} on {wild}"));
                        }
                        if action == "secretsmanager:GetSecretValue" {
                            let allowed = allowed_secrets(id);
                            for resource in &resources {
                                if !allowed.contains(resource) {
                                    problems.push(format!(
                                        "{id}: may read secret {resource}, not its own \
                                         (allowed: {allowed:?})"
                                    ));
                                }
                            }
                        }
                        if action.contains('*') {
                            problems.push(format!("{id}: wildcard action {action}"));
                        }
                        if action == "lambda:InvokeFunction"
                            && resources.iter().any(|r| !r.contains("WorkerFunction"))
                        {
                            problems.push(format!(
                                "{id}: lambda:InvokeFunction on {resources:?}, not the worker only"
                            ));
                        }
                    }
                    actions.extend(granted);
                }
            }
            Value::Object(o) if o.len() == 1 => {
                let (name, arguments) = o.iter().next().unwrap();
                match template_actions(name) {
                    Some(granted) => {
                        if name == "LambdaInvokePolicy"
                            && !arguments["FunctionName"]
                                .to_string()
                                .contains("WorkerFunction")
                        {
                            problems.push(format!("{id}: {name} on {}", arguments["FunctionName"]));
                        }
                        actions.extend(granted.iter().map(|a| (*a).to_owned()));
                    }
                    None => problems.push(format!("{id}: unknown policy template {name}")),
                }
            }
            other => problems.push(format!("{id}: unreadable policy {other}")),
        }
    }
    (actions, problems)
}

/// The secrets function `id` (`ReceiverFunction`, ...) may read, as [`resource_texts`] spells
/// them: its own database login's (the generated secret or the parameter, both branches of the
/// template's `!If`) and the sources; the migrate function: the owner's and every login's, not
/// the sources; the console (no login of its own): the auditor's (read-only) or the replay
/// function's (re-drive), the sources and its CSRF key.
fn allowed_secrets(id: &str) -> BTreeSet<String> {
    let logins = ["Receiver", "Worker", "Sweeper", "Auditor", "Replay"];
    let own = |name: &str| {
        [
            format!("Ref:{name}DatabaseSecret"),
            format!("Ref:{name}DatabaseSecretArn"),
        ]
    };
    match id.strip_suffix("Function") {
        Some("Migrate") => std::iter::once("Ref:DatabaseAdminSecretArn".to_owned())
            .chain(logins.iter().flat_map(|name| own(name)))
            .collect(),
        Some("Console") => ["Auditor", "Replay"]
            .iter()
            .flat_map(|name| own(name))
            .chain(["Ref:SourcesSecretArn", "Ref:ConsoleCsrfSecret"].map(str::to_owned))
            .collect(),
        Some(name) => own(name)
            .into_iter()
            .chain(std::iter::once("Ref:SourcesSecretArn".to_owned()))
            .collect(),
        None => BTreeSet::new(),
    }
}

/// IAM resources besides the functions' own `Policies` that grant a function's role anything
/// (an `AWS::IAM::Policy` or `ManagedPolicy` naming `<Function>Role`, which SAM creates).
fn side_policies(template: &Value) -> Vec<String> {
    let roles: Vec<String> = functions(template)
        .into_iter()
        .map(|(id, _)| format!("{id}Role"))
        .collect();
    resources(template)
        .into_iter()
        .filter(|(_, r)| {
            matches!(
                r["Type"].as_str(),
                Some("AWS::IAM::Policy" | "AWS::IAM::ManagedPolicy" | "AWS::IAM::RolePolicy")
            )
        })
        .filter_map(|(id, r)| {
            let text = r["Properties"].to_string();
            roles
                .iter()
                .find(|role| text.contains(role.as_str()))
                .map(|role| format!("{id}: grants {role} outside the function's Policies"))
        })
        .collect()
}

/// Contract 5: each function's actions (besides the execution roles SAM attaches).
fn expected_actions() -> BTreeMap<&'static str, BTreeSet<String>> {
    let set = |actions: &[&str]| actions.iter().map(|a| (*a).to_owned()).collect();
    let secrets = "secretsmanager:GetSecretValue";
    BTreeMap::from([
        // kms: payload encryption (docs/operations/privacy.md): who seals, who opens.
        (
            "receiver",
            set(&[
                secrets,
                "lambda:InvokeFunction",
                "kms:GenerateDataKey",
                "kms:Decrypt",
            ]),
        ),
        (
            "worker",
            set(&[
                secrets,
                "sqs:SendMessage",
                "events:PutEvents",
                "kms:GenerateDataKey",
                "kms:Decrypt",
            ]),
        ),
        ("sweeper", set(&[secrets])),
        ("auditor", set(&[secrets])),
        ("replay", set(&[secrets, "kms:GenerateDataKey"])),
        ("migrate", set(&[secrets])),
        ("console", set(&[secrets, "kms:Decrypt"])),
    ])
}

fn iam_problems(template: &Value) -> Vec<String> {
    let expected = expected_actions();
    let mut problems = side_policies(template);
    let mut seen = BTreeSet::new();
    for (id, function) in functions(template) {
        let binary = function["Metadata"]["BuildProperties"]["Binary"]
            .as_str()
            .unwrap_or("");
        seen.insert(binary.to_owned());
        let (actions, mut found) = function_actions(id, function);
        problems.append(&mut found);
        match expected.get(binary) {
            None => problems.push(format!("{id}: no expected actions for binary {binary:?}")),
            Some(want) if *want != actions => problems.push(format!(
                "{id}: actions {actions:?}, expected exactly {want:?}"
            )),
            Some(_) => {}
        }
    }
    for binary in expected.keys() {
        if !seen.contains(*binary) {
            problems.push(format!("no function resource builds {binary}"));
        }
    }
    problems
}

#[test]
fn template_function_roles_have_exactly_the_expected_actions() {
    let problems = iam_problems(&template());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ---- (d) the console: behind the JWT authorizer, only under its condition ----

/// `Ref` target of `value`, if it is one.
fn ref_of(value: &Value) -> Option<&str> {
    value.get("Ref").and_then(Value::as_str)
}

#[test]
fn the_console_api_routes_all_carry_the_jwt_authorizer() {
    let template = template();
    let resources: BTreeMap<&str, &Value> = resources(&template).into_iter().collect();
    let authorizer = &resources["ConsoleApiAuthorizer"]["Properties"];
    assert_eq!(authorizer["AuthorizerType"], "JWT");
    assert_eq!(ref_of(&authorizer["ApiId"]), Some("ConsoleApi"));
    assert_eq!(
        authorizer["IdentitySource"],
        serde_json::json!(["$request.header.Authorization"])
    );
    let jwt = &authorizer["JwtConfiguration"];
    assert_eq!(ref_of(&jwt["Issuer"]), Some("ConsoleJwtIssuer"), "{jwt}");
    assert_eq!(
        ref_of(&jwt["Audience"]),
        Some("ConsoleJwtAudience"),
        "{jwt}"
    );

    // Every route of the console API (and there is one: $default, every path).
    let routes: Vec<(&str, &Value)> = resources
        .iter()
        .filter(|(_, r)| r["Type"] == "AWS::ApiGatewayV2::Route")
        .filter(|(_, r)| ref_of(&r["Properties"]["ApiId"]) == Some("ConsoleApi"))
        .map(|(id, r)| (*id, &r["Properties"]))
        .collect();
    assert!(
        routes.iter().any(|(_, r)| r["RouteKey"] == "$default"),
        "{routes:?}"
    );
    for (id, route) in &routes {
        assert_eq!(route["AuthorizationType"], "JWT", "{id}: {route}");
        assert_eq!(
            ref_of(&route["AuthorizerId"]),
            Some("ConsoleApiAuthorizer"),
            "{id}: {route}"
        );
    }
    // Nothing else routes to the console function: one integration, on the console API.
    let integrations: Vec<&str> = resources
        .iter()
        .filter(|(_, r)| r["Type"] == "AWS::ApiGatewayV2::Integration")
        .filter(|(_, r)| {
            r["Properties"]["IntegrationUri"]
                .to_string()
                .contains("ConsoleFunction")
        })
        .map(|(id, r)| {
            assert_eq!(
                ref_of(&r["Properties"]["ApiId"]),
                Some("ConsoleApi"),
                "{id}"
            );
            *id
        })
        .collect();
    assert_eq!(integrations, ["ConsoleApiIntegration"]);
    let invokers: Vec<&str> = resources
        .iter()
        .filter(|(_, r)| r["Type"] == "AWS::Lambda::Permission")
        .filter(|(_, r)| ref_of(&r["Properties"]["FunctionName"]) == Some("ConsoleFunction"))
        .map(|(id, r)| {
            let source = r["Properties"]["SourceArn"].to_string();
            assert!(source.contains("${ConsoleApi}/"), "{id}: {source}");
            *id
        })
        .collect();
    assert_eq!(invokers, ["ConsoleApiPermission"]);
    // No SAM event source that would make an implicit, unauthorized API.
    assert!(resources["ConsoleFunction"]["Properties"]["Events"].is_null());
}

/// A valid token of the issuer and audience is not enough (issue 24, item 3): deploying the
/// console needs an allow rule, which the template passes to the function (and the scopes to
/// the route).
#[test]
fn the_console_cannot_be_deployed_without_an_allow_rule() {
    let template = template();
    let lists = [
        (
            "ConsoleRequiredScopes",
            "HOOKLEDGER_CONSOLE_REQUIRED_SCOPES",
        ),
        (
            "ConsoleAllowedSubjects",
            "HOOKLEDGER_CONSOLE_ALLOWED_SUBJECTS",
        ),
        (
            "ConsoleAllowedEmailDomains",
            "HOOKLEDGER_CONSOLE_ALLOWED_EMAIL_DOMAINS",
        ),
        ("ConsoleAllowedGroups", "HOOKLEDGER_CONSOLE_ALLOWED_GROUPS"),
    ];
    let env = &template["Resources"]["ConsoleFunction"]["Properties"]["Environment"]["Variables"];
    let mut some_given = Vec::new();
    for (parameter, var) in lists {
        let declared = &template["Parameters"][parameter];
        assert_eq!(declared["Type"], "CommaDelimitedList", "{parameter}");
        // Nothing is allowed by default: the rule below makes the deployer choose.
        assert_eq!(declared["Default"], "", "{parameter}");
        assert_eq!(
            env[var],
            serde_json::json!({"Fn::Join": [",", {"Ref": parameter}]}),
            "{var}"
        );
        some_given.push(serde_json::json!(
            {"Fn::Not": [{"Fn::Equals": [{"Fn::Join": ["", {"Ref": parameter}]}, ""]}]}
        ));
    }
    let rule = &template["Rules"]["ConsoleNeedsAnAllowRule"];
    assert_eq!(
        rule["RuleCondition"],
        serde_json::json!({"Fn::Not": [{"Fn::Equals": [{"Ref": "ConsoleJwtIssuer"}, ""]}]})
    );
    let assertions = rule["Assertions"].as_array().unwrap();
    assert_eq!(assertions.len(), 1, "{rule}");
    assert_eq!(
        assertions[0]["Assert"],
        serde_json::json!({"Fn::Or": some_given}),
        "{rule}"
    );
    // The required scopes are API Gateway's to check as well, on the one route.
    let route = &template["Resources"]["ConsoleApiRoute"]["Properties"];
    assert_eq!(
        route["AuthorizationScopes"],
        serde_json::json!({"Fn::If": [
            "ConsoleNeedsScopes",
            {"Ref": "ConsoleRequiredScopes"},
            {"Ref": "AWS::NoValue"}
        ]})
    );
    let needs = template["Conditions"]["ConsoleNeedsScopes"].to_string();
    assert!(
        needs.contains("HasConsole") && needs.contains("ConsoleRequiredScopes"),
        "{needs}"
    );
}

#[test]
fn the_console_and_everything_of_it_exist_only_when_the_issuer_is_set() {
    let template = template();
    assert_eq!(
        template["Conditions"]["HasConsole"],
        serde_json::json!({"Fn::Not": [{"Fn::Equals": [{"Ref": "ConsoleJwtIssuer"}, ""]}]})
    );
    assert_eq!(template["Parameters"]["ConsoleJwtIssuer"]["Default"], "");
    let console: Vec<(&str, &Value)> = resources(&template)
        .into_iter()
        .filter(|(id, r)| {
            id.starts_with("Console")
                || ["ConsoleFunction", "ConsoleApi", "ConsoleCsrfSecret"]
                    .iter()
                    .any(|name| r["Properties"].to_string().contains(name))
        })
        .collect();
    let ids: BTreeSet<&str> = console.iter().map(|(id, _)| *id).collect();
    for want in [
        "ConsoleFunction",
        "ConsoleCsrfSecret",
        "ConsoleLogGroup",
        "ConsoleApi",
        "ConsoleApiAuthorizer",
        "ConsoleApiIntegration",
        "ConsoleApiRoute",
        "ConsoleApiStage",
        "ConsoleApiPermission",
    ] {
        assert!(ids.contains(want), "{want} missing: {ids:?}");
    }
    for (id, resource) in console {
        assert_eq!(resource["Condition"], "HasConsole", "{id}");
    }
    assert_eq!(template["Outputs"]["ConsoleUrl"]["Condition"], "HasConsole");
    // The CSRF key is generated by the stack (every execution environment reads the same).
    assert!(
        template["Resources"]["ConsoleCsrfSecret"]["Properties"]["GenerateSecretString"]
            ["PasswordLength"]
            .as_u64()
            .is_some_and(|n| n >= 32)
    );
}

#[test]
fn the_console_reads_its_login_the_sources_and_its_csrf_key_and_is_read_only_by_default() {
    let template = template();
    let function = &template["Resources"]["ConsoleFunction"];
    let (actions, problems) = function_actions("ConsoleFunction", function);
    assert!(problems.is_empty(), "{problems:#?}");
    assert_eq!(actions, expected_actions()["console"]);
    let statement = &function["Properties"]["Policies"][0]["Statement"][0];
    let read: BTreeSet<String> = resource_texts(&statement["Resource"]).into_iter().collect();
    assert_eq!(read, allowed_secrets("ConsoleFunction"));
    // The login it reads is the one it connects with: the auditor's unless re-drive is on.
    let env = &function["Properties"]["Environment"]["Variables"];
    let login = &env["HOOKLEDGER_DB_SECRET_ARN"]["Fn::If"];
    assert_eq!(login[0], "ConsoleMayRedrive");
    assert!(
        login[1].to_string().contains("ReplayDatabaseSecret"),
        "{login}"
    );
    assert!(
        login[2].to_string().contains("AuditorDatabaseSecret"),
        "{login}"
    );
    assert_eq!(&statement["Resource"][0]["Fn::If"], login);
    assert_eq!(
        template["Conditions"]["ConsoleMayRedrive"],
        serde_json::json!({"Fn::Equals": [{"Ref": "ConsoleRedrive"}, "true"]})
    );
    assert_eq!(template["Parameters"]["ConsoleRedrive"]["Default"], "false");
    assert_eq!(
        ref_of(&env["HOOKLEDGER_CONSOLE_REDRIVE"]),
        Some("ConsoleRedrive")
    );
    assert_eq!(
        ref_of(&env["HOOKLEDGER_CONSOLE_CSRF_SECRET_ARN"]),
        Some("ConsoleCsrfSecret")
    );
    // It may invoke nothing: no doorbell.
    assert!(env["HOOKLEDGER_WORKER_FUNCTION"].is_null());
}

/// Payload encryption (docs/operations/privacy.md): every KMS statement exists only with
/// `PayloadKmsKeyArn`, names that key only, and is limited by the encryption context's purpose;
/// who may open what is exactly: the worker payloads, the receiver stored responses (retries),
/// the console both and only when `ConsolePayloadAccess` allows it; replay opens nothing.
#[test]
fn kms_is_granted_on_the_payload_key_only_per_purpose_and_the_console_opens_only_if_allowed() {
    let template = template();
    // (function, action) -> (condition, purposes)
    let mut seen: BTreeMap<(String, String), (String, Vec<String>)> = BTreeMap::new();
    for (id, function) in functions(&template) {
        let policies = function["Properties"]["Policies"].as_array().cloned();
        for policy in policies.unwrap_or_default() {
            let statements = policy["Statement"].as_array().cloned();
            for statement in statements.unwrap_or_default() {
                let Some(branches) = statement["Fn::If"].as_array() else {
                    assert!(
                        !statement.to_string().contains("kms:"),
                        "{id}: an unconditional KMS statement"
                    );
                    continue;
                };
                let granted = &branches[1];
                if !granted.to_string().contains("kms:") {
                    continue;
                }
                assert_eq!(
                    ref_of(&granted["Resource"]),
                    Some("PayloadKmsKeyArn"),
                    "{id}"
                );
                let purpose =
                    &granted["Condition"]["StringEquals"]["kms:EncryptionContext:purpose"];
                let purposes: Vec<String> = match purpose {
                    Value::String(one) => vec![one.clone()],
                    other => other
                        .as_array()
                        .map(|all| {
                            all.iter()
                                .filter_map(|p| p.as_str().map(String::from))
                                .collect()
                        })
                        .unwrap_or_default(),
                };
                assert!(
                    !purposes.is_empty(),
                    "{id}: a KMS grant without its purpose"
                );
                for action in items(&granted["Action"]) {
                    seen.insert(
                        (id.to_owned(), action.as_str().unwrap_or("").to_owned()),
                        (
                            branches[0].as_str().unwrap_or("").to_owned(),
                            purposes.clone(),
                        ),
                    );
                }
            }
        }
    }
    let both = || {
        vec![
            "hookledger-payload".to_owned(),
            "hookledger-response".to_owned(),
        ]
    };
    let one = |p: &str| vec![p.to_owned()];
    let key = |f: &str, a: &str| (f.to_owned(), a.to_owned());
    let on_key = |purposes| ("HasPayloadKey".to_owned(), purposes);
    assert_eq!(
        seen,
        BTreeMap::from([
            (
                key("ConsoleFunction", "kms:Decrypt"),
                ("ConsoleMayOpenPayloads".to_owned(), both())
            ),
            (
                key("ReceiverFunction", "kms:Decrypt"),
                on_key(one("hookledger-response"))
            ),
            (
                key("ReceiverFunction", "kms:GenerateDataKey"),
                on_key(both())
            ),
            (key("ReplayFunction", "kms:GenerateDataKey"), on_key(both())),
            (
                key("WorkerFunction", "kms:Decrypt"),
                on_key(one("hookledger-payload"))
            ),
            (key("WorkerFunction", "kms:GenerateDataKey"), on_key(both())),
        ])
    );
    assert_eq!(
        template["Parameters"]["ConsolePayloadAccess"]["Default"],
        "false"
    );
    let globals = &template["Globals"]["Function"]["Environment"]["Variables"];
    assert_eq!(
        globals["HOOKLEDGER_KMS_KEY_ID"]["Fn::If"][0],
        "HasPayloadKey"
    );
}

/// Issue 29: the functions trust the compiled-in RDS CAs alone by default, and an RDS Proxy's
/// certificate chains to an Amazon Root CA among the system roots, so behind the proxy every
/// function that goes through it trusts the system roots by name
/// (`HOOKLEDGER_DB_CA_FILE=system`) and migrate, which connects to the database directly, keeps
/// the RDS CAs; a CA file the operator gives wins either way.
#[test]
fn behind_an_rds_proxy_the_proxied_functions_trust_the_system_roots_and_migrate_the_rds_cas() {
    let template = template();
    let globals = &template["Globals"]["Function"]["Environment"]["Variables"];
    assert_eq!(
        globals["HOOKLEDGER_DB_CA_FILE"],
        serde_json::json!({"Fn::If": ["HasCaFile", {"Ref": "DatabaseCaFile"},
            {"Fn::If": ["UseProxy", shared::db::SYSTEM_ROOTS, {"Ref": "AWS::NoValue"}]}]})
    );
    assert_eq!(
        template["Conditions"]["UseProxy"],
        serde_json::json!({"Fn::Equals": [{"Ref": "UseRdsProxy"}, "true"]})
    );
    assert_eq!(
        template["Conditions"]["HasCaFile"],
        serde_json::json!({"Fn::Not": [{"Fn::Equals": [{"Ref": "DatabaseCaFile"}, ""]}]})
    );
    let functions = template["Resources"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, r)| r["Type"] == "AWS::Serverless::Function")
        .count();
    assert!(functions >= 7, "{functions} functions");
    // Migrate connects to the database, never through the proxy: the RDS CAs (or the
    // operator's file) whatever UseRdsProxy says. No other function sets its own.
    for (name, resource) in template["Resources"].as_object().unwrap() {
        let variables = &resource["Properties"]["Environment"]["Variables"];
        let own = &variables["HOOKLEDGER_DB_CA_FILE"];
        if name == "MigrateFunction" {
            assert_eq!(
                own,
                &serde_json::json!({"Fn::If": ["HasCaFile", {"Ref": "DatabaseCaFile"},
                    {"Ref": "AWS::NoValue"}]}),
                "{name}"
            );
            assert_eq!(
                variables["HOOKLEDGER_DB_HOST"],
                serde_json::json!({"Ref": "DatabaseHost"})
            );
        } else {
            assert!(
                own.is_null(),
                "{name} sets its own HOOKLEDGER_DB_CA_FILE: {own}"
            );
        }
    }
}

// ---- The checks catch what they are for ----

const FIXTURE: &str = r#"
Conditions:
  HasQueues: !Equals [a, b]
Resources:
  ReceiverFunction:
    Type: AWS::Serverless::Function
    Metadata: { BuildMethod: rust-cargolambda, BuildProperties: { Binary: receiver } }
    Properties:
      CodeUri: handlers
      Policies:
        - Statement:
            - Effect: Allow
              Action: secretsmanager:GetSecretValue
              Resource: [!Ref SourcesSecretArn, !If [HasQueues, !Ref ReceiverDatabaseSecret, !Ref ReceiverDatabaseSecretArn]]
            - !If
              - HasQueues
              - Effect: Allow
                Action: lambda:InvokeFunction
                Resource: !GetAtt WorkerFunction.Arn
              - !Ref AWS::NoValue
            - Effect: Allow
              Action: [kms:GenerateDataKey, kms:Decrypt]
              Resource: !Ref Key
  WorkerFunction:
    Type: AWS::Serverless::Function
    Metadata: { BuildMethod: rust-cargolambda, BuildProperties: { Binary: worker } }
    Properties:
      CodeUri: handlers
      Policies:
        - !If
          - HasQueues
          - SQSSendMessagePolicy: { QueueName: q }
          - !Ref AWS::NoValue
        - Statement:
            - Effect: Allow
              Action: [secretsmanager:GetSecretValue]
              Resource: !Sub "arn:aws:secretsmanager:${AWS::Region}:1:secret:*"
            - Effect: Allow
              Action: events:PutEvents
              Resource: !Ref Buses
  Api:
    Type: AWS::ApiGatewayV2::Api
    Properties: { Name: x, ProtocolType: HTTP }
  Rest:
    Type: AWS::ApiGateway::RestApi
    Properties: { Name: x }
  Good:
    Type: AWS::CloudWatch::Alarm
    Properties:
      Metrics:
        - Id: q
          Expression: "SELECT MAX(stuck_claims) FROM SCHEMA(hookledger, source)"
          Period: 300
  Bad:
    Type: AWS::CloudWatch::Alarm
    Properties:
      Namespace: hookledger
      MetricName: stuck_claim
      Dimensions: [{ Name: source, Value: "*" }]
  WrongSchema:
    Type: AWS::CloudWatch::Alarm
    Properties:
      Metrics:
        - Id: q
          Expression: !Sub "SELECT SUM(deliveries) FROM SCHEMA(\"hookledger\", source) -- ${AWS::Region}"
  Lambda:
    Type: AWS::CloudWatch::Alarm
    Properties: { Namespace: AWS/Lambda, MetricName: Errors }
  Dashboard:
    Type: AWS::CloudWatch::Dashboard
    Properties:
      DashboardBody: !Sub |
        {"widgets": [{"properties": {"title": "t", "region": "${AWS::Region}", "metrics": [
          ["hookledger", "swept", "source", "stripe"],
          [".", "sweept", ".", "."],
          ["hookledger", "swept", "source", "stripe"],
          [".", ".", ".", "github"],
          ["AWS/Lambda", "Errors", "FunctionName", "${ReceiverFunction}"],
          [{"expression": "SELECT SUM(delivery_latency) FROM SCHEMA(hookledger, outcome, source) GROUP BY source", "id": "a"}]
        ]}}]}
"#;

#[test]
fn the_template_checks_report_what_they_are_for() {
    let template = template_from(FIXTURE);

    // (a): crates without a resource, resources without a crate.
    let crates: BTreeSet<String> = ["receiver", "worker", "migrate"].map(String::from).into();
    assert_eq!(
        function_problems(&template, &crates),
        ["functions/migrate has no AWS::Serverless::Function"]
    );
    let crates: BTreeSet<String> = ["receiver"].map(String::from).into();
    assert_eq!(
        function_problems(&template, &crates),
        ["WorkerFunction: BuildProperties.Binary \"worker\" is no function crate"]
    );

    // (b): an unregistered name in an alarm and in a dashboard array ("." repeats the
    // namespace), a registered one under the wrong SCHEMA; AWS namespaces are not ours.
    let problems = metric_problems(&named_metrics(&template));
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(
        problems[0].starts_with("Bad: \"stuck_claim\" is not"),
        "{problems:#?}"
    );
    assert!(problems[1].contains("\"sweept\" is not"), "{problems:#?}");
    assert!(
        problems[2].starts_with("WrongSchema: deliveries with dimensions {\"source\"}"),
        "{problems:#?}"
    );

    // (c): actions through !If (a conditional statement, a conditional policy template), a
    // wildcard secret, missing functions; both !If branches count.
    let problems = iam_problems(&template);
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("WorkerFunction: actions") && p.contains("\"sqs:SendMessage*\"")),
        "{problems:#?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("WorkerFunction: secretsmanager:GetSecretValue on arn:aws:secretsmanager:${AWS::Region}:1:secret:*")),
        "{problems:#?}"
    );
    for missing in ["sweeper", "auditor", "replay", "migrate"] {
        assert!(
            problems.contains(&format!("no function resource builds {missing}")),
            "{problems:#?}"
        );
    }
    assert!(
        !problems.iter().any(|p| p.starts_with("ReceiverFunction")),
        "the receiver's conditional invoke of the worker is what it should have: {problems:#?}"
    );
}
