//! What each subcommand does, assembled from the library's pieces. Each returns the process
//! exit code; errors bubble up as `anyhow` with context and exit 2.

mod check;
pub mod demo;
pub mod once;

use std::process::ExitCode;

use anyhow::bail;

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
            crate::daemon::run(config, crate::daemon::terminate_signal()).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Gate { .. } => bail!("`gate` is not built yet in this version"),
    }
}
