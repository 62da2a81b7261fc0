//! Fuzzes the built-in tools' parameter handling as the dispatcher runs it: the schema
//! check (`Entry::validate`) on arbitrary JSON, then, for parameters it accepts, the tool's
//! `prepare` (which only resolves and stats paths; the job is never run). Neither may
//! panic, and `prepare` must never launch anything.
//!
//! The JSON is built from the fuzzer's bytes (mostly a map whose keys are the tool's own
//! parameter names, so the fuzzer reaches past the schema); paths go to a fixed temporary
//! home, so `~` and absolute paths land somewhere harmless.
#![no_main]

use std::ffi::OsStr;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use libfuzzer_sys::arbitrary::{self, Unstructured};
use libfuzzer_sys::fuzz_target;
use outpost_protocol::{Map, Value};
use outpost_tools::{Launcher, Registry, ToolEnv, builtin_registry};

/// A launcher that must never be reached: `prepare` only describes the call.
struct NoLaunch;

impl Launcher for NoLaunch {
    fn open(&self, target: &OsStr) -> std::io::Result<()> {
        panic!("prepare launched {target:?}");
    }
}

struct Fixture {
    registry: Registry,
    /// Tool names, and each tool's parameter names from its schema.
    tools: Vec<(String, Vec<String>)>,
    env: ToolEnv,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let registry = builtin_registry().expect("the built-in tools register");
        let tools = registry
            .names()
            .map(|name| {
                let keys = registry
                    .get(name)
                    .and_then(|e| e.spec.descriptor.parameters.get("properties"))
                    .and_then(Value::as_object)
                    .map(|p| p.keys().cloned().collect())
                    .unwrap_or_default();
                (name.to_owned(), keys)
            })
            .collect();
        let home = std::env::temp_dir().join(format!("outpost-fuzz-tools-{}", std::process::id()));
        std::fs::create_dir_all(home.join("work")).expect("the fuzz home can be made");
        std::fs::write(home.join("work/a.txt"), "a").expect("a file in the fuzz home");
        Fixture {
            registry,
            tools,
            env: ToolEnv {
                home: PathBuf::from(&home),
                launcher: Arc::new(NoLaunch),
            },
        }
    })
}

/// Strings the parameters often hold, so the fuzzer does not have to find them.
const WORDS: &[&str] = &[
    "",
    "~",
    "~/",
    "~/work",
    "~/work/a.txt",
    "~/work/../.ssh/id_rsa",
    "/",
    "/etc/passwd",
    "/proc/self/mem",
    "~user/x",
    "relative/path",
    "a\0b",
    "*.txt",
    "**",
    "[",
    "create",
    "overwrite",
    "append",
    "1+2",
    "(((1)))",
    "2^64",
    "https://example.invalid/",
    "file:///etc",
    "javascript:alert(1)",
    "utf8",
    "base64",
];

fn string(u: &mut Unstructured<'_>) -> arbitrary::Result<String> {
    if u.ratio(1, 2)? {
        Ok((*u.choose(WORDS)?).to_owned())
    } else {
        u.arbitrary()
    }
}

fn number(u: &mut Unstructured<'_>) -> arbitrary::Result<Value> {
    Ok(match u.int_in_range(0..=3)? {
        0 => Value::from(u.arbitrary::<i64>()?),
        1 => Value::from(u.arbitrary::<u64>()?),
        2 => serde_json::Number::from_f64(u.arbitrary()?).map_or(Value::Null, Value::Number),
        _ => Value::from(u.int_in_range(-2i64..=20_000)?),
    })
}

fn value(u: &mut Unstructured<'_>, keys: &[String], depth: u32) -> arbitrary::Result<Value> {
    let pick = if depth >= 4 {
        u.int_in_range(0..=3)?
    } else {
        u.int_in_range(0..=5)?
    };
    Ok(match pick {
        0 => Value::Null,
        1 => Value::Bool(u.arbitrary()?),
        2 => number(u)?,
        3 => Value::String(string(u)?),
        4 => {
            let n = u.int_in_range(0..=4)?;
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                items.push(value(u, keys, depth + 1)?);
            }
            Value::Array(items)
        }
        _ => Value::Object(map(u, keys, depth + 1)?),
    })
}

fn map(u: &mut Unstructured<'_>, keys: &[String], depth: u32) -> arbitrary::Result<Map> {
    let n = u.int_in_range(0..=5)?;
    let mut m = Map::new();
    for _ in 0..n {
        let key = if !keys.is_empty() && u.ratio(4, 5)? {
            u.choose(keys)?.clone()
        } else {
            string(u)?
        };
        let v = value(u, keys, depth)?;
        m.insert(key, v);
    }
    Ok(m)
}

fn params(u: &mut Unstructured<'_>, keys: &[String]) -> arbitrary::Result<Value> {
    if u.ratio(9, 10)? {
        Ok(Value::Object(map(u, keys, 0)?))
    } else {
        value(u, keys, 0)
    }
}

fuzz_target!(|data: &[u8]| {
    let fx = fixture();
    let mut u = Unstructured::new(data);
    let Ok((name, keys)) = u.choose(&fx.tools) else {
        return;
    };
    let Ok(params) = params(&mut u, keys) else {
        return;
    };
    let Some(entry) = fx.registry.get(name) else {
        return;
    };
    if entry.validate(&params).is_err() {
        return;
    }
    // The dispatcher answers a schema-valid non-map with an error of its own.
    let Value::Object(params) = params else {
        return;
    };
    // Errors are fine (they are answers); a panic or a launch is the bug.
    let _ = entry.tool.prepare(params, &fx.env);
});
