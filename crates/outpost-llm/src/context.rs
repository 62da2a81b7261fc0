//! Running tool calls: the execution context (timeout, approval), timed execution that
//! turns a future into a [`ToolResult`] with its duration, and batches of calls from one
//! model turn whose results are collected in call order.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::call::{ToolCall, ToolResult};
use crate::error::{Error, Result, ToolCallError};

type Approval = Box<dyn Fn(&ToolCall) -> bool + Send + Sync>;

/// Settings for running tool calls.
pub struct ToolExecutionContext {
    /// Maximum execution time per call.
    pub timeout: Duration,
    /// Working directory for tools that need one.
    pub working_dir: Option<String>,
    /// Whether tools that spawn processes keep their stderr.
    pub capture_stderr: bool,
    /// Extra environment for tools that spawn processes.
    pub env: HashMap<String, String>,
    approval: Option<Approval>,
}

impl fmt::Debug for ToolExecutionContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolExecutionContext")
            .field("timeout", &self.timeout)
            .field("working_dir", &self.working_dir)
            .field("capture_stderr", &self.capture_stderr)
            .field("env", &self.env)
            .field("approval", &self.approval.as_ref().map(|_| "callback"))
            .finish()
    }
}

impl Default for ToolExecutionContext {
    fn default() -> Self {
        Self {
            timeout: Duration::from_millis(u64::from(outpost_protocol::DEFAULT_TIMEOUT_MS)),
            working_dir: None,
            capture_stderr: true,
            env: HashMap::new(),
            approval: None,
        }
    }
}

impl ToolExecutionContext {
    /// Defaults: 30 s (seed 000's default timeout), no approval callback.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the timeout.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the working directory.
    #[must_use]
    pub fn with_working_dir(mut self, dir: impl Into<String>) -> Self {
        self.working_dir = Some(dir.into());
        self
    }

    /// Adds an environment variable.
    #[must_use]
    pub fn with_env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }

    /// Sets the approval callback; without one every call is approved.
    #[must_use]
    pub fn with_approval<F>(mut self, callback: F) -> Self
    where
        F: Fn(&ToolCall) -> bool + Send + Sync + 'static,
    {
        self.approval = Some(Box::new(callback));
        self
    }

    /// Whether `call` may run.
    pub fn is_approved(&self, call: &ToolCall) -> bool {
        self.approval.as_ref().is_none_or(|cb| cb(call))
    }

    /// Runs `call` with `run`: refused calls give a `Denied` result, calls past the
    /// timeout a `Timeout` result (the future is dropped, which cancels it), others the
    /// tool's outcome. Every result carries its execution time.
    pub async fn execute<F, Fut>(&self, call: &ToolCall, run: F) -> ToolResult
    where
        F: FnOnce(ToolCall) -> Fut,
        Fut: Future<Output = std::result::Result<Value, ToolCallError>>,
    {
        let timer = TimedExecution::start(call);
        if !self.is_approved(call) {
            return timer.error(
                ToolCallError::Denied(format!("'{}' was not approved", call.name)).to_string(),
            );
        }
        match tokio::time::timeout(self.timeout, run(call.clone())).await {
            Ok(Ok(value)) => timer.success_json(value),
            Ok(Err(e)) => timer.error(e.to_string()),
            Err(_) => {
                let ms = u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX);
                timer.error(ToolCallError::Timeout(ms).to_string())
            }
        }
    }
}

/// Measures one call from start to result.
#[derive(Debug)]
pub struct TimedExecution {
    start: Instant,
    tool_name: String,
    tool_call_id: String,
}

impl TimedExecution {
    /// Starts the clock for `call`.
    pub fn start(call: &ToolCall) -> Self {
        Self {
            start: Instant::now(),
            tool_name: call.name.clone(),
            tool_call_id: call.id.clone(),
        }
    }

    fn ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// A successful text result, timed.
    pub fn success(self, content: impl Into<String>) -> ToolResult {
        let ms = self.ms();
        ToolResult::success(self.tool_call_id, self.tool_name, content).with_execution_time(ms)
    }

    /// A successful JSON result, timed.
    pub fn success_json(self, value: Value) -> ToolResult {
        let ms = self.ms();
        ToolResult::success_json(self.tool_call_id, self.tool_name, value).with_execution_time(ms)
    }

    /// A failed result, timed.
    pub fn error(self, error: impl Into<String>) -> ToolResult {
        let ms = self.ms();
        ToolResult::error(self.tool_call_id, self.tool_name, error).with_execution_time(ms)
    }

    /// Time since the start.
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }
}

/// The tool calls of one model turn and their results.
#[derive(Debug, Clone, Default)]
pub struct ToolBatch {
    calls: Vec<ToolCall>,
    results: HashMap<String, ToolResult>,
}

impl ToolBatch {
    /// A batch of `calls`. Call ids must be distinct; a repeated id is an error.
    pub fn new(calls: Vec<ToolCall>) -> Result<Self> {
        let mut seen = std::collections::HashSet::new();
        for c in &calls {
            if !seen.insert(c.id.as_str()) {
                return Err(Error::Batch(format!(
                    "two tool calls share the id '{}'",
                    c.id
                )));
            }
        }
        Ok(Self {
            calls,
            results: HashMap::new(),
        })
    }

    /// The calls, in the model's order.
    pub fn calls(&self) -> &[ToolCall] {
        &self.calls
    }

    /// Records a result. A result for a call not in the batch, or a second result for the
    /// same call, is refused (the first one stands).
    pub fn add_result(&mut self, result: ToolResult) -> Result<()> {
        if !self.calls.iter().any(|c| c.id == result.tool_call_id) {
            return Err(Error::Batch(format!(
                "no call with id '{}' in this batch",
                result.tool_call_id
            )));
        }
        if self.results.contains_key(&result.tool_call_id) {
            return Err(Error::Batch(format!(
                "call '{}' already has a result",
                result.tool_call_id
            )));
        }
        self.results.insert(result.tool_call_id.clone(), result);
        Ok(())
    }

    /// Whether every call has a result.
    pub fn is_complete(&self) -> bool {
        self.calls.iter().all(|c| self.results.contains_key(&c.id))
    }

    /// Calls still without a result.
    pub fn missing(&self) -> Vec<&ToolCall> {
        self.calls
            .iter()
            .filter(|c| !self.results.contains_key(&c.id))
            .collect()
    }

    /// The results so far, in call order.
    pub fn results(&self) -> Vec<&ToolResult> {
        self.calls
            .iter()
            .filter_map(|c| self.results.get(&c.id))
            .collect()
    }

    /// The results in call order; calls without one get an error result saying so.
    pub fn into_results(mut self) -> Vec<ToolResult> {
        self.calls
            .iter()
            .map(|c| {
                self.results
                    .remove(&c.id)
                    .unwrap_or_else(|| ToolResult::error(&c.id, &c.name, "no result was produced"))
            })
            .collect()
    }

    /// Runs every call concurrently through `ctx` with `run`, and returns the results in
    /// call order.
    pub async fn execute_all<F, Fut>(self, ctx: &ToolExecutionContext, run: F) -> Vec<ToolResult>
    where
        F: Fn(ToolCall) -> Fut,
        Fut: Future<Output = std::result::Result<Value, ToolCallError>>,
    {
        let futures = self.calls.iter().map(|c| ctx.execute(c, &run));
        futures::future::join_all(futures).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::call::ToolResultContent;
    use serde_json::json;

    fn c(id: &str) -> ToolCall {
        ToolCall::new(id, "calc", r#"{"x":1}"#)
    }

    #[tokio::test]
    async fn timed_execution_measures_and_times_out() {
        let ctx = ToolExecutionContext::new().with_timeout(Duration::from_millis(100));
        let ok = ctx
            .execute(&c("a"), |call| async move {
                tokio::time::sleep(Duration::from_millis(40)).await;
                Ok(json!({"x": call.get_int("x")?}))
            })
            .await;
        assert!(ok.success);
        assert_eq!(ok.content, ToolResultContent::Json(json!({"x": 1})));
        assert!(ok.execution_time_ms.unwrap() >= 40);

        let slow = ctx
            .execute(&c("b"), |_| async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                Ok(json!(null))
            })
            .await;
        assert!(!slow.success);
        assert_eq!(slow.text(), "Error: tool execution timed out after 100ms");

        let failed = ctx
            .execute(&c("c"), |_| async {
                Err(ToolCallError::ExecutionFailed("disk on fire".into()))
            })
            .await;
        assert_eq!(failed.text(), "Error: tool execution failed: disk on fire");
    }

    #[tokio::test]
    async fn approval_callback_denies() {
        let ctx = ToolExecutionContext::new().with_approval(|call| call.id != "no");
        let r = ctx.execute(&c("no"), |_| async { Ok(json!(1)) }).await;
        assert!(!r.success);
        assert!(r.text().contains("denied"), "{}", r.text());
        assert!(
            ctx.execute(&c("yes"), |_| async { Ok(json!(1)) })
                .await
                .success
        );
    }

    #[test]
    fn timed_execution_helpers() {
        let t = TimedExecution::start(&c("a"));
        assert!(t.elapsed() < Duration::from_secs(5));
        let r = t.success("done");
        assert_eq!(r.tool_call_id, "a");
        assert!(r.execution_time_ms.is_some());
        assert!(!TimedExecution::start(&c("a")).error("x").success);
    }

    #[test]
    fn batch_collects_in_call_order_and_refuses_strays() {
        assert!(ToolBatch::new(vec![c("a"), c("a")]).is_err());
        let mut b = ToolBatch::new(vec![c("a"), c("b"), c("z")]).unwrap();
        assert!(!b.is_complete());
        b.add_result(ToolResult::success("b", "calc", "2")).unwrap();
        b.add_result(ToolResult::success("a", "calc", "1")).unwrap();
        assert!(
            b.add_result(ToolResult::success("a", "calc", "again"))
                .is_err()
        );
        assert!(b.add_result(ToolResult::success("q", "calc", "?")).is_err());
        assert_eq!(b.missing().len(), 1);
        let order: Vec<_> = b.results().iter().map(|r| r.text()).collect();
        assert_eq!(order, ["1", "2"]);
        let all = b.into_results();
        assert_eq!(all.len(), 3);
        assert_eq!(all[2].text(), "Error: no result was produced");
    }

    #[tokio::test]
    async fn batch_runs_concurrently() {
        let b = ToolBatch::new(vec![c("a"), c("b")]).unwrap();
        let ctx = ToolExecutionContext::new();
        let results = b
            .execute_all(&ctx, |call| async move { Ok(json!(call.id)) })
            .await;
        assert_eq!(results[0].content, ToolResultContent::Json(json!("a")));
        assert_eq!(results[1].content, ToolResultContent::Json(json!("b")));
    }
}
