//! The registry: the tools this client offers, their compiled parameter validators, and
//! the catalogue for the client hello.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use outpost_protocol::{Map, ToolDescriptor, Value};

use crate::error::{Result, ToolError};
use crate::tool::{Tool, ToolSpec};

/// At most this many schema errors are reported for one call.
const MAX_REPORTED_ERRORS: usize = 3;

/// One registered tool.
pub struct Entry {
    /// The tool.
    pub tool: Arc<dyn Tool>,
    /// Its spec.
    pub spec: ToolSpec,
    validator: jsonschema::Validator,
}

impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

impl Entry {
    /// Checks `params` against the tool's parameter schema. The message names each field
    /// at fault and says what is wrong.
    pub fn validate(&self, params: &Value) -> Result<()> {
        let problems: Vec<String> = self
            .validator
            .iter_errors(params)
            .take(MAX_REPORTED_ERRORS)
            .map(|e| {
                let path = e
                    .instance_path()
                    .as_str()
                    .trim_start_matches('/')
                    .replace('/', ".");
                if path.is_empty() {
                    format!("parameters: {e}")
                } else {
                    format!("{path}: {e}")
                }
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ToolError::InvalidParameters(problems.join("; ")))
        }
    }
}

/// The tools on offer, in registration order.
#[derive(Debug, Default)]
pub struct Registry {
    entries: HashMap<String, Entry>,
    order: Vec<String>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool; its parameter schema is compiled now.
    pub fn register(&mut self, tool: impl Tool) -> Result<()> {
        let spec = tool.spec();
        let name = spec.descriptor.name.clone();
        let err = |message: String| ToolError::Registry {
            tool: name.clone(),
            message,
        };
        if self.entries.contains_key(&name) {
            return Err(err("a tool with this name is already registered".into()));
        }
        let schema = Value::Object(spec.descriptor.parameters.clone());
        let validator = jsonschema::validator_for(&schema).map_err(|e| err(e.to_string()))?;
        self.order.push(name.clone());
        self.entries.insert(
            name,
            Entry {
                tool: Arc::new(tool),
                spec,
                validator,
            },
        );
        Ok(())
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.entries.get(name)
    }

    /// The catalogue for `ClientHello.tools`, in registration order.
    pub fn descriptors(&self) -> Vec<ToolDescriptor> {
        self.order
            .iter()
            .filter_map(|n| self.entries.get(n))
            .map(|e| e.spec.descriptor.clone())
            .collect()
    }

    /// Takes a tool off offer (the user switched it off). Returns whether it was there.
    pub fn remove(&mut self, name: &str) -> bool {
        self.order.retain(|n| n != name);
        self.entries.remove(name).is_some()
    }

    /// Names of the registered tools.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.order.iter().map(String::as_str)
    }
}

/// Parameters as a JSON value for validation, without copying.
pub(crate) fn as_value(params: Map) -> Value {
    Value::Object(params)
}
