//! What each subcommand does, assembled from the library's pieces. Each returns the process
//! exit code; errors bubble up as `anyhow` with context and exit 2.

mod check;
pub mod demo;
mod gate;
pub mod once;

use std::process::ExitCode;

use crate::cli::Command;

pub use once::{select_pairs, OnceOptions};

pub async fn dispatch(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Once {
            config,
            probes,
            targets,
            format,
            push,
            show_output,
            concurrency,
        } => {
            let cfg = crate::config::load(&config)?;
            let opts = OnceOptions {
                probes,
                targets,
                format,
                show_output,
                concurrency,
                push,
            };
            let mut out = std::io::stdout().lock();
            once::once(&cfg, &opts, &mut out).await
        }
        Command::Check { config } => {
            let cfg = crate::config::load(&config)?;
            let mut out = std::io::stdout().lock();
            std::io::Write::write_all(
                &mut out,
                check::describe(&cfg, &jiff::Timestamp::now()).as_bytes(),
            )?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Sim { listen } => crate::sim::serve_forever(&listen).await,
        Command::Demo => demo::demo().await,
        Command::Run { config } => {
            crate::daemon::run(config, crate::util::terminate_signal()).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Gate {
            config,
            target,
            baseline_target,
            baseline,
            samples,
            warmup,
            probes,
            concurrency,
            wait_ready,
            junit,
            summary,
            format,
        } => {
            let wait_ready = wait_ready
                .map(|w| {
                    crate::config::duration::parse_duration(&w)
                        .map_err(|e| anyhow::anyhow!("--wait-ready: {e}"))
                })
                .transpose()?;
            let cfg = crate::config::load(&config)?;
            let opts = crate::gate::GateOptions {
                target,
                baseline_target,
                baseline_file: baseline,
                samples,
                warmup,
                probes,
                concurrency,
                wait_ready,
            };
            let outs = gate::Outputs {
                format,
                junit,
                summary,
            };
            let mut out = std::io::stdout().lock();
            gate::gate(&cfg, &opts, &outs, &mut out).await
        }
    }
}
