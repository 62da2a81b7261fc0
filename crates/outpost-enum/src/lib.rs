//! Outpost's one string-enum macro, [`closed_enum!`]: a closed set of spellings (on the
//! wire, in the database, in the UI contract) as a Rust enum. Unknown spellings are an
//! error that names the accepted ones, never a silent default.
//!
//! The protocol crate, the store and the desktop contract all declare their string enums
//! with it, so there is one meaning of `as_str`, `parse`, `ALL`, `Display` and serde for
//! every such set.

#[doc(hidden)]
pub use serde as __serde;

/// A spelling that is not one of a closed enum's: what it was, and what is accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unknown {
    /// The spelling found.
    pub value: String,
    /// Every accepted spelling, in declaration order.
    pub expected: &'static [&'static str],
}

impl std::fmt::Display for Unknown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "unknown value {:?}, expected one of {:?}",
            self.value, self.expected
        )
    }
}

impl std::error::Error for Unknown {}

/// Declares a closed string enum: `Copy`, `as_str`, `parse`, `FromStr` (error
/// [`Unknown`]), `Display`, `ALL` (every value) and `WIRE` (every spelling), and serde as
/// the spelling (an unknown one is serde's `unknown_variant` error, which names the
/// accepted ones).
///
/// A first attribute `#[ts]` also derives ts-rs's TypeScript union of the spellings (the
/// invoking crate depends on ts-rs); `#[ts_if_feature]` does so only when the invoking
/// crate's `ts` feature is on.
///
/// ```
/// outpost_enum::closed_enum! {
///     /// Who wrote it.
///     pub enum Role {
///         /// The person.
///         User => "user",
///         Assistant => "assistant",
///     }
/// }
/// assert_eq!(Role::parse("user"), Some(Role::User));
/// assert_eq!(Role::Assistant.to_string(), "assistant");
/// assert!("robot".parse::<Role>().is_err());
/// ```
#[macro_export]
macro_rules! closed_enum {
    (
        #[ts]
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident => $wire:literal, )+
        }
    ) => {
        #[derive(ts_rs::TS)]
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* #[ts(rename = $wire)] $variant, )+
        }
        $crate::closed_enum!(@impls $name { $( $variant => $wire, )+ });
    };
    (
        #[ts_if_feature]
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident => $wire:literal, )+
        }
    ) => {
        #[cfg_attr(feature = "ts", derive(ts_rs::TS))]
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* #[cfg_attr(feature = "ts", ts(rename = $wire))] $variant, )+
        }
        $crate::closed_enum!(@impls $name { $( $variant => $wire, )+ });
    };
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident => $wire:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
        }
        $crate::closed_enum!(@impls $name { $( $variant => $wire, )+ });
    };
    (@impls $name:ident { $( $variant:ident => $wire:literal, )+ }) => {
        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// Every spelling, in declaration order.
            pub const WIRE: &'static [&'static str] = &[$($wire),+];

            /// The spelling.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( Self::$variant => $wire, )+
                }
            }

            /// The value spelled `s`, if it is one.
            pub fn parse(s: &str) -> Option<Self> {
                match s {
                    $( $wire => Some(Self::$variant), )+
                    _ => None,
                }
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::Unknown;
            fn from_str(s: &str) -> Result<Self, $crate::Unknown> {
                Self::parse(s).ok_or_else(|| $crate::Unknown {
                    value: s.to_owned(),
                    expected: Self::WIRE,
                })
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl $crate::__serde::Serialize for $name {
            fn serialize<S: $crate::__serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> $crate::__serde::Deserialize<'de> for $name {
            fn deserialize<D: $crate::__serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl $crate::__serde::de::Visitor<'_> for V {
                    type Value = $name;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(f, "one of {:?}", $name::WIRE)
                    }
                    fn visit_str<E: $crate::__serde::de::Error>(self, v: &str) -> Result<$name, E> {
                        $name::parse(v).ok_or_else(|| E::unknown_variant(v, $name::WIRE))
                    }
                }
                d.deserialize_str(V)
            }
        }
    };
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    closed_enum! {
        #[ts]
        /// A test set.
        pub enum Mode {
            /// One.
            Open => "open",
            /// Two.
            ReadOnly => "read_only",
        }
    }

    #[test]
    fn spellings_round_trip_and_unknown_ones_name_the_accepted() {
        for m in Mode::ALL {
            assert_eq!(Mode::parse(m.as_str()), Some(*m));
            let json = serde_json::to_string(m).unwrap();
            assert_eq!(json, format!("\"{m}\""));
            assert_eq!(serde_json::from_str::<Mode>(&json).unwrap(), *m);
        }
        let err = "closed".parse::<Mode>().unwrap_err();
        assert_eq!(err.expected, ["open", "read_only"]);
        assert!(err.to_string().contains("\"closed\""), "{err}");
        let err = serde_json::from_str::<Mode>("\"closed\"").unwrap_err();
        assert!(err.to_string().contains("read_only"), "{err}");
    }

    #[test]
    fn the_typescript_is_the_union_of_the_spellings() {
        use ts_rs::TS as _;
        assert_eq!(
            Mode::inline(&ts_rs::Config::new()),
            r#""open" | "read_only""#
        );
    }
}
