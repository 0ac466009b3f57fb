use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = llm_canary::cli::Cli::parse();
    // The live view owns the terminal: a log line on stderr would tear it.
    if !matches!(cli.command, llm_canary::cli::Command::Watch(_)) {
        llm_canary::init_tracing(cli.log_level());
    }
    match llm_canary::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
