//! What each subcommand does, assembled from the library's pieces. Each returns the process
//! exit code; errors bubble up as `anyhow` with context and exit 2.

mod cadence;
mod calibrate;
mod check;
mod cost;
pub(crate) mod demo;
mod gate;
mod judge;
mod mcp;
pub(crate) mod once;
mod p0_clock;
mod record;
mod report;
mod watch;

use std::process::ExitCode;

use crate::cli::Command;

pub(crate) async fn dispatch(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Once(args) => {
            let cfg = crate::config::load(&args.config)?;
            let mut out = std::io::stdout().lock();
            once::once(&cfg, &args, &mut out).await
        }
        Command::Check(args) => {
            let cfg = crate::config::load(&args.config)?;
            let web = match args.web_config_file.or(cfg.agent.web_config_file.clone()) {
                Some(path) => Some(check::web(&path, &crate::web_config::load(&path)?)),
                None => None,
            };
            let mut out = std::io::stdout().lock();
            let mut text = check::describe(&cfg, &jiff::Timestamp::now());
            text.push_str(web.as_deref().unwrap_or_default());
            std::io::Write::write_all(&mut out, text.as_bytes())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Sim(args) => {
            let tls = args
                .tls_cert
                .as_deref()
                .zip(args.tls_key.as_deref())
                .map(|(cert, key)| crate::sim::TlsFiles {
                    cert,
                    key,
                    client_ca: args.client_ca.as_deref(),
                });
            crate::sim::serve_forever(&args.listen, tls).await
        }
        Command::Demo => demo::demo().await,
        Command::Run(args) => {
            crate::daemon::run(
                args.config,
                args.web_config_file,
                crate::util::terminate_signal(),
            )
            .await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Calibrate(args) => {
            let cfg = crate::config::load(&args.config)?;
            let mut out = std::io::stdout().lock();
            calibrate::calibrate(&cfg, &args, &mut out).await
        }
        Command::Rules(args) => {
            let cfg = crate::config::load(&args.config)?;
            let Some(rules) = crate::slo_rules::generate(&cfg) else {
                anyhow::bail!(
                    "{}: no target or probe has an slo: nothing to generate",
                    args.config.display()
                );
            };
            match &args.output {
                Some(f) => std::fs::write(f, rules)
                    .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", f.display()))?,
                None => std::io::Write::write_all(&mut std::io::stdout().lock(), rules.as_bytes())?,
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Gate(args) => {
            let cfg = crate::config::load(&args.config)?;
            let mut out = std::io::stdout().lock();
            gate::gate(&cfg, &args, &mut out).await
        }
        Command::Judge(args) => {
            let cfg = crate::config::load(&args.config)?;
            let mut out = std::io::stdout().lock();
            judge::judge(&cfg, &args, &mut out)
        }
        Command::Mcp(args) => {
            let cfg = crate::config::load(&args.config)?;
            mcp::mcp(cfg, &args).await
        }
        Command::Watch(args) => watch::watch(&args).await,
        Command::StatusPage(args) => {
            let connection = crate::fleet::StoreConnection {
                ca_file: args.prometheus_ca_file.clone(),
                cert_file: args.prometheus_cert_file.clone(),
                key_file: args.prometheus_key_file.clone(),
                server_name: args.prometheus_server_name.clone(),
                insecure_skip_verify: args.prometheus_insecure_skip_verify,
                proxy_url: args.prometheus_proxy_url.clone(),
            };
            if connection.insecure_skip_verify {
                tracing::warn!("--prometheus-insecure-skip-verify: the store's certificate is not verified, so anyone on the path can read and change its answers");
            }
            crate::fleet::serve(
                &args.prometheus,
                connection,
                &args.listen,
                args.query_timeout,
                args.web_config_file.as_deref(),
                crate::util::terminate_signal(),
            )
            .await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Record(args) => {
            let cfg = crate::config::load_unrecorded(&args.config)?;
            let mut out = std::io::stdout().lock();
            record::record(&cfg, &args, &mut out).await
        }
        Command::Report(args) => {
            let mut out = std::io::stdout().lock();
            report::report(&args, &mut out)
        }
    }
}
