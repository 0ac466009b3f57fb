//! `mcp`: a Model Context Protocol server over stdio (the official SDK, `rmcp`), so coding
//! agents and assistants can ask whether a model is healthy and get measured answers. Its tools:
//! `list_targets`, `status` (a fresh run of the configured pairs, or a daemon's
//! `/api/v1/status`), `probe` (one configured pair now: never an arbitrary URL) and `report`
//! (the results log's summary). Results carry the record's field names; secrets never appear
//! (targets are listed without their URL, headers or key).

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, JsonObject,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Value};

use crate::cli::McpArgs;
use crate::config::Config;

pub(super) async fn mcp(cfg: Config, args: &McpArgs) -> anyhow::Result<ExitCode> {
    let from = match &args.from {
        Some(u) => Some(
            reqwest::Url::parse(u)
                .and_then(|base| base.join("/api/v1/status"))
                .with_context(|| format!("--from {u:?} is not a URL like http://agent:9464"))?,
        ),
        None => None,
    };
    let server = Canary {
        cfg: Arc::new(cfg),
        from,
        http: crate::sinks::outbound::default_client(),
    };
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .context("the MCP session did not start")?;
    running
        .waiting()
        .await
        .context("the MCP session ended abnormally")?;
    Ok(ExitCode::SUCCESS)
}

struct Canary {
    cfg: Arc<Config>,
    /// A daemon's `/api/v1/status`, for `status`.
    from: Option<reqwest::Url>,
    http: reqwest::Client,
}

fn schema(v: Value) -> Arc<JsonObject> {
    match v {
        Value::Object(o) => Arc::new(o),
        _ => Arc::new(JsonObject::new()),
    }
}

fn tools() -> Vec<Tool> {
    let none = || schema(json!({"type": "object", "properties": {}}));
    vec![
        Tool::new(
            "list_targets",
            "The configured targets (name, model, API flavor, server kind, labels) and the probes that run against each.",
            none(),
        ),
        Tool::new(
            "status",
            "Is each configured (probe, target) pair healthy now? A fresh run of every pair (one result record each), or the running daemon's /api/v1/status when the server was started with --from.",
            none(),
        ),
        Tool::new(
            "probe",
            "Run one configured (probe, target) pair now and return its result record: TTFT, decode speed, outcome, failed checks.",
            schema(json!({
                "type": "object",
                "properties": {
                    "probe": {"type": "string", "description": "a configured probe's name"},
                    "target": {"type": "string", "description": "a configured target's name"}
                },
                "required": ["probe", "target"]
            })),
        ),
        Tool::new(
            "report",
            "The results log summarised per (probe, target): runs, success rate, outcome counts, TTFT p50/p95/p99, decode p50, e2e p95 and incidents.",
            schema(json!({
                "type": "object",
                "properties": {
                    "since": {"type": "string", "description": "only runs that started this long ago or later, e.g. 24h or 7d"}
                }
            })),
        ),
    ]
}

fn arg<'a>(args: &'a Option<JsonObject>, name: &str) -> Option<&'a str> {
    args.as_ref()?.get(name)?.as_str()
}

/// A tool's failure: one sentence, as the command line would print it.
fn failed(e: anyhow::Error) -> CallToolResult {
    CallToolResult::structured_error(json!({ "error": format!("{e:#}") }))
}

impl Canary {
    fn list_targets(&self) -> Value {
        let targets: Vec<Value> = self
            .cfg
            .targets
            .iter()
            .map(|t| {
                let probes: Vec<&str> = self
                    .cfg
                    .probes
                    .iter()
                    .filter(|p| p.targets.iter().any(|n| *n == t.name))
                    .map(|p| p.name.as_str())
                    .collect();
                json!({
                    "target": t.name,
                    "model": t.model,
                    "api": t.api.as_str(),
                    "server": t.server.as_str(),
                    "labels": t.labels,
                    "probes": probes,
                })
            })
            .collect();
        json!({ "targets": targets })
    }

    async fn run(&self, probes: &[String], targets: &[String]) -> anyhow::Result<Vec<Value>> {
        let pairs = super::once::select_pairs(&self.cfg, probes, targets)?;
        let runner = Arc::new(super::once::runner(&self.cfg, self.cfg.agent.concurrency));
        let results = runner.run_all(pairs).await;
        results
            .iter()
            .map(|r| serde_json::from_str(&r.to_json_line()).context("a result record"))
            .collect()
    }

    async fn status(&self) -> anyhow::Result<Value> {
        match &self.from {
            Some(url) => {
                let resp = self
                    .http
                    .get(url.clone())
                    .send()
                    .await
                    .and_then(|r| r.error_for_status())
                    .with_context(|| format!("cannot read {url}"))?;
                let body = resp
                    .bytes()
                    .await
                    .with_context(|| format!("cannot read {url}"))?;
                serde_json::from_slice(&body).with_context(|| format!("{url} did not answer JSON"))
            }
            None => Ok(json!({ "results": self.run(&[], &[]).await? })),
        }
    }

    async fn probe(&self, args: &Option<JsonObject>) -> anyhow::Result<Value> {
        let (Some(probe), Some(target)) = (arg(args, "probe"), arg(args, "target")) else {
            anyhow::bail!("probe needs the arguments `probe` and `target` (configured names)");
        };
        let mut results = self.run(&[probe.into()], &[target.into()]).await?;
        match results.pop() {
            Some(r) if results.is_empty() => Ok(json!({ "result": r })),
            _ => anyhow::bail!("probe {probe:?} does not run against target {target:?}"),
        }
    }

    fn report(&self, args: &Option<JsonObject>) -> anyhow::Result<Value> {
        let log = self.cfg.agent.results_log.as_ref().with_context(|| {
            format!(
                "{} has no agent.results_log to report on",
                self.cfg.path.display()
            )
        })?;
        let since = match arg(args, "since") {
            Some(s) => {
                let d = crate::config::duration::parse_duration(s).map_err(anyhow::Error::msg)?;
                Some(jiff::Timestamp::now().checked_sub(jiff::SignedDuration::try_from(d)?)?)
            }
            None => None,
        };
        let summary = crate::summary::summarise(&log.path, since)
            .with_context(|| format!("cannot read the results log {}", log.path.display()))?;
        Ok(serde_json::to_value(summary)?)
    }
}

impl ServerHandler for Canary {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("llm-canary", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Measured health of LLM inference endpoints: list_targets, then status, probe or report.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = &request.arguments;
        let out = match request.name.as_ref() {
            "list_targets" => Ok(self.list_targets()),
            "status" => self.status().await,
            "probe" => self.probe(args).await,
            "report" => self.report(args),
            other => {
                return Err(ErrorData::invalid_params(
                    format!("no tool {other:?}: try list_targets, status, probe or report"),
                    None,
                ))
            }
        };
        Ok(match out {
            Ok(v) => CallToolResult::structured(v),
            Err(e) => failed(e),
        }
        .into())
    }
}
