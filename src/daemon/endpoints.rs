//! The agent's own HTTP endpoints on `agent.listen`: `/metrics` (the registry, to scrape beside
//! or instead of pushing), `/healthz` (liveness and the last push's status) and
//! `POST /-/reload`.

use std::sync::Arc;

use serde_json::json;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

use super::{Agent, ReloadReply};
use crate::httpd;

pub async fn serve(listener: TcpListener, agent: Arc<Agent>, reload: mpsc::Sender<ReloadReply>) {
    loop {
        let Ok((sock, _)) = listener.accept().await else {
            continue;
        };
        let (agent, reload) = (agent.clone(), reload.clone());
        tokio::spawn(async move {
            let _ = connection(sock, agent, reload).await;
        });
    }
}

async fn connection(
    mut sock: TcpStream,
    agent: Arc<Agent>,
    reload: mpsc::Sender<ReloadReply>,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    while let Some(req) = httpd::read_request(&mut sock, &mut buf).await? {
        let path = req.path.split('?').next().unwrap_or_default();
        match (req.method.as_str(), path) {
            ("GET", "/metrics") => {
                let body = agent.metrics().encode();
                httpd::respond(
                    &mut sock,
                    200,
                    "text/plain; version=0.0.4; charset=utf-8",
                    &[],
                    &body,
                )
                .await?;
            }
            ("GET", "/healthz") => {
                let status = agent.push_status();
                let body = json!({
                    "status": "ok",
                    "agent": agent.cfg().agent.name,
                    "runs_in_flight": agent.in_flight.lock().expect("in-flight lock").len(),
                    "push": if agent.cfg().push.is_some() { serde_json::to_value(&status).unwrap_or_default() } else { json!(null) },
                });
                httpd::respond(
                    &mut sock,
                    200,
                    "application/json",
                    &[],
                    body.to_string().as_bytes(),
                )
                .await?;
            }
            ("POST", "/-/reload") => {
                let (tx, rx) = oneshot::channel();
                let outcome = match reload.send(tx).await {
                    Ok(()) => rx
                        .await
                        .unwrap_or_else(|_| Err("the agent is shutting down".into())),
                    Err(_) => Err("the agent is shutting down".into()),
                };
                match outcome {
                    Ok(()) => {
                        httpd::respond(&mut sock, 200, "text/plain", &[], b"config reloaded\n")
                            .await?
                    }
                    Err(e) => {
                        httpd::respond(
                            &mut sock,
                            400,
                            "text/plain",
                            &[],
                            format!("config reload refused: {e}\n").as_bytes(),
                        )
                        .await?
                    }
                }
            }
            _ => {
                httpd::respond(
                    &mut sock,
                    404,
                    "text/plain",
                    &[],
                    b"not found: try /metrics, /healthz, POST /-/reload\n",
                )
                .await?
            }
        }
    }
    Ok(())
}
