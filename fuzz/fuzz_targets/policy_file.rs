//! Fuzzes the policy file parser (`outpost_policy::parse_policy`) on arbitrary text: it must
//! never panic; what it accepts must pass `Policy::check`, survive a write and a re-read
//! unchanged, and compile and evaluate a call without panicking.
#![no_main]

use std::path::{Path, PathBuf};

use libfuzzer_sys::fuzz_target;
use outpost_policy::{
    AccessRequest, CompiledPolicy, ConversationGrants, PolicyContext, ToolHints, parse_policy,
};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let file = Path::new("/fuzz/policy.toml");
    let Ok(policy) = parse_policy(file, text) else {
        return;
    };
    assert_eq!(
        policy.check(),
        Ok(()),
        "parse_policy accepted a policy check refuses"
    );
    let written = toml::to_string(&policy).expect("an accepted policy serializes");
    let again = parse_policy(file, &written).expect("a written policy reads back");
    assert_eq!(
        again, policy,
        "the policy changed through a write and a re-read"
    );
    // A home that does not exist: compiling only canonicalizes what is there.
    let ctx = PolicyContext::new("/nonexistent-fuzz-home", vec![]);
    let compiled = CompiledPolicy::new(policy, &ctx);
    let paths = [PathBuf::from("/nonexistent-fuzz-home/work/a.txt")];
    for tool in ["read_local_file", "write_file", "calculator"] {
        let _ = compiled.evaluate(
            &AccessRequest {
                tool,
                server: None,
                hints: ToolHints {
                    read_only: tool != "write_file",
                    destructive: tool == "write_file",
                    ..ToolHints::default()
                },
                paths: if tool == "calculator" { &[] } else { &paths },
                folder: paths[0].parent(),
                force_ask: None,
            },
            &ConversationGrants::default(),
        );
    }
});
