//! The text form: parse/Display round trips, accepted forms, errors.

use super::*;

#[test]
fn parse_display_round_trip() {
    let policies = [
        MergePolicy::NoMerge,
        MergePolicy::Constant { k: 5 },
        MergePolicy::default(),
        MergePolicy::Prefix {
            max_mergable_bytes: 12345,
            max_tolerance_count: 7,
        },
        MergePolicy::Prefix {
            max_mergable_bytes: 3 * MIB,
            max_tolerance_count: 2,
        },
        MergePolicy::Binomial { k: 4 },
        MergePolicy::Tiered { b: 4 },
        MergePolicy::default_concurrent(),
        MergePolicy::Concurrent {
            k: 12,
            c: 2,
            d: 5,
            lambda: 0.75,
        },
        MergePolicy::default_leveled(),
        MergePolicy::Leveled {
            l0_trigger: 8,
            fanout: 4,
            target_file_bytes: 1536 * KIB,
            l1_bytes: 1000,
            partitioning: Partitioning::Size,
            pick: Pick::MinOverlap,
        },
    ];
    for p in policies {
        let text = p.to_string();
        assert_eq!(MergePolicy::parse(&text).unwrap(), p, "{text}");
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(
            serde_json::from_str::<MergePolicy>(&json).unwrap(),
            p,
            "{json}"
        );
    }
}

#[test]
fn parse_accepted_forms() {
    let ok = |s: &str| MergePolicy::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
    assert_eq!(ok("no-merge"), MergePolicy::NoMerge);
    assert_eq!(ok(" No_Merge "), MergePolicy::NoMerge);
    assert_eq!(ok("constant(5)"), MergePolicy::Constant { k: 5 });
    assert_eq!(ok("prefix(1GB,5)"), MergePolicy::default());
    assert_eq!(ok("prefix"), MergePolicy::default());
    assert_eq!(ok("PREFIX( 1gb , 5 )"), MergePolicy::default());
    assert_eq!(ok("prefix(1073741824,5)"), MergePolicy::default());
    assert_eq!(ok("prefix(1073741824B,5)"), MergePolicy::default());
    assert_eq!(ok("prefix(1048576kb,5)"), MergePolicy::default());
    assert_eq!(ok("prefix(1024 MB,5)"), MergePolicy::default());
    assert_eq!(ok("binomial(4)"), MergePolicy::Binomial { k: 4 });
    assert_eq!(ok("tiered(4)"), MergePolicy::Tiered { b: 4 });
    assert_eq!(ok("concurrent"), MergePolicy::default_concurrent());
    assert_eq!(
        ok("concurrent(30,3,10,1.2)"),
        MergePolicy::default_concurrent()
    );
    assert_eq!(ok("leveled"), MergePolicy::default_leveled());
    for part in ["str", "rstar_grove"] {
        let p = ok(&format!("leveled(4,10,64MB,256MB,{part})"));
        assert_eq!(p.to_string(), format!("leveled(4,10,64MB,256MB,{part})"));
        assert_eq!(ok(&p.to_string()), p);
    }
    assert_eq!(
        ok("leveled(4,10,64MB,256MB,size)"),
        ok("leveled(4,10,64MB,256MB)")
    );
    assert!(
        MergePolicy::parse("leveled(4,10,64MB,256MB,hexagons)")
            .unwrap_err()
            .to_string()
            .contains("size, str or rstar_grove")
    );
    assert_eq!(ok("leveled(4,10)"), MergePolicy::default_leveled());
    assert_eq!(ok("leveled(4,10,64MB)"), MergePolicy::default_leveled());
    assert_eq!(
        ok("leveled(4,10,64MB,256MB)"),
        MergePolicy::default_leveled()
    );
    assert_eq!(
        ok("leveled(2,5,1MB)"),
        MergePolicy::Leveled {
            l0_trigger: 2,
            fanout: 5,
            target_file_bytes: MIB,
            l1_bytes: 2 * MIB,
            partitioning: Partitioning::Size,
            pick: Pick::MinOverlap,
        }
    );
    assert_eq!(MergePolicy::default().to_string(), "prefix(1GB,5)");
    assert_eq!(
        MergePolicy::default_leveled().to_string(),
        "leveled(4,10,64MB,256MB)"
    );
    assert!(ok("leveled").is_leveled());
    assert!(!ok("tiered(3)").is_leveled());
}

#[test]
fn parse_errors() {
    for bad in [
        "",
        "prefix(",
        "prefix(1GB)",
        "prefix(1XB,5)",
        "prefix(GB,5)",
        "prefix(-1,5)",
        "prefix(99999999999TB,5)",
        "prefix(0,5)",
        "prefix(1GB,1)",
        "constant",
        "constant()",
        "constant(1)",
        "constant(x)",
        "binomial(0)",
        "tiered(1)",
        "tiered(4,4)",
        "concurrent(30,3,10)",
        "concurrent(30,3,10,nope)",
        "concurrent(30,3,2,1.2)",
        "concurrent(2,3,10,1.2)",
        "concurrent(30,3,10,-1)",
        "concurrent(30,3,10,NaN)",
        "concurrent(30,3,10,inf)",
        "leveled(4)",
        "leveled(0,10)",
        "leveled(4,1)",
        "leveled(4,10,0)",
        "leveled(4,10,64MB,0)",
        "leveled(4,10,64MB,1GB,7)",
        "lsm",
        "no-merge(1)",
    ] {
        match MergePolicy::parse(bad) {
            Err(Error::Config(msg)) => {
                assert!(msg.contains("accepted forms"), "{bad}: {msg}");
                assert!(msg.contains("prefix(1GB,5)"), "{bad}: {msg}");
            }
            other => panic!("{bad:?} parsed as {other:?}"),
        }
    }
}
