//! Tests of the durability mode's text and serde forms.

use super::*;

#[test]
fn durability_text_and_serde() {
    for (s, d) in [
        ("sync", Durability::Sync),
        ("none", Durability::None),
        ("batched(5)", Durability::Batched { interval_ms: 5 }),
    ] {
        assert_eq!(s.parse::<Durability>().unwrap(), d);
        assert_eq!(d.to_string(), s);
        let json = serde_json::to_string(&d).unwrap();
        assert_eq!(json, format!("\"{s}\""));
        assert_eq!(serde_json::from_str::<Durability>(&json).unwrap(), d);
    }
    assert_eq!(
        " Batched ".parse::<Durability>().unwrap(),
        Durability::Batched {
            interval_ms: DEFAULT_BATCH_INTERVAL_MS
        }
    );
    assert_eq!(
        "batched( 20 )".parse::<Durability>().unwrap(),
        Durability::Batched { interval_ms: 20 }
    );
    for bad in [
        "",
        "fast",
        "batched()",
        "batched(0)",
        "batched(x)",
        "batched(5",
    ] {
        assert!(
            matches!(bad.parse::<Durability>(), Err(Error::Config(_))),
            "{bad}"
        );
    }
    assert!(serde_json::from_str::<Durability>("\"sometimes\"").is_err());
    assert_eq!(Durability::default(), Durability::Sync);
}
