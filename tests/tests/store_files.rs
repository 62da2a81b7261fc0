//! The conversation store on real files: reopening, hostile files and paths, two handles
//! on one file, and the data-directory override.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use outpost_store::{
    ConversationId, Error, Location, NewConversation, NewMessage, Role, SearchQuery, Store,
    StoreConfig, TimelineItem,
};

fn begin(store: &Store, id: &str, at: i64) -> ConversationId {
    let cid = ConversationId::from(id);
    store
        .begin_conversation(NewConversation::new(cid.clone(), at))
        .wait()
        .unwrap();
    cid
}

fn message(cid: &ConversationId, id: &str, text: &str, at: i64) -> NewMessage {
    NewMessage {
        conversation_id: cid.clone(),
        id: id.into(),
        role: Role::User,
        text: text.into(),
        created_at: at,
        completed_at: None,
    }
}

fn open_dir(dir: &std::path::Path) -> Store {
    Store::open(StoreConfig::new(Location::Directory(dir.to_path_buf()))).unwrap()
}

#[test]
fn data_survives_reopening_and_order_continues() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let store = open_dir(tmp.path());
        assert_eq!(
            store.path(),
            Some(tmp.path().join("outpost.sqlite3").as_path())
        );
        let cid = begin(&store, "c", 1000);
        store
            .log_message(message(&cid, "a", "before reopen", 2000))
            .wait()
            .unwrap();
    }
    let store = open_dir(tmp.path());
    let cid = ConversationId::from("c");
    // Same millisecond as the earlier message: insertion order must still put it after.
    store
        .log_message(message(&cid, "b", "after reopen", 2000))
        .wait()
        .unwrap();
    let t = store.timeline(cid).wait().unwrap();
    let ids: Vec<&str> = t
        .items
        .iter()
        .filter_map(|i| match i {
            TimelineItem::Message(m) => Some(m.id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(ids, ["a", "b"]);
    assert_eq!(
        store
            .search(SearchQuery::new("reopen"))
            .wait()
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn acknowledged_writes_are_visible_to_the_reader_thread() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open_dir(tmp.path());
    let cid = begin(&store, "c", 1);
    for i in 0..200 {
        store
            .log_message(message(&cid, &format!("m{i}"), "visible", i))
            .wait()
            .unwrap();
        let page = store.list_conversations(1, None).wait().unwrap();
        assert_eq!(page.items[0].message_count, i as u64 + 1);
    }
}

#[test]
fn two_handles_on_one_file_share_data() {
    // The app and the CLI may have the same file open at once.
    let tmp = tempfile::tempdir().unwrap();
    let app = open_dir(tmp.path());
    let cli = open_dir(tmp.path());
    let cid = begin(&app, "c", 1);
    let a = app.log_message(message(&cid, "from-app", "hello", 2));
    let b = cli.log_message(message(&cid, "from-cli", "hello", 3));
    a.wait().unwrap();
    b.wait().unwrap();
    assert_eq!(app.timeline(cid.clone()).wait().unwrap().items.len(), 2);
    assert_eq!(cli.timeline(cid).wait().unwrap().items.len(), 2);
}

#[test]
fn a_file_that_is_not_a_database_is_refused_and_left_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("outpost.sqlite3");
    let junk = b"this is not an SQLite database, it is someone's notes\n".repeat(100);
    std::fs::write(&file, &junk).unwrap();
    let err = Store::open(StoreConfig::new(Location::Directory(
        tmp.path().to_path_buf(),
    )))
    .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("outpost.sqlite3"), "{text}");
    assert!(text.contains("not a database"), "{text}");
    assert_eq!(std::fs::read(&file).unwrap(), junk, "the file was modified");
}

#[test]
fn a_data_dir_that_is_a_file_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("occupied");
    std::fs::write(&file, b"x").unwrap();
    let err = Store::open(StoreConfig::new(Location::Directory(file.clone()))).unwrap_err();
    assert!(
        matches!(err, Error::Io { .. } | Error::BadDataDir { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("occupied"), "{err}");
}

#[test]
fn a_missing_parent_directory_for_a_file_location_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("no/such/dir/db.sqlite3");
    let err = Store::open(StoreConfig::new(Location::File(file))).unwrap_err();
    assert!(err.to_string().contains("db.sqlite3"), "{err}");
}

#[test]
fn explicit_dir_overrides_the_environment() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = outpost_store::data_dir(Some(tmp.path())).unwrap();
    assert_eq!(dir, tmp.path());
    let store = Store::open_default(Some(tmp.path())).unwrap();
    assert!(store.path().unwrap().starts_with(tmp.path()));
    assert!(tmp.path().join("outpost.sqlite3").exists());
}
