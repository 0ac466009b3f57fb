use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = llm_canary::cli::Cli::parse();
    llm_canary::init_tracing(&cli.log_level);
    match llm_canary::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
