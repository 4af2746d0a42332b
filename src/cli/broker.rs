//! Which running broker an admin command talks to, and how it logs in.

use anyhow::Context;
use weir::admin::commands::{Admin, AdminError};
use weir_client::sasl::{SaslLogin, SaslMechanism};

/// Which running broker the admin commands talk to.
#[derive(clap::Args)]
pub struct BrokerAddress {
    /// Brokers of the cluster, comma-separated; the first that answers is used.
    #[arg(
        long,
        default_value = "127.0.0.1:9092",
        value_name = "HOST:PORT[,HOST:PORT...]",
        global = true
    )]
    bootstrap: String,
    /// Log in as this user (where the broker requires SASL).
    #[arg(long, value_name = "NAME:PASSWORD", global = true)]
    sasl_user: Option<String>,
    /// The SASL mechanism to log in with.
    #[arg(
        long,
        value_name = "MECHANISM",
        default_value = "SCRAM-SHA-512",
        global = true
    )]
    sasl_mechanism: String,
}

impl BrokerAddress {
    /// The SASL login the flags ask for, if any.
    fn login(&self) -> anyhow::Result<Option<SaslLogin>> {
        let Some(text) = &self.sasl_user else {
            return Ok(None);
        };
        let mechanism = SaslMechanism::from_name(&self.sasl_mechanism).with_context(|| {
            format!(
                "--sasl-mechanism {:?}: not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
                self.sasl_mechanism
            )
        })?;
        let login =
            SaslLogin::parse(mechanism, text).map_err(|e| anyhow::anyhow!("--sasl-user: {e}"))?;
        Ok(Some(login))
    }

    /// Connects (and logs in), runs `run` and prints what it answers.
    pub fn admin(
        &self,
        run: impl FnOnce(&mut Admin) -> Result<String, AdminError>,
    ) -> anyhow::Result<()> {
        let bootstrap = &self.bootstrap;
        let login = self.login()?;
        let hint = match login {
            None => " (if it requires SASL, log in with --sasl-user NAME:PASSWORD)",
            Some(_) => "",
        };
        let mut session = Admin::connect(bootstrap, login)
            .with_context(|| format!("connecting to {bootstrap}{hint}"))?;
        print!("{}", run(&mut session)?);
        Ok(())
    }
}
