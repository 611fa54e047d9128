//! The `evac` binary: logging set up, then its command line ([`evac::cli`]).

#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use std::process::ExitCode;

use clap::Parser;
use evac::cli::Cli;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // Colours only for a terminal: logs that go to files and collectors stay plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("EVAC_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .init();
    match Cli::parse().run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // One line: the error and its causes, with no backtrace.
            let line = format!("{error:#}").replace('\n', " ");
            eprintln!("error: {line}");
            ExitCode::FAILURE
        }
    }
}
