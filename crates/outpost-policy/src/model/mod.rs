//! The policy model: what the file says ([`Policy`]), the same compiled against a home
//! directory ([`CompiledPolicy`]), and the evaluation of one tool call into a [`Verdict`].
//!
//! Evaluation order, strongest first: an explicit `deny` (tool or folder), the off-by-default
//! rule for destructive tools, Outpost's own settings and data (no exception lifts them),
//! /proc and /sys, the secrets deny list (unless an exception names the path), then the asks that no allow rule may skip (destructive and launching
//! tools, hard-linked files), then allow rules (tool, folder scope, conversation grant), and
//! finally "ask".
//!
//! Its parts: `written` is the file's model ([`Policy`] and its rules), `paths` how a path
//! is resolved before any rule sees it, `call` one tool call and what is decided about it
//! ([`AccessRequest`], [`Decision`], [`Verdict`]), `compiled` the policy compiled against a
//! machine and the evaluation itself.

mod call;
mod compiled;
mod paths;
mod written;

pub use call::*;
pub use compiled::*;
pub use paths::*;
pub use written::*;

#[cfg(test)]
mod tests;
