//! Outpost's permission layer: what the assistant may do on this computer, and how the
//! user is asked.
//!
//! Layout:
//! - `model`: the policy as written ([`Policy`]), compiled against a home directory
//!   ([`CompiledPolicy`]), and the evaluation of one call ([`AccessRequest`] → [`Verdict`]).
//!   Deny wins over allow. Split into `written`, `paths`, `call` and `compiled`.
//! - `secrets`: the built-in secrets deny list ([`SecretsList`]).
//! - `file`: the commented TOML policy file ([`PolicyStore`]): load, reload on change (an
//!   invalid file is reported and the last valid policy stays), and "always" answers written
//!   back with comments kept.
//! - `consent`: the consent broker ([`ConsentBroker`]) a UI attaches to; no UI means deny.
//! - `roots`: the allowed folders as MCP roots, split around everything the policy denies
//!   ([`CompiledPolicy::mcp_roots`]; the caller lists the folders).
//! - `links`: which addresses may be handed to the desktop's default handler
//!   ([`check_link`]: web and mail, never a mail link that attaches a file).
//!
//! The tool executor (`outpost-tools`) resolves paths and asks this crate before it runs
//! anything; this crate itself never reads user files.

mod consent;
mod error;
mod file;
mod links;
mod model;
mod roots;
mod secrets;

pub use consent::{
    ConsentBroker, ConsentEvent, ConsentInbox, ConsentOutcome, ConsentRequest, WithdrawReason,
};
pub use error::{PolicyError, Result};
pub use file::{
    DEFAULT_POLICY_TOML, PolicyStatus, PolicyStore, PolicyWatcher, parse_policy, read_policy,
};
pub use links::check_link;
pub use model::{
    AccessRequest, Allowance, CompiledPolicy, ConversationGrants, DEFAULT_CONSENT_TIMEOUT_SECS,
    Decider, Decision, Exception, FolderAccess, FolderRule, MAX_CONSENT_TIMEOUT_SECS, Policy,
    PolicyContext, Rule, ServerClaims, ToolHints, Verdict, canonical_or_clean,
};
pub use roots::{Entry, EntryKind, ListFolder, RootLimits, RootsPlan};
pub use secrets::SecretsList;
