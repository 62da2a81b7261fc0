//! `ui/src/lib/generated/contract.ts` is what the contract types declare (ts-rs): this test
//! fails when it is stale. `OUTPOST_WRITE_CONTRACT=1 cargo test -p outpost-desktop --test
//! contract_ts` writes it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

#[test]
fn the_generated_typescript_contract_is_fresh() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ui/src/lib/generated/contract.ts");
    let want = outpost_desktop::contract::typescript();
    if std::env::var_os("OUTPOST_WRITE_CONTRACT").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "{} is stale: run `OUTPOST_WRITE_CONTRACT=1 cargo test -p outpost-desktop --test \
         contract_ts` and commit it",
        path.display()
    );
}
