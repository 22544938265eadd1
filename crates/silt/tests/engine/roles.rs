//! Roles in the catalog: they survive reopening, change atomically, and
//! lose their grants on a dropped dataset.

use silt::{Database, DatasetDef, DbOptions, Error, FieldType, Privileges, Role};

#[test]
fn roles_persist_and_follow_datasets() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Database::open(dir.path(), DbOptions::default()).unwrap();
        db.create_dataset(DatasetDef::new("t", &["id"]).field("id", FieldType::Int))
            .unwrap();
        db.create_dataset(DatasetDef::new("u", &["id"]).field("id", FieldType::Int))
            .unwrap();
        let mut ann = Role::new("ann");
        ann.login = true;
        ann.verifier = Some("SCRAM-SHA-256$4096:c2FsdA==$x:y".to_owned());
        ann.grants.insert(
            "t".into(),
            Privileges {
                read: true,
                ..Privileges::default()
            },
        );
        ann.grants.insert("u".into(), Privileges::ALL);
        db.create_role(ann.clone()).unwrap();
        assert!(matches!(db.create_role(ann), Err(Error::RoleExists(_))));
        assert!(matches!(
            db.create_role(Role::new("-bad name")),
            Err(Error::Config(_))
        ));
        // A failing change leaves the role as it was.
        let r = db.update_role("ann", |r| {
            r.admin = true;
            Err(Error::Config("no".into()))
        });
        assert!(r.is_err());
        assert!(!db.role("ann").unwrap().admin);
        db.create_role(Role::new("bob")).unwrap();
        assert!(matches!(
            db.update_role("bob", |r| {
                r.name = "ann".into();
                Ok(())
            }),
            Err(Error::RoleExists(_))
        ));
        db.drop_dataset("u").unwrap();
        db.close().unwrap();
    }
    let db = Database::open(dir.path(), DbOptions::default()).unwrap();
    let names: Vec<String> = db.roles().into_iter().map(|r| r.name).collect();
    assert_eq!(names, ["ann", "bob"]);
    let ann = db.role("ann").unwrap();
    assert!(ann.login);
    assert!(ann.grants.contains_key("t"));
    assert!(
        !ann.grants.contains_key("u"),
        "grants on a dropped dataset go with it"
    );
    assert!(ann.privileges_on("t").read && !ann.privileges_on("t").write);
    db.drop_role("bob").unwrap();
    assert!(matches!(db.drop_role("bob"), Err(Error::NoSuchRole(_))));
    assert!(db.role("bob").is_none());
}
