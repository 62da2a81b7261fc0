//! NanoID ids for messages and tool requests.

/// A fresh 21-character NanoID (URL-safe alphabet), as the seeds prescribe for ids.
pub fn new_id() -> String {
    nanoid::nanoid!()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    #[test]
    fn ids_are_nanoids_and_distinct() {
        let a = super::new_id();
        let b = super::new_id();
        assert_eq!(a.len(), 21);
        assert_ne!(a, b);
        assert!(crate::validate::id("id", &a).is_ok());
    }
}
