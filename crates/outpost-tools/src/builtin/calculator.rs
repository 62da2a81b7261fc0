//! calculator: arithmetic, comparisons and the usual math functions, evaluated by the
//! evalexpr crate in a reduced form whose work is bounded before it starts.
//!
//! evalexpr is a small scripting language, not only a calculator: `=` and `+=` assign
//! variables, `;` chains statements that share them, and `+` concatenates strings. Together
//! they unroll loops: `a="aaaaaaaa"; a=a+a; a=a+a; …` doubles a string per statement, so a
//! 1000-byte call that runs without asking could demand 2^100 bytes. A timeout cannot help:
//! the evaluation runs on a blocking thread that nothing can interrupt. So `prepare` parses
//! the expression and checks its operator tree before any evaluation:
//!
//! - **One expression, no state**: assignments (`=`, `+=`, …), `;` chains and variables are
//!   refused. Every leaf is a literal, every node is evaluated once from its own subtree,
//!   and evaluation runs against an immutable context with no variables, so nothing is
//!   carried from one statement or one call to the next.
//! - **Listed functions only**: the math functions, `min`, `max`, `if`, `len`, `typeof`,
//!   `contains`, `contains_any`, the bitwise functions and five string functions
//!   (`str::from`, `str::trim`, `str::substring`, `str::to_lowercase`,
//!   `str::to_uppercase`). evalexpr's optional `regex` and `rand` functions are not compiled
//!   in and are not listed either.
//! - **Bounded values**: the tree gives every node a static upper bound on the size of its
//!   value (strings by length; numbers, booleans and tuple slots as [`SLOT_BYTES`]; `+`
//!   adds its operands' bounds; `str::from` multiplies by [`TEXT_GROWTH`], the most a
//!   number's decimal text outgrows its slot; case changes by [`CASE_GROWTH`]). A tree
//!   whose bound passes [`MAX_VALUE_BYTES`] is refused. Since no node can be evaluated more
//!   than once, the whole evaluation allocates at most the tree's node count times that
//!   cap, and in practice a few kilobytes in microseconds.
//!
//! Functions of evalexpr that can panic on hostile input (`math::abs` of the smallest
//! integer, `shl`/`shr` by 64 or more, `str::substring` inside a UTF-8 character) are
//! replaced by checked versions that return an error.
//!
//! Why no child process: the tools crate is a library linked into both the `outpost`
//! command and the Tauri app, so a child would mean re-executing one of those binaries in a
//! hidden mode (which the app's single-instance check intercepts) or shipping a helper
//! binary next to each. The limits above make the worst case cheap by construction instead,
//! and the tests check the bound on every value they produce.

use evalexpr::{
    Context, DefaultNumericTypes, EvalexprError, EvalexprResult, Node, Operator, Value as Ev,
};
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
/// Deepest operator tree accepted (`- - - 1` nests without parentheses); keeps the
/// recursive checks and evaluation far from the end of a blocking thread's stack.
pub const MAX_TREE_DEPTH: usize = 200;
/// Largest value, by the static bound, that an expression may build.
pub const MAX_VALUE_BYTES: usize = 256 * 1024;
/// What a number, boolean or empty value counts for in the bound, and what each tuple
/// element adds: the size of an evalexpr value.
pub const SLOT_BYTES: usize = 24;
/// `str::from` writes a float in full decimal (`5e-324` becomes 326 characters): at most
/// 14 bytes of text per bound byte, with room for the quotes and commas of tuples.
pub const TEXT_GROWTH: usize = 14;
/// A Unicode case change turns one character into at most three of up to four bytes each,
/// and a character that changes takes at least two bytes: at most six times the bytes.
pub const CASE_GROWTH: usize = 6;

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

fn to_json(v: Ev) -> Result<Value> {
    Ok(match v {
        Ev::Int(i) => Value::from(i),
        Ev::Float(f) => {
            if !f.is_finite() {
                return Err(ToolError::exec(format!(
                    "the result is not a finite number ({f})"
                )));
            }
            Value::from(f)
        }
        Ev::Boolean(b) => Value::Bool(b),
        Ev::String(s) => Value::String(s),
        Ev::Tuple(t) => Value::Array(t.into_iter().map(to_json).collect::<Result<_>>()?),
        Ev::Empty => Value::Null,
    })
}

/// How a listed function's result relates to the bound of its argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Growth {
    /// A number or boolean.
    Slot,
    /// At most its argument (`if` picks one element, `str::trim` and `str::substring`
    /// take part of a string).
    Same,
    /// The argument's text (`str::from`).
    Text,
    /// A case change.
    Case,
}

/// The functions an expression may call, with what each can produce.
fn function_growth(name: &str) -> Option<Growth> {
    Some(match name {
        "math::ln" | "math::log" | "math::log2" | "math::log10" | "math::exp" | "math::exp2"
        | "math::pow" | "math::cos" | "math::acos" | "math::cosh" | "math::acosh" | "math::sin"
        | "math::asin" | "math::sinh" | "math::asinh" | "math::tan" | "math::atan"
        | "math::tanh" | "math::atanh" | "math::atan2" | "math::sqrt" | "math::cbrt"
        | "math::hypot" | "math::is_nan" | "math::is_finite" | "math::is_infinite"
        | "math::is_normal" | "math::abs" | "floor" | "round" | "ceil" | "min" | "max" | "len"
        | "contains" | "contains_any" | "bitand" | "bitor" | "bitxor" | "bitnot" | "shl"
        | "shr" => Growth::Slot,
        // "boolean" is the longest answer, far below a slot.
        "typeof" => Growth::Slot,
        "if" | "str::trim" | "str::substring" => Growth::Same,
        "str::from" => Growth::Text,
        "str::to_lowercase" | "str::to_uppercase" => Growth::Case,
        _ => return None,
    })
}

fn refuse(message: impl std::fmt::Display) -> ToolError {
    ToolError::InvalidParameters(format!("expression: {message}"))
}

/// Checks one node and returns the static bound, in bytes, of the value it can produce.
fn bound(node: &Node, depth: usize) -> Result<usize> {
    if depth > MAX_TREE_DEPTH {
        return Err(refuse(format!(
            "nested deeper than {MAX_TREE_DEPTH} operators"
        )));
    }
    let children = node
        .children()
        .iter()
        .map(|c| bound(c, depth + 1))
        .collect::<Result<Vec<usize>>>()?;
    let sum = || children.iter().fold(0usize, |a, b| a.saturating_add(*b));
    let b = match node.operator() {
        Operator::RootNode => children.first().copied().unwrap_or(SLOT_BYTES),
        // String concatenation; for numbers the sum is still at least a slot.
        Operator::Add => sum(),
        Operator::Sub
        | Operator::Neg
        | Operator::Mul
        | Operator::Div
        | Operator::Mod
        | Operator::Exp
        | Operator::Eq
        | Operator::Neq
        | Operator::Gt
        | Operator::Lt
        | Operator::Geq
        | Operator::Leq
        | Operator::And
        | Operator::Or
        | Operator::Not => SLOT_BYTES,
        Operator::Assign
        | Operator::AddAssign
        | Operator::SubAssign
        | Operator::MulAssign
        | Operator::DivAssign
        | Operator::ModAssign
        | Operator::ExpAssign
        | Operator::AndAssign
        | Operator::OrAssign
        | Operator::VariableIdentifierWrite { .. } => {
            return Err(refuse(
                "assignments (=, +=, …) are not supported: the calculator evaluates one \
                 expression without variables",
            ));
        }
        Operator::Chain => {
            return Err(refuse(
                "';' separates statements, which are not supported: the calculator \
                 evaluates one expression without variables",
            ));
        }
        Operator::VariableIdentifierRead { identifier } => {
            return Err(refuse(format!(
                "unknown name '{identifier}': the calculator has no variables (write text \
                 in double quotes)"
            )));
        }
        Operator::Tuple => SLOT_BYTES.saturating_add(children.iter().fold(0usize, |a, b| {
            a.saturating_add(SLOT_BYTES).saturating_add(*b)
        })),
        Operator::Const { value } => value_bytes(value),
        Operator::FunctionIdentifier { identifier } => {
            let arg = sum();
            match function_growth(identifier) {
                Some(Growth::Slot) => SLOT_BYTES,
                Some(Growth::Same) => arg,
                Some(Growth::Text) => arg.saturating_mul(TEXT_GROWTH).saturating_add(SLOT_BYTES),
                Some(Growth::Case) => arg.saturating_mul(CASE_GROWTH),
                None => {
                    return Err(refuse(format!(
                        "unknown function '{identifier}' (see the tool's description for \
                         the functions available)"
                    )));
                }
            }
        }
    };
    if b > MAX_VALUE_BYTES {
        return Err(refuse(format!(
            "it could build a value larger than {MAX_VALUE_BYTES} bytes"
        )));
    }
    Ok(b)
}

/// The measured size of a value in the units of the static bound.
fn value_bytes(v: &Ev) -> usize {
    match v {
        Ev::String(s) => s.len().max(SLOT_BYTES),
        Ev::Tuple(t) => t.iter().fold(SLOT_BYTES, |a, e| {
            a.saturating_add(SLOT_BYTES).saturating_add(value_bytes(e))
        }),
        Ev::Int(_) | Ev::Float(_) | Ev::Boolean(_) | Ev::Empty => SLOT_BYTES,
    }
}

/// Parses and checks `expression`; the tree is safe to evaluate with [`evaluate`].
fn parse(expression: &str) -> Result<(Node, usize)> {
    if expression.len() > MAX_EXPRESSION_BYTES {
        return Err(refuse(format!("longer than {MAX_EXPRESSION_BYTES} bytes")));
    }
    // Checked before parsing: evalexpr's parser recurses once per parenthesis.
    let mut depth = 0usize;
    let mut max_depth = 0usize;
    for c in expression.chars() {
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
        return Err(refuse(format!(
            "nested deeper than {MAX_NESTING} parentheses"
        )));
    }
    let tree = evalexpr::build_operator_tree::<DefaultNumericTypes>(expression)
        .map_err(|e| refuse(format!("cannot parse '{expression}': {e}")))?;
    let b = bound(&tree, 0)?;
    Ok((tree, b))
}

/// The evaluation context: no variables, nothing writable, evalexpr's builtin functions
/// behind the checked replacements below. Only functions [`function_growth`] lists reach
/// it, because [`parse`] refuses the others.
struct Calc;

fn int_pair(arg: &Ev) -> EvalexprResult<(i64, i64)> {
    let t = arg.as_fixed_len_tuple(2)?;
    Ok((t[0].as_int()?, t[1].as_int()?))
}

fn shift_amount(b: i64) -> EvalexprResult<u32> {
    u32::try_from(b)
        .ok()
        .filter(|b| *b < i64::BITS)
        .ok_or_else(|| EvalexprError::CustomMessage(format!("cannot shift by {b} bits")))
}

impl Context for Calc {
    type NumericTypes = DefaultNumericTypes;

    fn get_value(&self, _identifier: &str) -> Option<&Ev> {
        None
    }

    fn call_function(&self, identifier: &str, argument: &Ev) -> EvalexprResult<Ev> {
        match identifier {
            "math::abs" => match argument {
                Ev::Int(i) => i.checked_abs().map(Ev::Int).ok_or_else(|| {
                    EvalexprError::CustomMessage(format!("|{i}| does not fit in an integer"))
                }),
                Ev::Float(f) => Ok(Ev::Float(f.abs())),
                other => Err(EvalexprError::expected_number(other.clone())),
            },
            "shl" => {
                let (a, b) = int_pair(argument)?;
                let v = a.checked_shl(shift_amount(b)?).unwrap_or(0);
                Ok(Ev::Int(v))
            }
            "shr" => {
                let (a, b) = int_pair(argument)?;
                let v = a.checked_shr(shift_amount(b)?).unwrap_or(0);
                Ok(Ev::Int(v))
            }
            "str::substring" => {
                let args = argument.as_ranged_len_tuple(2..=3)?;
                let subject = args[0].as_string()?;
                let index = |v: &Ev| -> EvalexprResult<usize> {
                    usize::try_from(v.as_int()?).map_err(|_| EvalexprError::OutOfBoundsAccess)
                };
                let start = index(&args[1])?;
                let end = match args.get(2) {
                    Some(e) => index(e)?,
                    None => subject.len(),
                };
                subject.get(start..end).map(Ev::from).ok_or_else(|| {
                    EvalexprError::CustomMessage(format!(
                        "bytes {start}..{end} are not a part of a {}-byte string that \
                             starts and ends on whole characters",
                        subject.len()
                    ))
                })
            }
            // Falls through to evalexpr's builtin function of that name.
            _ => Err(EvalexprError::FunctionIdentifierNotFound(
                identifier.to_owned(),
            )),
        }
    }

    fn are_builtin_functions_disabled(&self) -> bool {
        false
    }

    fn set_builtin_functions_disabled(&mut self, _disabled: bool) -> EvalexprResult<()> {
        Err(EvalexprError::ContextNotMutable)
    }
}

/// Evaluates a tree [`parse`] accepted.
fn evaluate(tree: &Node, expression: &str) -> Result<Ev> {
    tree.eval_with_context(&Calc)
        .map_err(|e| ToolError::exec(format!("Cannot evaluate '{expression}': {e}")))
}

impl Tool for Calculator {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new::<CalculatorParams, CalculatorOutput>(
            "calculator",
            "Evaluate one arithmetic expression: + - * / % ^, comparisons, boolean logic, \
             tuples (a, b), \"text\" in double quotes (+ joins), and the functions \
             math::sqrt, math::cbrt, math::pow, math::exp, math::ln, math::log(x, base), \
             math::log2, math::log10, math::sin, math::cos, math::tan (and a/h variants), \
             math::atan2, math::hypot, math::abs, floor, round, ceil, min, max, if(c, a, b), \
             len, typeof, contains, contains_any, bitand, bitor, bitxor, bitnot, shl, shr, \
             str::from, str::trim, str::substring, str::to_lowercase, str::to_uppercase. \
             No variables, assignments or ';'.",
            ToolHints::READ_ONLY,
            2_000,
        )
    }

    fn prepare(&self, params: Map, _env: &ToolEnv) -> Result<Prepared> {
        let p: CalculatorParams = parse_params(params)?;
        let (tree, limit) = parse(&p.expression)?;
        let summary = format!("Calculate {}", p.expression);
        Ok(Prepared {
            access: Access {
                summary,
                ..Access::default()
            },
            job: Box::new(move |cx| {
                cx.check()?;
                let v = evaluate(&tree, &p.expression)?;
                // The bound holds by construction; this keeps a mistake in it from ever
                // handing a larger value on.
                if value_bytes(&v) > limit {
                    return Err(ToolError::exec(format!(
                        "Cannot evaluate '{}': the value outgrew its bound of {limit} bytes",
                        p.expression
                    )));
                }
                to_map(&CalculatorOutput {
                    answer: to_json(v)?,
                    expression: p.expression,
                })
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn calc(expression: &str) -> Result<Ev> {
        let (tree, _) = parse(expression)?;
        evaluate(&tree, expression)
    }

    fn refused(expression: &str) -> String {
        match parse(expression) {
            Err(ToolError::InvalidParameters(m)) => m,
            other => panic!("{expression}: expected a refusal, got {other:?}"),
        }
    }

    /// The expression: 30 doublings of an 8-byte string, 8 GiB.
    fn doubling_attack(times: usize) -> String {
        let mut e = String::from("a=\"aaaaaaaa\";");
        for _ in 0..times {
            e.push_str(" a=a+a;");
        }
        e.push_str(" len(a)");
        e
    }

    #[test]
    fn the_doubling_attack_is_refused_before_evaluation() {
        let e = doubling_attack(30);
        assert!(e.len() <= MAX_EXPRESSION_BYTES);
        let started = std::time::Instant::now();
        let m = refused(&e);
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert!(m.contains("not supported"), "{m}");
    }

    #[test]
    fn statements_assignments_and_variables_are_refused() {
        for e in [
            "a = 1",
            "a += 1",
            "a -= 1",
            "a *= 2",
            "a /= 2",
            "a %= 2",
            "a ^= 2",
            "a &&= true",
            "a ||= true",
            "1; 2",
            "1;",
            "x + 1",
            "math::PI",
            "len(a)",
            "(a = 1, 2)",
            "if(true, a = \"x\", 2)",
        ] {
            let m = refused(e);
            assert!(
                m.contains("not supported") || m.contains("no variables"),
                "{e}: {m}"
            );
        }
    }

    #[test]
    fn unlisted_functions_are_refused() {
        for e in [
            "str::regex_replace(\"a\", \"\", \"aa\")",
            "str::regex_matches(\"a\", \"a\")",
            "random()",
            "nope(1)",
        ] {
            assert!(refused(e).contains("unknown function"), "{e}");
        }
    }

    /// Every way evalexpr has to grow a value without variables: string `+`, tuples,
    /// `str::from` (floats print in full decimal) and case changes. Nested, each passes the
    /// cap within a few levels and is refused; below the cap, the value stays within the
    /// bound computed for it.
    #[test]
    fn growth_is_refused_above_the_cap() {
        let s = format!("\"{}\"", "a".repeat(800));
        let nested = |f: &str, levels: usize| {
            format!(
                "{}{s}{}",
                format!("{f}(").repeat(levels),
                ")".repeat(levels)
            )
        };
        for e in [
            nested("str::to_uppercase", 6),
            nested("str::from", 5),
            nested("str::to_lowercase", 6),
        ] {
            assert!(refused(&e).contains("larger than"), "{e}");
        }
    }

    #[test]
    fn values_stay_within_their_bound() {
        let floats = vec!["-5e-324"; 110].join(",");
        let tuple = (0..200)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(",");
        for e in [
            "2 + 2".to_owned(),
            "\"ab\" + \"cd\" + \"ef\"".to_owned(),
            format!("str::from(({floats}))"),
            format!(
                "str::from(str::from(({}, \"x\")))",
                vec!["1e308"; 20].join(",")
            ),
            format!("({tuple})"),
            format!("str::from(({tuple}))"),
            "str::to_uppercase(\"ΐΐΐ ŉ ß ﬃ\")".to_owned(),
            "str::to_lowercase(\"İİİ\")".to_owned(),
            "if(true, (1, 2, \"three\"), 4)".to_owned(),
            format!("{}1", "-".repeat(150)),
        ] {
            let (tree, limit) = parse(&e).unwrap_or_else(|err| panic!("{e}: {err}"));
            assert!(limit <= MAX_VALUE_BYTES, "{e}");
            let v = evaluate(&tree, &e).unwrap();
            let actual = value_bytes(&v);
            assert!(actual <= limit, "{e}: {actual} > {limit}");
            if let Ev::String(s) = &v {
                assert!(s.len() <= limit, "{e}");
            }
        }
        // The measured growth the constants are derived from.
        let text = calc("str::from(-5e-324)").unwrap();
        assert!(text.as_string().unwrap().len() <= TEXT_GROWTH * SLOT_BYTES);
    }

    #[test]
    fn deep_trees_are_refused_without_recursing_far() {
        let e = format!("{}1", "-".repeat(500));
        assert!(refused(&e).contains("operators"), "{e}");
        let e = format!("{}1{}", "(".repeat(100), ")".repeat(100));
        assert!(refused(&e).contains("parentheses"));
        assert!(refused(&"1+".repeat(600)).contains("longer than"));
    }

    #[test]
    fn ordinary_expressions_still_work() {
        assert_eq!(calc("2+2").unwrap(), Ev::Int(4));
        assert_eq!(calc("2 + 2 * 3").unwrap(), Ev::Int(8));
        let v = calc("math::sqrt(2)*3").unwrap().as_float().unwrap();
        assert!((v - 2.0f64.sqrt() * 3.0).abs() < 1e-12);
        assert_eq!(calc("3 > 2 && 1 <= 1").unwrap(), Ev::Boolean(true));
        assert_eq!(calc("min(3, 1, 2)").unwrap(), Ev::Int(1));
        assert_eq!(calc("max(3, 1.5, 2)").unwrap(), Ev::Int(3));
        assert_eq!(calc("\"ab\" + \"cd\"").unwrap(), Ev::from("abcd"));
        assert_eq!(calc("len(\"hello\")").unwrap(), Ev::Int(5));
        assert_eq!(calc("str::to_uppercase(\"abc\")").unwrap(), Ev::from("ABC"));
        assert_eq!(
            calc("str::substring(\"hello\", 1, 3)").unwrap(),
            Ev::from("el")
        );
        assert_eq!(calc("if(2 > 1, \"yes\", \"no\")").unwrap(), Ev::from("yes"));
        assert_eq!(calc("round(2.6) + floor(1.9)").unwrap(), Ev::Float(4.0));
        assert_eq!(calc("typeof(1.5)").unwrap(), Ev::from("float"));
        assert_eq!(calc("shl(1, 4) + bitand(6, 3)").unwrap(), Ev::Int(18));
        assert_eq!(calc("math::abs(-3)").unwrap(), Ev::Int(3));
        assert_eq!(calc("str::from(1.5) + \"!\"").unwrap(), Ev::from("1.5!"));
        assert_eq!(
            calc("(1, 2)").unwrap(),
            Ev::Tuple(vec![Ev::Int(1), Ev::Int(2)])
        );
        assert!(calc("1 / 0").is_err());
    }

    /// Inputs that make evalexpr's own functions panic get an error instead.
    #[test]
    fn panicking_builtins_are_replaced() {
        for e in [
            "math::abs(-9223372036854775807 - 1)",
            "shl(1, 64)",
            "shr(1, -1)",
            "str::substring(\"é\", 0, 1)",
            "str::substring(\"abc\", 2, 1)",
            "str::substring(\"abc\", -1)",
        ] {
            assert!(
                matches!(calc(e), Err(ToolError::Execution { .. })),
                "{e}: {:?}",
                calc(e)
            );
        }
    }
}
