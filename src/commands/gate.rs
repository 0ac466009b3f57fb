//! `gate`: run the gate, print the table or the JSON, write the JUnit and Markdown files, and
//! exit 0 pass, 1 fail, 2 error.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;

use crate::cli::{Format, GateArgs};
use crate::config::Config;
use crate::gate::{self, report, GateError};

pub async fn gate(cfg: &Config, outs: &GateArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let r = match gate::run(cfg, outs).await {
        Ok(r) => r,
        Err(GateError::Setup(e)) => return Err(e),
        Err(GateError::NotReady(nr)) => {
            let msg = nr.to_string();
            eprintln!("gate FAILED: {msg}");
            if let Some(p) = &outs.junit {
                std::fs::write(p, report::junit_not_ready(&msg))
                    .with_context(|| format!("cannot write {}", p.display()))?;
            }
            if let Some(p) = &outs.summary {
                std::fs::write(p, format!("## ❌ llm-canary gate\n\n{msg}\n"))
                    .with_context(|| format!("cannot write {}", p.display()))?;
            }
            return Ok(ExitCode::from(1));
        }
    };
    match outs.format {
        Format::Table => write!(out, "{}", report::table(&r))?,
        Format::Json => writeln!(out, "{}", serde_json::to_string_pretty(&r)?)?,
    }
    out.flush()?;
    if let Some(p) = &outs.junit {
        std::fs::write(p, report::junit(&r))
            .with_context(|| format!("cannot write {}", p.display()))?;
    }
    if let Some(p) = &outs.summary {
        std::fs::write(p, report::markdown(&r))
            .with_context(|| format!("cannot write {}", p.display()))?;
    }
    Ok(if r.pass {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
