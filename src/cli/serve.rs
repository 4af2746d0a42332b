//! `weir serve`: runs the broker with the options of the TOML file (if any) under
//! those of the command line.

use std::path::PathBuf;

use anyhow::Context;
use clap::ArgMatches;
use weir::config::{BrokerConfig, LogFormat, ServeOptions};

/// `weir serve`.
#[derive(clap::Args)]
pub struct Serve {
    /// TOML file with settings.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    // Read again from the matches, under the file's: see `run`.
    #[command(flatten)]
    _options: ServeOptions,
}

impl Serve {
    /// Runs the broker until SIGINT or SIGTERM. `matches` are the subcommand's own, to
    /// tell the flags given from those left unset.
    pub fn run(self, matches: Option<&ArgMatches>) -> anyhow::Result<()> {
        let matches = matches.context("the command line has no serve arguments")?;
        let options = ServeOptions::layered(self.config.as_deref(), matches)?;
        let config = BrokerConfig::default().apply(options)?;
        let logs = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(&config.log_level));
        match config.log_format {
            LogFormat::Json => logs.json().init(),
            // Colour codes only where a terminal will render them, not in files.
            LogFormat::Text => logs
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
                .init(),
        }
        tracing::debug!(?config, "configuration");
        let stop = weir::shard::signals::stop_on_signals().context("installing signal handling")?;
        weir::broker::run(config, stop).context("broker stopped")?;
        tracing::info!("stopped cleanly");
        Ok(())
    }
}
