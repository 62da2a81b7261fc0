//! calculator: arithmetic, comparisons and the usual math functions, evaluated by the
//! evalexpr crate. Input size and nesting are bounded so no expression can exhaust the
//! stack.

use outpost_policy::ToolHints;
use outpost_protocol::{Map, Value};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{Result, ToolError};
use crate::tool::{Access, Prepared, Tool, ToolEnv, ToolSpec, parse_params, to_map};

/// Longest expression accepted, in bytes.
pub const MAX_EXPRESSION_BYTES: usize = 1000;
/// Deepest parenthesis nesting accepted.
pub const MAX_NESTING: usize = 64;

/// Parameters of calculator.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CalculatorParams {
    /// The expression, e.g. "2 + 2" or "math::sqrt(2) * 3".
    #[schemars(length(min = 1, max = 1000))]
    pub expression: String,
}

/// Result of calculator.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CalculatorOutput {
    /// The value: a number, boolean, string or list.
    pub answer: Value,
    /// The expression evaluated.
    pub expression: String,
}

/// calculator.
#[derive(Debug, Clone, Copy, Default)]
pub struct Calculator;

fn to_json(v: evalexpr::Value) -> Result<Value> {
    Ok(match v {
        evalexpr::Value::Int(i) => Value::from(i),
        evalexpr::Value::Float(f) => {
            if !f.is_finite() {
                return Err(ToolError::exec(format!(
                    "the result is not a finite number ({f})"
                )));
            }
            Value::from(f)
        }
        evalexpr::Value::Boolean(b) => Value::Bool(b),
        evalexpr::Value::String(s) => Value::String(s),
        evalexpr::Value::Tuple(t) => {
            Value::Array(t.into_iter().map(to_json).collect::<Result<_>>()?)
        }
        evalexpr::Value::Empty => Value::Null,
    })
}

impl Tool for Calculator {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new::<CalculatorParams, CalculatorOutput>(
            "calculator",
            "Evaluate an arithmetic expression: + - * / % ^, comparisons, boolean logic and \
             functions such as math::sqrt, math::ln, math::sin, min, max, floor, round.",
            ToolHints {
                read_only: true,
                ..ToolHints::default()
            },
            2_000,
        )
    }

    fn prepare(&self, params: Map, _env: &ToolEnv) -> Result<Prepared> {
        let p: CalculatorParams = parse_params(params)?;
        if p.expression.len() > MAX_EXPRESSION_BYTES {
            return Err(ToolError::InvalidParameters(format!(
                "expression: longer than {MAX_EXPRESSION_BYTES} bytes"
            )));
        }
        let mut depth = 0usize;
        let mut max_depth = 0usize;
        for c in p.expression.chars() {
            match c {
                '(' => {
                    depth += 1;
                    max_depth = max_depth.max(depth);
                }
                ')' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        if max_depth > MAX_NESTING {
            return Err(ToolError::InvalidParameters(format!(
                "expression: nested deeper than {MAX_NESTING} parentheses"
            )));
        }
        let summary = format!("Calculate {}", p.expression);
        Ok(Prepared {
            access: Access {
                summary,
                ..Access::default()
            },
            job: Box::new(move |cx| {
                cx.check()?;
                let v = evalexpr::eval(&p.expression).map_err(|e| {
                    ToolError::exec(format!("Cannot evaluate '{}': {e}", p.expression))
                })?;
                to_map(&CalculatorOutput {
                    answer: to_json(v)?,
                    expression: p.expression,
                })
            }),
        })
    }
}
