//! The PostGIS-named functions against known values: PostGIS documentation
//! examples, values worked by hand, and for geodesic measures the `geo`
//! crate's own algorithms (the oracle the functions must agree with).

use datafusion::arrow::array::{Array, AsArray};

use crate::common::*;

/// One value of a one-row query.
fn text(e: &silt_sql::SqlEngine, expr: &str) -> Option<String> {
    let b = run(e, &format!("SELECT {expr}"));
    strings(&b, 0).pop().flatten()
}

fn num(e: &silt_sql::SqlEngine, expr: &str) -> f64 {
    let b = run(e, &format!("SELECT {expr}"));
    floats(&b, 0)[0]
}

fn close(got: f64, want: f64, tol: f64, what: &str) {
    assert!(
        (got - want).abs() <= tol,
        "{what}: got {got}, want {want} (±{tol})"
    );
}

const SQ: &str = "'POLYGON((0 0,2 0,2 2,0 2,0 0))'";
const SQ2: &str = "'POLYGON((1 1,3 1,3 3,1 3,1 1))'";

#[test]
fn measurement_planar_and_on_the_earth() {
    let (_d, e) = engine();
    close(
        num(&e, "ST_Area('POLYGON((0 0,10 0,10 10,0 10,0 0))')"),
        100.0,
        0.0,
        "area",
    );
    // A hole is taken out.
    close(
        num(
            &e,
            "ST_Area('POLYGON((0 0,4 0,4 4,0 4,0 0),(1 1,2 1,2 2,1 2,1 1))')",
        ),
        15.0,
        1e-12,
        "area with a hole",
    );
    close(
        num(&e, "ST_Length('LINESTRING(0 0,3 4)')"),
        5.0,
        1e-12,
        "length",
    );
    // PostGIS: the length of a polygon is 0, its perimeter the rings'.
    close(
        num(&e, &format!("ST_Length({SQ})")),
        0.0,
        0.0,
        "length of a polygon",
    );
    close(
        num(&e, "ST_Perimeter(ST_MakeEnvelope(0, 0, 2, 3))"),
        10.0,
        1e-12,
        "perimeter",
    );
    close(
        num(&e, "ST_Perimeter('LINESTRING(0 0,3 4)')"),
        0.0,
        0.0,
        "perimeter of a line",
    );
    // On the sphere (mean radius): a 1°x1° box at the equator is
    // R² · Δλ · sin(1°), and a degree of meridian R · π/180.
    let r = 6_371_008.8_f64;
    let one = 1f64.to_radians();
    close(
        num(&e, "ST_Area(ST_MakeEnvelope(0, 0, 1, 1), false)"),
        r * r * one * one.sin(),
        1.0,
        "sphere area",
    );
    close(
        num(&e, "ST_Length('LINESTRING(0 0,0 1)', false)"),
        r * one,
        1e-6,
        "sphere length",
    );
    close(
        num(&e, "ST_DistanceSphere(ST_Point(0, 0), ST_Point(0, 1))"),
        r * one,
        1e-6,
        "distance on the sphere",
    );
    // On the WGS 84 spheroid: a degree of meridian from the equator is
    // 110,574.4 m; the area is the geo crate's geodesic area.
    close(
        num(&e, "ST_Length('LINESTRING(0 0,0 1)', true)"),
        110_574.4,
        0.1,
        "spheroid length",
    );
    let cell = geo::Rect::new(geo::coord! {x: 0.0, y: 0.0}, geo::coord! {x: 1.0, y: 1.0});
    let want = geo::GeodesicArea::geodesic_area_unsigned(&cell.to_polygon());
    close(
        num(&e, "ST_Area(ST_MakeEnvelope(0, 0, 1, 1), true)"),
        want,
        1e-3,
        "spheroid area",
    );
    // NULL in, NULL out.
    let b = run(
        &e,
        "SELECT ST_Area(NULL), ST_Buffer(NULL, 1), ST_Union(NULL, NULL)",
    );
    assert!((0..3).all(|i| b[0].column(i).is_null(0)));
}

#[test]
fn buffer_overlay_and_repair() {
    let (_d, e) = engine();
    // PostGIS: ST_Area(ST_Buffer(ST_Point(0,0), 1)) = 3.1214451522580524
    // (8 segments a quarter circle: a 32-gon inscribed in the circle).
    close(
        num(&e, "ST_Area(ST_Buffer(ST_Point(0, 0), 1))"),
        16.0 * (std::f64::consts::PI / 16.0).sin(),
        1e-9,
        "buffer of a point",
    );
    // quad_segs=2: an octagon, area 2·√2.
    close(
        num(&e, "ST_Area(ST_Buffer(ST_Point(0, 0), 1, 'quad_segs=2'))"),
        2.0 * 2f64.sqrt(),
        1e-9,
        "octagon",
    );
    // A flat-capped buffer of a segment of length 4 by 1: a 4x2 rectangle.
    close(
        num(
            &e,
            "ST_Area(ST_Buffer('LINESTRING(0 0,4 0)', 1, 'endcap=flat'))",
        ),
        8.0,
        1e-9,
        "flat cap",
    );
    // A negative radius shrinks a polygon.
    close(
        num(
            &e,
            "ST_Area(ST_Buffer(ST_MakeEnvelope(0, 0, 4, 4), -1, 'join=mitre'))",
        ),
        4.0,
        1e-9,
        "inner buffer",
    );
    assert_eq!(
        text(&e, "ST_GeometryType(ST_Buffer(ST_Point(0, 0), 1))").as_deref(),
        Some("ST_Polygon")
    );
    // Two overlapping 2x2 squares.
    for (f, want) in [
        ("ST_Union", 7.0),
        ("ST_Intersection", 1.0),
        ("ST_Difference", 3.0),
        ("ST_SymDifference", 6.0),
    ] {
        close(
            num(&e, &format!("ST_Area({f}({SQ}, {SQ2}))")),
            want,
            1e-9,
            f,
        );
    }
    // Disjoint squares unite into a multi-polygon; squares that do not
    // meet have an empty intersection.
    let u = text(
        &e,
        &format!("ST_Union({SQ}, 'POLYGON((5 5,6 5,6 6,5 6,5 5))')"),
    )
    .unwrap();
    assert!(u.starts_with("MULTIPOLYGON"), "{u}");
    let i = text(
        &e,
        &format!("ST_Intersection({SQ}, 'POLYGON((5 5,6 5,6 6,5 6,5 5))')"),
    )
    .unwrap();
    assert!(i.contains("EMPTY"), "{i}");
    // Points, and lines clipped by a polygon.
    assert_eq!(
        text(&e, "ST_AsText(ST_Union(ST_Point(1, 2), ST_Point(1, 2)))").as_deref(),
        Some("POINT(1 2)")
    );
    assert_eq!(
        num(
            &e,
            &format!("ST_Length(ST_Intersection('LINESTRING(-1 1,3 1)', {SQ}))")
        ),
        2.0
    );
    assert_eq!(
        num(
            &e,
            &format!("ST_Length(ST_Difference('LINESTRING(-1 1,3 1)', {SQ}))")
        ),
        2.0
    );
    // ST_Collect keeps both as they are.
    let c = text(&e, "ST_Collect(ST_Point(1, 2), ST_Point(3, 4))").unwrap();
    assert_eq!(c, "MULTIPOINT((1 2),(3 4))");
    // A bow tie: invalid, repaired into two triangles of area 1 each.
    let bow = "'POLYGON((0 0,2 2,2 0,0 2,0 0))'";
    let b = run(&e, &format!("SELECT ST_IsValid({bow}), ST_IsValid({SQ})"));
    assert!(!b[0].column(0).as_boolean().value(0));
    assert!(b[0].column(1).as_boolean().value(0));
    let fixed = text(&e, &format!("ST_MakeValid({bow})")).unwrap();
    assert!(fixed.starts_with("MULTIPOLYGON"), "{fixed}");
    close(
        num(&e, &format!("ST_Area(ST_MakeValid({bow}))")),
        2.0,
        1e-9,
        "repaired",
    );
    let b = run(&e, &format!("SELECT ST_IsValid(ST_MakeValid({bow}))"));
    assert!(b[0].column(0).as_boolean().value(0));
}

#[test]
fn closest_points_transforms_and_any_kind_of_geometry() {
    let (_d, e) = engine();
    assert_eq!(
        text(
            &e,
            "ST_AsText(ST_ClosestPoint('LINESTRING(0 0,10 0)', ST_Point(3, 5)))"
        )
        .as_deref(),
        Some("POINT(3 0)")
    );
    assert_eq!(
        text(
            &e,
            "ST_AsText(ST_ClosestPoint(ST_Point(3, 5), 'LINESTRING(0 0,10 0)'))"
        )
        .as_deref(),
        Some("POINT(3 5)")
    );
    // Two lines that cross: the crossing.
    assert_eq!(
        text(
            &e,
            "ST_AsText(ST_ClosestPoint('LINESTRING(0 0,2 2)', 'LINESTRING(0 2,2 0)'))"
        )
        .as_deref(),
        Some("POINT(1 1)")
    );
    // Disjoint lines: the end of `a` nearest `b`.
    assert_eq!(
        text(
            &e,
            "ST_AsText(ST_ClosestPoint('LINESTRING(0 0,1 0)', 'LINESTRING(3 -1,3 1)'))"
        )
        .as_deref(),
        Some("POINT(1 0)")
    );
    // Web Mercator of (1, 1), and back.
    let b = run(
        &e,
        "SELECT ST_X(ST_Transform(ST_Point(1, 1), 3857)), ST_Y(ST_Transform(ST_Point(1, 1), 3857))",
    );
    close(floats(&b, 0)[0], 111_319.490_793_273_57, 1e-6, "mercator x");
    close(floats(&b, 1)[0], 111_325.142_866_384_86, 1e-6, "mercator y");
    let b = run(
        &e,
        "SELECT ST_X(ST_Transform(ST_Transform(ST_Point(12.5, 41.9), 3857), 3857, 4326)), \
                ST_Y(ST_Transform(ST_Transform(ST_Point(12.5, 41.9), 3857), 3857, 4326))",
    );
    close(floats(&b, 0)[0], 12.5, 1e-9, "round trip x");
    close(floats(&b, 1)[0], 41.9, 1e-9, "round trip y");
    // Lines and multi-geometries go through the predicates and distances.
    let b = run(
        &e,
        "SELECT ST_Intersects('LINESTRING(0 0,2 2)', ST_MakeEnvelope(1, 0, 3, 1.5)), \
                ST_Intersects('LINESTRING(0 0,2 2)', ST_MakeEnvelope(1, 0, 3, 0.5)), \
                ST_Contains('MULTIPOLYGON(((0 0,1 0,1 1,0 1,0 0)),((5 5,6 5,6 6,5 6,5 5)))', ST_Point(5.5, 5.5)), \
                ST_DWithin('LINESTRING(0 0,0 1)', ST_Point(1, 0.5), 112000)",
    );
    let bools: Vec<bool> = (0..4)
        .map(|i| b[0].column(i).as_boolean().value(0))
        .collect();
    assert_eq!(bools, vec![true, false, true, true]);
    close(
        num(&e, "ST_Distance('LINESTRING(0 0,0 1)', ST_Point(1, 0.5))"),
        silt::geo::sphere::haversine_m(1.0, 0.5, 0.0, 0.5),
        1.0,
        "distance to a line",
    );
    assert_eq!(
        text(&e, "ST_AsGeoJSON('LINESTRING(0 0,1 1)')").as_deref(),
        Some(r#"{"coordinates":[[0.0,0.0],[1.0,1.0]],"type":"LineString"}"#)
    );
    assert_eq!(
        text(
            &e,
            "ST_AsText(ST_GeomFromText('SRID=4326;LINESTRING(0 0,1 1)'))"
        )
        .as_deref(),
        Some("LINESTRING(0 0,1 1)")
    );
}

/// `ST_GeomFromGeoJSON` reads every GeoJSON geometry type (RFC 7946
/// §3.1), and `ST_AsGeoJSON` writes it back the same.
#[test]
fn geojson_of_every_geometry_type() {
    let (_d, e) = engine();
    let cases = [
        (r#"{"type":"Point","coordinates":[3,4]}"#, "POINT(3 4)"),
        (
            r#"{"type":"LineString","coordinates":[[0,0],[1,1],[2,0.5]]}"#,
            "LINESTRING(0 0,1 1,2 0.5)",
        ),
        (
            r#"{"type":"MultiPoint","coordinates":[[0,0],[1,2]]}"#,
            "MULTIPOINT((0 0),(1 2))",
        ),
        (
            r#"{"type":"MultiLineString","coordinates":[[[0,0],[1,1]],[[2,2],[3,3]]]}"#,
            "MULTILINESTRING((0 0,1 1),(2 2,3 3))",
        ),
        (
            r#"{"type":"Polygon","coordinates":[[[0,0],[2,0],[2,2],[0,2],[0,0]]]}"#,
            // Silt's own polygons (those it stores) print a space after
            // each comma.
            "POLYGON((0 0, 2 0, 2 2, 0 2, 0 0))",
        ),
        (
            r#"{"type":"MultiPolygon","coordinates":[[[[0,0],[1,0],[1,1],[0,0]]],[[[5,5],[6,5],[6,6],[5,5]]]]}"#,
            "MULTIPOLYGON(((0 0,1 0,1 1,0 0)),((5 5,6 5,6 6,5 5)))",
        ),
        (
            r#"{"type":"GeometryCollection","geometries":[{"type":"Point","coordinates":[1,2]},{"type":"LineString","coordinates":[[0,0],[1,1]]}]}"#,
            "GEOMETRYCOLLECTION(POINT(1 2),LINESTRING(0 0,1 1))",
        ),
    ];
    for (json, wkt) in cases {
        let got = text(&e, &format!("ST_AsText(ST_GeomFromGeoJSON('{json}'))"));
        assert_eq!(got.as_deref(), Some(wkt), "{json}");
        // Written back as GeoJSON and read again: the same geometry.
        let again = text(
            &e,
            &format!("ST_AsText(ST_GeomFromGeoJSON(ST_AsGeoJSON(ST_GeomFromGeoJSON('{json}'))))"),
        );
        assert_eq!(again.as_deref(), Some(wkt), "{json} round trip");
    }
    // It goes on through the other functions as any geometry does.
    close(
        num(
            &e,
            r#"ST_Length(ST_GeomFromGeoJSON('{"type":"LineString","coordinates":[[0,0],[3,4]]}'))"#,
        ),
        5.0,
        1e-12,
        "planar length of a GeoJSON line",
    );
    assert_eq!(text(&e, "ST_AsText(ST_GeomFromGeoJSON('null'))"), None);
    // Bad GeoJSON: an error naming what is wrong, for each type.
    for (json, says) in [
        (
            r#"{"type":"LineString","coordinates":[[0,0],[1]]}"#,
            "LineString",
        ),
        (r#"{"type":"MultiPoint","coordinates":5}"#, "MultiPoint"),
        (r#"{"type":"GeometryCollection"}"#, "GeometryCollection"),
        (
            r#"{"type":"MultiPolygon","coordinates":[[[[0,0],[1,0]]]],"#,
            "JSON",
        ),
        (r#"{"type":"Feature","geometry":null}"#, "Feature"),
    ] {
        let msg = fail(&e, &format!("SELECT ST_GeomFromGeoJSON('{json}')"));
        assert!(msg.contains("ST_GeomFromGeoJSON"), "{json}: {msg}");
        assert!(msg.contains(says), "{json}: {msg}");
    }
}

#[test]
fn functions_of_geodatafusion_give_wkt() {
    let (_d, e) = engine();
    assert_eq!(
        text(&e, &format!("ST_AsText(ST_Centroid({SQ}))")).as_deref(),
        Some("POINT(1 1)")
    );
    assert_eq!(
        text(&e, "ST_Centroid(ST_Point(3, 4))").as_deref(),
        Some("POINT(3 4)")
    );
    let env = text(&e, "ST_Envelope('LINESTRING(0 0,2 3)')").unwrap();
    close(
        num(&e, &format!("ST_Area('{env}')")),
        6.0,
        1e-12,
        "envelope",
    );
    assert_eq!(
        text(&e, "ST_GeometryType('LINESTRING(0 0,1 1)')").as_deref(),
        Some("ST_LineString")
    );
    let b = run(&e, "SELECT ST_NPoints('LINESTRING(0 0,1 1,2 0)')");
    assert_eq!(b[0].column(0).len(), 1);
    // ST_AsBinary is WKB (little-endian point 1, 2), and reads back.
    let b = run(&e, "SELECT ST_AsBinary(ST_Point(1, 2))");
    let wkb = b[0].column(0).as_binary::<i32>().value(0).to_vec();
    assert_eq!(
        wkb,
        [
            1u8, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0, 0, 0, 0, 0, 0, 0, 0x40
        ]
    );
    assert_eq!(
        text(&e, "ST_AsText(ST_GeomFromWKB(ST_AsBinary(ST_Point(1, 2))))").as_deref(),
        Some("POINT(1 2)")
    );
    // ST_Simplify drops the middle vertex of a nearly straight line.
    assert_eq!(
        text(&e, "ST_Simplify('LINESTRING(0 0,5 0.1,10 0)', 1)").as_deref(),
        Some("LINESTRING(0 0,10 0)")
    );
    // A geometry result of geodatafusion feeds Silt's functions.
    let b = run(
        &e,
        &format!("SELECT ST_Intersects(ST_Centroid({SQ}), ST_MakeEnvelope(0.5, 0.5, 1.5, 1.5))"),
    );
    assert!(b[0].column(0).as_boolean().value(0));
}

#[test]
fn bad_input_is_a_clear_error() {
    let (_d, e) = engine();
    for (sql, says) in [
        ("SELECT ST_Area('LINESTRING(0 0')", "ST_Area"),
        ("SELECT ST_Area('LINESTRING(0 0, 1 1')", "invalid WKT"),
        (
            "SELECT ST_Buffer(ST_Point(0, 0), 1, 'quad_segs=x')",
            "quad_segs",
        ),
        (
            "SELECT ST_Buffer(ST_Point(0, 0), 1, 'endcap=pointy')",
            "endcap",
        ),
        ("SELECT ST_Transform(ST_Point(0, 0), 2154)", "SRID 2154"),
        ("SELECT ST_Transform(ST_Point(0, 89), 3857)", "web Mercator"),
        (
            "SELECT ST_Union('LINESTRING(0 0,1 1)', ST_Point(0, 0))",
            "not supported",
        ),
        ("SELECT ST_Area(1)", "must be a geometry"),
        ("SELECT ST_Buffer(ST_Point(0, 0))", "takes 2 to 3 argument"),
        (
            "SELECT ST_Centroid('POLYGON((0 0')",
            "ST_Centroid(geometry)",
        ),
    ] {
        let msg = fail(&e, sql);
        assert!(msg.contains(says), "{sql}: {msg}");
    }
}

/// Every spatial function, with each kind of geometry (empty ones too),
/// NULL, and awkward numbers in every position: a value or an error,
/// never a panic (which would abort the statement's thread).
#[test]
fn every_function_survives_awkward_arguments() {
    let (_d, e) = engine();
    let geoms = [
        "'POINT(1 2)'",
        "'LINESTRING(0 0,1 1,2 0)'",
        "'POLYGON((0 0,2 0,2 2,0 2,0 0))'",
        "'MULTIPOINT((0 0),(1 1))'",
        "'MULTILINESTRING((0 0,1 1),(2 2,3 3))'",
        "'MULTIPOLYGON(((0 0,1 0,1 1,0 1,0 0)),((5 5,6 5,6 6,5 6,5 5)))'",
        "'GEOMETRYCOLLECTION(POINT(1 1),LINESTRING(0 0,1 1))'",
        "'POINT EMPTY'",
        "'LINESTRING EMPTY'",
        "'POLYGON EMPTY'",
        "'GEOMETRYCOLLECTION EMPTY'",
        "'POLYGON((0 0,2 2,2 0,0 2,0 0))'",
        "'not wkt'",
        "NULL",
    ];
    let others = ["-1", "1e308", "NULL"];
    let mut names: Vec<String> = silt_sql::udf::all_udfs()
        .iter()
        .map(|f| f.name().to_owned())
        .filter(|n| n.starts_with("st_") || n.contains("box"))
        .collect();
    names.sort();
    assert!(names.len() > 40, "{names:?}");
    let mut answered = 0;
    let mut failed_inside = std::collections::BTreeSet::new();
    for name in &names {
        // Every geometry alone and with each other argument; a few with
        // every geometry, and as the last argument.
        for (i, g) in geoms.iter().enumerate() {
            let mut calls = vec![format!("{name}({g})")];
            for o in others {
                calls.push(format!("{name}({g}, {o})"));
            }
            if i % 7 == 2 {
                for o in others {
                    calls.push(format!("{name}({o}, {g})"));
                    calls.push(format!("{name}({g}, {g}, {o})"));
                }
                for g2 in geoms {
                    calls.push(format!("{name}({g}, {g2})"));
                }
            }
            for c in calls {
                match e.execute_blocking(&format!("SELECT {c}")) {
                    Ok(_) => answered += 1,
                    Err(err) if err.to_string().contains("geodatafusion failed") => {
                        failed_inside.insert(name.clone());
                    }
                    Err(_) => {}
                }
            }
        }
    }
    assert!(answered > 500, "only {answered} calls answered");
    eprintln!("functions that panicked inside geodatafusion (caught): {failed_inside:?}");
}

#[test]
fn aggregates_unite_collect_and_bound_groups() {
    let (_d, e) = engine();
    run(
        &e,
        "CREATE TABLE parcels (id BIGINT PRIMARY KEY, g BIGINT, geom GEOMETRY) WITH (partitions = 2)",
    );
    // Group 1: two overlapping 2x2 squares (union 7) and a disjoint unit
    // square far away; group 2: points, one twice; group 3: only NULL.
    let mut rows = vec![
        format!("(1, 1, {SQ})"),
        format!("(2, 1, {SQ2})"),
        "(3, 1, 'POLYGON((10 10,11 10,11 11,10 11,10 10))')".to_owned(),
        "(4, 2, ST_Point(1, 1))".to_owned(),
        "(5, 2, ST_Point(1, 1))".to_owned(),
        "(6, 2, ST_Point(2, 3))".to_owned(),
        "(7, 3, NULL)".to_owned(),
    ];
    // Enough rows to split the scan and merge partial states.
    for i in 0..400 {
        rows.push(format!(
            "({}, 4, ST_MakeEnvelope({i}, 0, {}, 1))",
            100 + i,
            i + 1
        ));
    }
    run(
        &e,
        &format!("INSERT INTO parcels VALUES {}", rows.join(", ")),
    );
    let b = run(
        &e,
        "SELECT g, ST_Area(ST_Union(geom)), ST_Collect(geom), ST_Extent(geom) \
         FROM parcels GROUP BY g ORDER BY g",
    );
    assert_eq!(ints(&b, 0), vec![1, 2, 3, 4]);
    let areas = b[0]
        .column(1)
        .as_primitive::<datafusion::arrow::datatypes::Float64Type>();
    close(areas.value(0), 8.0, 1e-9, "union of group 1");
    assert!(areas.is_null(2), "a group of NULLs");
    close(areas.value(3), 400.0, 1e-6, "400 adjacent boxes");
    let collected = strings(&b, 2);
    assert!(
        collected[0]
            .as_deref()
            .is_some_and(|c| c.starts_with("MULTIPOLYGON"))
    );
    assert_eq!(
        collected[1].as_deref().map(|c| c.matches('(').count()),
        Some(4)
    );
    let extents = strings(&b, 3);
    assert_eq!(
        extents[0].as_deref(),
        Some("POLYGON((0 0, 11 0, 11 11, 0 11, 0 0))")
    );
    assert_eq!(
        extents[3].as_deref(),
        Some("POLYGON((0 0, 400 0, 400 1, 0 1, 0 0))")
    );
    // The union of points is the set of points; one box's union is itself.
    let b = run(
        &e,
        "SELECT ST_AsText(ST_Union(geom)) FROM parcels WHERE g = 2",
    );
    assert_eq!(
        strings(&b, 0),
        vec![Some("MULTIPOINT((1 1),(2 3))".to_owned())]
    );
    assert_eq!(b[0].schema().field(0).name(), "st_astext");
    let b = run(&e, "SELECT ST_Union(geom) FROM parcels WHERE id = 3");
    assert_eq!(b[0].schema().field(0).name(), "st_union");
    let one = strings(&b, 0).pop().flatten().expect("a union");
    assert!(one.starts_with("POLYGON(("), "{one}");
    close(num(&e, &format!("ST_Area('{one}')")), 1.0, 1e-12, "one box");
    let env = num(&e, &format!("ST_Area(ST_Envelope('{one}'))"));
    close(env, 1.0, 1e-12, "the same box");
    // The two-argument form is still the scalar one.
    close(
        num(&e, &format!("ST_Area(ST_Union({SQ}, {SQ2}))")),
        7.0,
        1e-9,
        "scalar",
    );
    // Mixed kinds, bad text: clear errors.
    let msg = fail(&e, "SELECT ST_Union(geom) FROM parcels WHERE g IN (1, 2)");
    assert!(msg.contains("mixes kinds"), "{msg}");
    for agg in ["ST_Union", "ST_Collect", "ST_Extent"] {
        let msg = fail(
            &e,
            &format!("SELECT {agg}(x) FROM (VALUES ('not wkt')) t(x)"),
        );
        assert!(msg.contains(agg) && msg.contains("not wkt"), "{msg}");
        let msg = fail(&e, &format!("SELECT {agg}(x) FROM (VALUES (1)) t(x)"));
        assert!(msg.contains("one geometry"), "{msg}");
    }
}
