//! [`Desktop`]'s settings commands (`settings_*`).

use outpost_policy::FolderRule;
use outpost_store::now_ms;

use super::{ConnectionConfig, NotificationConfig};
use crate::contract::{AboutInfo, ConnectionSettings, FolderScope, NotificationSettings, Settings};
use crate::error::{DesktopError, Result};
use crate::secrets::check_name;

use crate::desktop::Desktop;
use outpost_sync::lock;

impl Desktop {
    /// `settings_get`.
    pub fn settings(&self) -> Settings {
        let c = self.config();
        let policy = self.inner.core.permissions().policy().current();
        let p = policy.policy();
        let has_token = matches!(self.token(), Ok(Some(_)));
        let has_api_secret = matches!(self.api_secret(), Ok(Some(_)));
        Settings {
            connection: ConnectionSettings {
                auth_mode: c.connection.auth_mode,
                livekit_url: c.connection.livekit_url,
                token_endpoint: c.connection.token_endpoint,
                room: c.connection.room,
                identity: c.connection.identity,
                agent_name: c.connection.agent_name,
                api_key: c.connection.api_key,
                has_token,
                has_api_secret,
            },
            consent_timeout_secs: p.consent_timeout_secs,
            folders: p
                .folders
                .iter()
                .map(|f| FolderScope {
                    path: f.path.clone(),
                    access: f.access,
                    tools: f.tools.clone(),
                })
                .collect(),
            notifications: NotificationSettings {
                enabled: c.notifications.enabled,
                on_consent: c.notifications.on_consent,
                on_long_task: c.notifications.on_long_task,
                long_task_secs: c.notifications.long_task_secs,
            },
            retention_days: c.retention_days,
            policy_unconfirmed: self
                .inner
                .core
                .permissions()
                .policy()
                .status()
                .borrow()
                .unconfirmed
                .clone(),
        }
    }

    /// `settings_trust_policy`: the user confirms the policy file as it is on disk (a
    /// change made outside Outpost that allows more); it is in force at once.
    pub fn trust_policy(&self) -> Result<Settings> {
        self.inner.core.permissions().policy().confirm()?;
        Ok(self.settings())
    }

    /// `settings_set`: validates everything first, then writes the policy and the
    /// settings file.
    pub async fn set_settings(&self, s: Settings) -> Result<Settings> {
        let connection = connection_config(&s.connection)?;
        if s.consent_timeout_secs == 0 || s.consent_timeout_secs > 86_400 {
            return Err(DesktopError::invalid(
                "consentTimeoutSecs",
                format!(
                    "must be between 1 and 86400 seconds, got {}",
                    s.consent_timeout_secs
                ),
            ));
        }
        if s.notifications.long_task_secs == 0 {
            return Err(DesktopError::invalid(
                "notifications.longTaskSecs",
                "must be at least 1 second",
            ));
        }
        let mut folders = Vec::with_capacity(s.folders.len());
        for f in &s.folders {
            let path = f.path.trim();
            folders.push(FolderRule {
                path: path.to_owned(),
                access: f.access,
                tools: f.tools.clone(),
            });
        }
        // The policy's own check names a bad folder (`folders[i].path`); reported as a
        // refused argument, not as a failed save.
        let policy = self.inner.core.permissions().policy();
        let mut candidate = policy.current().policy().clone();
        candidate.consent_timeout_secs = s.consent_timeout_secs;
        candidate.folders.clone_from(&folders);
        candidate
            .check()
            .map_err(|reason| DesktopError::invalid("settings", reason))?;
        // Edit inside the policy's lock: an "always" answer written meanwhile is kept.
        policy.update(|p| {
            p.consent_timeout_secs = s.consent_timeout_secs;
            p.folders = folders;
        })?;
        let retention = s.retention_days;
        {
            let mut c = lock(&self.inner.config);
            let had = c.connection.clone();
            c.connection = connection;
            if c.connection != had
                && (!c.connection.livekit_url.is_empty() || !c.connection.token_endpoint.is_empty())
            {
                c.configured = true;
                c.demo = false;
            }
            c.notifications = NotificationConfig {
                enabled: s.notifications.enabled,
                on_consent: s.notifications.on_consent,
                on_long_task: s.notifications.on_long_task,
                long_task_secs: s.notifications.long_task_secs,
            };
            c.retention_days = retention;
            c.save(&self.inner.paths.settings_file())?;
        }
        let store = self.inner.core.store();
        store
            .set_retention_days((retention > 0).then_some(retention))
            .await?;
        if retention > 0 {
            store.apply_retention(now_ms()).await?;
        }
        Ok(self.settings())
    }

    /// `settings_set_secret`.
    pub fn set_secret(&self, name: &str, value: &str) -> Result<()> {
        check_name(name)?;
        if value.trim().is_empty() {
            return Err(DesktopError::invalid("value", "the token is empty"));
        }
        self.inner.secrets.set(name, value.trim())
    }

    /// `settings_clear_secret`.
    pub fn clear_secret(&self, name: &str) -> Result<()> {
        check_name(name)?;
        self.inner.secrets.delete(name)
    }

    /// `settings_about`.
    pub fn about(&self, app_version: &str) -> AboutInfo {
        AboutInfo {
            app_version: app_version.into(),
            core_version: env!("CARGO_PKG_VERSION").into(),
            protocol_version: outpost_protocol::PROTOCOL_VERSION,
            data_dir: self.inner.paths.data_dir.display().to_string(),
            policy_file: self.inner.paths.policy_file().display().to_string(),
        }
    }
}

/// Validates the connection part of the settings.
pub(crate) fn connection_config(c: &ConnectionSettings) -> Result<ConnectionConfig> {
    let auth_mode = c.auth_mode;
    let url = c.livekit_url.trim();
    if !url.is_empty()
        && !["ws://", "wss://", "http://", "https://"]
            .iter()
            .any(|s| url.starts_with(s))
    {
        return Err(DesktopError::invalid(
            "connection.livekitUrl",
            format!("must start with wss://, ws://, https:// or http://, got \"{url}\""),
        ));
    }
    let endpoint = c.token_endpoint.trim();
    if !endpoint.is_empty()
        && !["http://", "https://"]
            .iter()
            .any(|s| endpoint.starts_with(s))
    {
        return Err(DesktopError::invalid(
            "connection.tokenEndpoint",
            format!("must start with https:// or http://, got \"{endpoint}\""),
        ));
    }
    Ok(ConnectionConfig {
        auth_mode,
        livekit_url: url.to_owned(),
        token_endpoint: endpoint.to_owned(),
        room: c.room.trim().to_owned(),
        identity: c.identity.trim().to_owned(),
        agent_name: c.agent_name.trim().to_owned(),
        api_key: c.api_key.trim().to_owned(),
    })
}
