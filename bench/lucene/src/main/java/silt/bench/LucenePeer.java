package silt.bench;

import java.io.BufferedInputStream;
import java.io.BufferedReader;
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Stream;

import org.apache.lucene.document.Document;
import org.apache.lucene.document.LatLonPoint;
import org.apache.lucene.document.NumericDocValuesField;
import org.apache.lucene.document.StoredField;
import org.apache.lucene.index.DirectoryReader;
import org.apache.lucene.index.IndexWriter;
import org.apache.lucene.index.IndexWriterConfig;
import org.apache.lucene.index.LeafReaderContext;
import org.apache.lucene.index.NumericDocValues;
import org.apache.lucene.index.ReaderUtil;
import org.apache.lucene.index.StoredFields;
import org.apache.lucene.sandbox.search.LatLonPointPrototypeQueries;
import org.apache.lucene.search.IndexSearcher;
import org.apache.lucene.search.ScoreDoc;
import org.apache.lucene.search.ScoreMode;
import org.apache.lucene.search.SimpleCollector;
import org.apache.lucene.search.TopFieldDocs;
import org.apache.lucene.store.Directory;
import org.apache.lucene.store.FSDirectory;
import org.apache.lucene.util.Version;

/**
 * The Lucene peer of silt-bench's spatial-rtree workload.
 *
 * <p>Usage: {@code java -jar silt-lucene-peer.jar RECORDS.bin QUERIES.txt OUT.txt INDEX_DIR}
 *
 * <p>RECORDS.bin (big-endian, written by the harness): per record, id (i64), lon (f64), lat
 * (f64), the byte length (i32) and UTF-8 bytes of the record's JSON. QUERIES.txt: lines {@code k
 * K}, {@code check C}, {@code joincheck JC}, {@code warmup W}, then for each selectivity {@code
 * sel LABEL N} followed by N lines {@code min_lon min_lat max_lon max_lat} (min_lon &gt; max_lon
 * crosses the antimeridian), then {@code knn M} followed by M lines {@code lon lat}, then {@code
 * radius METRES R} followed by R lines {@code lon lat} (the centres), then {@code join METRES J}
 * followed by J lines {@code lon1 lat1 lon2 lat2 ...} (the probe points of one join each).
 *
 * <p>One document per record: LatLonPoint "loc" (the BKD tree; coordinates quantized to 32-bit
 * integers), numeric doc values "id", "lon", "lat" (the exact doubles' bits) and the stored JSON
 * "rec". Ingest: addDocument for every record (64 MiB RAM buffer, default merge policy), then
 * commit. Queries run after the commit (several segments) and again after forceMerge(1), each
 * phase after a warm-up pass over the first W queries of every kind (untimed), each query timed
 * alone with System.nanoTime. Because the BKD tree holds quantized coordinates, a box query asks
 * for the box grown by 1e-6 degrees and keeps the hits whose exact coordinates (doc values) are
 * inside, so answers are exact; kNN takes LatLonPointPrototypeQueries.nearest's k hits (sloppy
 * haversine on quantized points) as candidates, and one more box query, the box bounding the
 * circle of their k-th exact great-circle distance, gives every record that can be among the k
 * nearest, ranked by exact great-circle distance. A radius query is LatLonPoint.newDistanceQuery
 * with the radius grown by {@link #SLACK_M} (the same reason: the tree holds quantized points),
 * keeping the hits whose exact coordinates are within the radius by the harness's great-circle
 * formula ({@link #haversineM}); a join is an index nested loop, one such distance query per
 * probe point, its answer the (probe, record) pairs (each distance query builds its own relation
 * grid, GeoEncodingUtils.createDistancePredicate: a fixed cost per probe, whatever the result
 * count). A join is one timed query; its warm-up counts
 * its probe searches, so the first ceil(W / probes) joins are run untimed. "Index-only" reads the
 * doc values only; "with records" also loads each hit's stored JSON (for joins, once per pair).
 *
 * <p>OUT.txt: {@code M key value} metadata lines; {@code L phase fetch kind ns...} latencies;
 * {@code T phase fetch kind total} result totals; {@code C phase fetch kind count:idsum...} the
 * first C rectangle answers; {@code D phase fetch j d1 d2 ...} the first C kNN distances. The
 * radius and join queries report under the kinds {@code radius} and {@code join} (L, T, C lines;
 * their totals are records and pairs; C lines hold the first C radius and the first JC join
 * answers; id sums wrap like Java's long addition).
 */
public final class LucenePeer {
  static final double EARTH_RADIUS_M = 6371008.8;
  /** Growth of every box sent to the BKD tree, degrees (LatLonPoint quantizes to ~1e-7). */
  static final double GROW = 1e-6;

  /**
   * Growth of every radius sent to the BKD tree, metres. LatLonPoint rounds each coordinate down
   * to a 32-bit grid (steps of 180 / 2^32 degree of latitude, 4.7 mm, and 360 / 2^32 degree of
   * longitude, up to 9.3 mm), so an indexed point lies up to ~1.05 cm from the exact one, and
   * LatLonPointDistanceQuery tests it with a sloppy haversine on a radius of 6,371,008.7714 m
   * (slightly below the harness's 6,371,008.8: its distances are never larger). 5 cm covers the
   * quantization with room for the sloppy arithmetic (well under a millimetre at these radii); the
   * exact filter on the doc-value coordinates then removes what the slack lets in.
   */
  static final double SLACK_M = 0.05;

  private LucenePeer() {}

  static double haversineM(double lon1, double lat1, double lon2, double lat2) {
    double p1 = Math.toRadians(lat1);
    double p2 = Math.toRadians(lat2);
    double s1 = Math.sin(p1);
    double c1 = Math.cos(p1);
    double s2 = Math.sin(p2);
    double c2 = Math.cos(p2);
    double dl = Math.toRadians(lon2 - lon1);
    double sdl = Math.sin(dl);
    double cdl = Math.cos(dl);
    double y = Math.hypot(c2 * sdl, c1 * s2 - s1 * c2 * cdl);
    double x = s1 * s2 + c1 * c2 * cdl;
    return EARTH_RADIUS_M * Math.atan2(y, x);
  }

  /** A box as one or two boxes that do not cross the antimeridian. */
  static List<double[]> split(double[] r) {
    List<double[]> out = new ArrayList<>(2);
    if (r[0] > r[2]) {
      out.add(new double[] {r[0], r[1], 180.0, r[3]});
      out.add(new double[] {-180.0, r[1], r[2], r[3]});
    } else {
      out.add(r);
    }
    return out;
  }

  /** Boxes covering every point within {@code metres} of (lon, lat). */
  static List<double[]> circleBoxes(double lon, double lat, double metres) {
    final double margin = 1e-9;
    double ang = metres / EARTH_RADIUS_M;
    double dlat = Math.toDegrees(ang) + margin;
    double y0 = lat - dlat;
    double y1 = lat + dlat;
    List<double[]> out = new ArrayList<>(2);
    if (y0 <= -90.0 || y1 >= 90.0 || ang >= Math.PI / 2) {
      out.add(new double[] {-180.0, Math.max(y0, -90.0), 180.0, Math.min(y1, 90.0)});
      return out;
    }
    double s = Math.max(-1.0, Math.min(1.0, Math.sin(ang) / Math.cos(Math.toRadians(lat))));
    double dlon = Math.toDegrees(Math.asin(s)) + margin;
    if (dlon >= 180.0) {
      out.add(new double[] {-180.0, y0, 180.0, y1});
      return out;
    }
    double x0 = lon - dlon;
    double x1 = lon + dlon;
    if (x0 < -180.0) {
      x0 += 360.0;
    }
    if (x1 > 180.0) {
      x1 -= 360.0;
    }
    return split(new double[] {x0, y0, x1, y1});
  }

  /**
   * Collects the hits of one search whose exact coordinates (doc values) are inside the shape of
   * the subclass: count, id sum and (with records) the stored JSON's length.
   */
  abstract static class Exact extends SimpleCollector {
    boolean fetch;
    long count;
    long idSum;
    long bytes;
    private NumericDocValues id;
    private NumericDocValues lon;
    private NumericDocValues lat;
    private StoredFields stored;
    private int docBase;

    /** Whether the exact point (x = lon, y = lat) is part of the answer. */
    abstract boolean inside(double x, double y);

    /** Called for every hit inside the shape (global doc number). */
    void hit(long id, double x, double y, int globalDoc) {}

    @Override
    protected void doSetNextReader(LeafReaderContext ctx) throws IOException {
      id = ctx.reader().getNumericDocValues("id");
      lon = ctx.reader().getNumericDocValues("lon");
      lat = ctx.reader().getNumericDocValues("lat");
      stored = fetch ? ctx.reader().storedFields() : null;
      docBase = ctx.docBase;
    }

    @Override
    public void collect(int doc) throws IOException {
      if (!lon.advanceExact(doc) || !lat.advanceExact(doc) || !id.advanceExact(doc)) {
        throw new IOException("document " + doc + " lacks its doc values");
      }
      double x = Double.longBitsToDouble(lon.longValue());
      double y = Double.longBitsToDouble(lat.longValue());
      if (!inside(x, y)) {
        return;
      }
      long v = id.longValue();
      count++;
      idSum += v;
      hit(v, x, y, docBase + doc);
      if (fetch) {
        Document d = stored.document(doc);
        String rec = d.get("rec");
        if (rec == null) {
          throw new IOException("document " + doc + " lacks its stored record");
        }
        bytes += rec.length();
      }
    }

    @Override
    public ScoreMode scoreMode() {
      return ScoreMode.COMPLETE_NO_SCORES;
    }
  }

  /** The hits of box queries whose exact coordinates are inside the box (edges included). */
  static final class ExactBox extends Exact {
    double x0;
    double y0;
    double x1;
    double y1;
    /** Keep (id, lon, lat) and the global doc of every hit (kNN candidates). */
    boolean keep;
    final List<double[]> kept = new ArrayList<>();
    final List<Integer> keptDocs = new ArrayList<>();

    void reset(double[] b, boolean fetch, boolean keep) {
      this.x0 = b[0];
      this.y0 = b[1];
      this.x1 = b[2];
      this.y1 = b[3];
      this.fetch = fetch;
      this.keep = keep;
    }

    @Override
    boolean inside(double x, double y) {
      return x >= x0 && x <= x1 && y >= y0 && y <= y1;
    }

    @Override
    void hit(long id, double x, double y, int globalDoc) {
      if (keep) {
        kept.add(new double[] {id, x, y});
        keptDocs.add(globalDoc);
      }
    }
  }

  /**
   * The hits of distance queries whose exact coordinates are within the radius by the harness's
   * great-circle distance (edges included); accumulates over the probes of a join.
   */
  static final class ExactCircle extends Exact {
    double lon;
    double lat;
    double metres;

    void reset(double lon, double lat, double metres, boolean fetch) {
      this.lon = lon;
      this.lat = lat;
      this.metres = metres;
      this.fetch = fetch;
    }

    @Override
    boolean inside(double x, double y) {
      // The centre first, as in the harness's oracle (bit-identical distances).
      return haversineM(lon, lat, x, y) <= metres;
    }
  }

  static final class Sel {
    final String label;
    final double[][] rects;

    Sel(String label, double[][] rects) {
      this.label = label;
      this.rects = rects;
    }
  }

  static int k;
  static int check;
  static int joinCheck;
  static int warmup;
  static final List<Sel> SELS = new ArrayList<>();
  static double[][] knnPoints;
  static double radiusM = Double.NaN;
  static double[][] radiusCentres;
  static double joinM = Double.NaN;
  /** Per join, its probe points as (lon, lat) pairs. */
  static double[][][] joinProbes;
  static long sink;

  static void readQueries(Path p) throws IOException {
    try (BufferedReader r = Files.newBufferedReader(p, StandardCharsets.UTF_8)) {
      String line;
      while ((line = r.readLine()) != null) {
        String[] f = line.trim().split("\\s+");
        if (f.length == 0 || f[0].isEmpty()) {
          continue;
        }
        switch (f[0]) {
          case "k" -> k = Integer.parseInt(f[1]);
          case "check" -> check = Integer.parseInt(f[1]);
          case "joincheck" -> joinCheck = Integer.parseInt(f[1]);
          case "warmup" -> warmup = Integer.parseInt(f[1]);
          case "sel" -> {
            int n = Integer.parseInt(f[2]);
            double[][] rects = new double[n][];
            for (int i = 0; i < n; i++) {
              rects[i] = parse(r.readLine(), 4);
            }
            SELS.add(new Sel(f[1], rects));
          }
          case "knn" -> {
            int n = Integer.parseInt(f[1]);
            knnPoints = new double[n][];
            for (int i = 0; i < n; i++) {
              knnPoints[i] = parse(r.readLine(), 2);
            }
          }
          case "radius" -> {
            radiusM = Double.parseDouble(f[1]);
            int n = Integer.parseInt(f[2]);
            radiusCentres = new double[n][];
            for (int i = 0; i < n; i++) {
              radiusCentres[i] = parse(r.readLine(), 2);
            }
          }
          case "join" -> {
            joinM = Double.parseDouble(f[1]);
            int n = Integer.parseInt(f[2]);
            joinProbes = new double[n][][];
            for (int i = 0; i < n; i++) {
              joinProbes[i] = parsePoints(r.readLine());
            }
          }
          default -> throw new IOException("unknown line in " + p + ": " + line);
        }
      }
    }
    if (knnPoints == null || k <= 0) {
      throw new IOException(p + " has no kNN queries or no k");
    }
    if (radiusCentres == null || !(radiusM >= 0) || joinProbes == null || !(joinM >= 0)) {
      throw new IOException(p + " has no radius or join queries (or a bad radius)");
    }
  }

  /** A line of (lon, lat) pairs. */
  static double[][] parsePoints(String line) throws IOException {
    if (line == null) {
      throw new EOFException("queries file ends early");
    }
    String[] f = line.trim().split("\\s+");
    if (f.length % 2 != 0 || f[0].isEmpty()) {
      throw new IOException("expected lon lat pairs: " + line);
    }
    double[][] out = new double[f.length / 2][];
    for (int i = 0; i < out.length; i++) {
      out[i] = new double[] {Double.parseDouble(f[2 * i]), Double.parseDouble(f[2 * i + 1])};
    }
    return out;
  }

  static double[] parse(String line, int n) throws IOException {
    if (line == null) {
      throw new EOFException("queries file ends early");
    }
    String[] f = line.trim().split("\\s+");
    if (f.length != n) {
      throw new IOException("expected " + n + " numbers: " + line);
    }
    double[] out = new double[n];
    for (int i = 0; i < n; i++) {
      out[i] = Double.parseDouble(f[i]);
    }
    return out;
  }

  static long ingest(IndexWriter w, Path records) throws IOException {
    long n = 0;
    try (DataInputStream in =
        new DataInputStream(new BufferedInputStream(Files.newInputStream(records), 1 << 20))) {
      while (true) {
        long id;
        try {
          id = in.readLong();
        } catch (EOFException e) {
          break;
        }
        double lon = in.readDouble();
        double lat = in.readDouble();
        int len = in.readInt();
        byte[] json = new byte[len];
        in.readFully(json);
        Document d = new Document();
        d.add(new LatLonPoint("loc", lat, lon));
        d.add(new NumericDocValuesField("id", id));
        d.add(new NumericDocValuesField("lon", Double.doubleToRawLongBits(lon)));
        d.add(new NumericDocValuesField("lat", Double.doubleToRawLongBits(lat)));
        d.add(new StoredField("rec", new String(json, StandardCharsets.UTF_8)));
        w.addDocument(d);
        n++;
      }
    }
    return n;
  }

  /** Runs the exact box search over one rectangle (split at the antimeridian). */
  static void rect(IndexSearcher s, ExactBox c, double[] r, boolean fetch, boolean keep)
      throws IOException {
    for (double[] b : split(r)) {
      c.reset(b, fetch, keep);
      s.search(
          LatLonPoint.newBoxQuery(
              "loc",
              Math.max(b[1] - GROW, -90.0),
              Math.min(b[3] + GROW, 90.0),
              Math.max(b[0] - GROW, -180.0),
              Math.min(b[2] + GROW, 180.0)),
          c);
    }
  }

  /** Adds to {@code c} the records within {@code metres} of (lon, lat), exactly. */
  static void within(
      IndexSearcher s, ExactCircle c, double lon, double lat, double metres, boolean fetch)
      throws IOException {
    c.reset(lon, lat, metres, fetch);
    s.search(LatLonPoint.newDistanceQuery("loc", lat, lon, metres + SLACK_M), c);
  }

  /** An index nested-loop join: one distance query per probe, the pairs accumulated in c. */
  static void spatialJoin(
      IndexSearcher s, ExactCircle c, double[][] probes, double metres, boolean fetch)
      throws IOException {
    for (double[] p : probes) {
      within(s, c, p[0], p[1], metres, fetch);
    }
  }

  /** Joins warmed up: as many probe searches as W queries of the other kinds, at least one. */
  static int joinWarmup() {
    int perJoin = Math.max(1, joinProbes.length > 0 ? joinProbes[0].length : 1);
    return Math.min(joinProbes.length, Math.max(1, (warmup + perJoin - 1) / perJoin));
  }

  /** Exact great-circle kNN: (id, metres) pairs nearest first, as a flat array. */
  static double[] knn(IndexSearcher s, double lon, double lat, boolean fetch) throws IOException {
    TopFieldDocs top = LatLonPointPrototypeQueries.nearest(s, "loc", lat, lon, k);
    List<LeafReaderContext> leaves = s.getIndexReader().leaves();
    double[] first = new double[top.scoreDocs.length];
    for (int i = 0; i < top.scoreDocs.length; i++) {
      ScoreDoc sd = top.scoreDocs[i];
      LeafReaderContext leaf = leaves.get(ReaderUtil.subIndex(sd.doc, leaves));
      NumericDocValues lonDv = leaf.reader().getNumericDocValues("lon");
      NumericDocValues latDv = leaf.reader().getNumericDocValues("lat");
      int doc = sd.doc - leaf.docBase;
      if (!lonDv.advanceExact(doc) || !latDv.advanceExact(doc)) {
        throw new IOException("document " + sd.doc + " lacks its doc values");
      }
      first[i] =
          haversineM(
              lon,
              lat,
              Double.longBitsToDouble(lonDv.longValue()),
              Double.longBitsToDouble(latDv.longValue()));
    }
    Arrays.sort(first);
    List<double[]> boxes =
        first.length >= k
            ? circleBoxes(lon, lat, first[k - 1])
            : List.of(new double[] {-180.0, -90.0, 180.0, 90.0});
    ExactBox c = new ExactBox();
    for (double[] b : boxes) {
      rect(s, c, b, false, true);
    }
    int n = c.kept.size();
    Integer[] order = new Integer[n];
    double[] dist = new double[n];
    for (int i = 0; i < n; i++) {
      double[] p = c.kept.get(i);
      dist[i] = haversineM(lon, lat, p[1], p[2]);
      order[i] = i;
    }
    Arrays.sort(
        order,
        (a, b) -> {
          int cmp = Double.compare(dist[a], dist[b]);
          return cmp != 0 ? cmp : Double.compare(c.kept.get(a)[0], c.kept.get(b)[0]);
        });
    int m = Math.min(k, n);
    double[] out = new double[2 * m];
    StoredFields stored = fetch ? s.storedFields() : null;
    for (int i = 0; i < m; i++) {
      int j = order[i];
      out[2 * i] = c.kept.get(j)[0];
      out[2 * i + 1] = dist[j];
      if (fetch) {
        String rec = stored.document(c.keptDocs.get(j)).get("rec");
        if (rec == null) {
          throw new IOException("document lacks its stored record");
        }
        sink += rec.length();
      }
    }
    return out;
  }

  static void queryPhase(IndexSearcher s, int phase, PrintWriter out) throws IOException {
    // Warm-up: the first `warmup` queries of every kind, both access paths, untimed.
    for (boolean fetch : new boolean[] {true, false}) {
      for (Sel sel : SELS) {
        for (int j = 0; j < Math.min(warmup, sel.rects.length); j++) {
          ExactBox c = new ExactBox();
          rect(s, c, sel.rects[j], fetch, false);
          sink += c.count + c.bytes;
        }
      }
      for (int j = 0; j < Math.min(warmup, knnPoints.length); j++) {
        sink += knn(s, knnPoints[j][0], knnPoints[j][1], fetch).length;
      }
      for (int j = 0; j < Math.min(warmup, radiusCentres.length); j++) {
        ExactCircle c = new ExactCircle();
        within(s, c, radiusCentres[j][0], radiusCentres[j][1], radiusM, fetch);
        sink += c.count + c.bytes;
      }
      for (int j = 0; j < joinWarmup(); j++) {
        ExactCircle c = new ExactCircle();
        spatialJoin(s, c, joinProbes[j], joinM, fetch);
        sink += c.count + c.bytes;
      }
    }
    for (boolean fetch : new boolean[] {true, false}) {
      int f = fetch ? 1 : 0;
      for (Sel sel : SELS) {
        long[] lat = new long[sel.rects.length];
        StringBuilder checks = new StringBuilder();
        long total = 0;
        for (int j = 0; j < sel.rects.length; j++) {
          ExactBox c = new ExactBox();
          long t = System.nanoTime();
          rect(s, c, sel.rects[j], fetch, false);
          lat[j] = System.nanoTime() - t;
          total += c.count;
          sink += c.bytes;
          if (j < check) {
            checks.append(' ').append(c.count).append(':').append(c.idSum);
          }
        }
        out.println("L " + phase + " " + f + " " + sel.label + " " + join(lat));
        out.println("T " + phase + " " + f + " " + sel.label + " " + total);
        out.println("C " + phase + " " + f + " " + sel.label + checks);
      }
      long[] lat = new long[knnPoints.length];
      for (int j = 0; j < knnPoints.length; j++) {
        long t = System.nanoTime();
        double[] top = knn(s, knnPoints[j][0], knnPoints[j][1], fetch);
        lat[j] = System.nanoTime() - t;
        if (j < check) {
          StringBuilder d = new StringBuilder("D " + phase + " " + f + " " + j);
          for (int i = 1; i < top.length; i += 2) {
            d.append(' ').append(top[i]);
          }
          out.println(d);
        }
      }
      out.println("L " + phase + " " + f + " knn " + join(lat));
      circles(
          phase,
          f,
          "radius",
          radiusCentres.length,
          check,
          out,
          (c, j) -> within(s, c, radiusCentres[j][0], radiusCentres[j][1], radiusM, fetch));
      circles(
          phase,
          f,
          "join",
          joinProbes.length,
          joinCheck,
          out,
          (c, j) -> spatialJoin(s, c, joinProbes[j], joinM, fetch));
    }
  }

  /** One query of a circle kind: adds the j-th query's hits to c. */
  @FunctionalInterface
  interface CircleQuery {
    void run(ExactCircle c, int j) throws IOException;
  }

  /** Times n queries of one circle kind (radius or join), one fresh collector each. */
  static void circles(
      int phase, int f, String kind, int n, int checks, PrintWriter out, CircleQuery q)
      throws IOException {
    long[] lat = new long[n];
    StringBuilder answers = new StringBuilder();
    long total = 0;
    for (int j = 0; j < n; j++) {
      ExactCircle c = new ExactCircle();
      long t = System.nanoTime();
      q.run(c, j);
      lat[j] = System.nanoTime() - t;
      total += c.count;
      sink += c.bytes;
      if (j < checks) {
        answers.append(' ').append(c.count).append(':').append(c.idSum);
      }
    }
    out.println("L " + phase + " " + f + " " + kind + " " + join(lat));
    out.println("T " + phase + " " + f + " " + kind + " " + total);
    out.println("C " + phase + " " + f + " " + kind + answers);
  }

  static String join(long[] v) {
    StringBuilder b = new StringBuilder(v.length * 8);
    for (int i = 0; i < v.length; i++) {
      if (i > 0) {
        b.append(' ');
      }
      b.append(v[i]);
    }
    return b.toString();
  }

  static long dirBytes(Path dir) throws IOException {
    try (Stream<Path> files = Files.list(dir)) {
      long sum = 0;
      for (Path p : (Iterable<Path>) files::iterator) {
        if (Files.isRegularFile(p)) {
          sum += Files.size(p);
        }
      }
      return sum;
    }
  }

  public static void main(String[] args) throws Exception {
    if (args.length != 4) {
      System.err.println(
          "usage: java -jar silt-lucene-peer.jar RECORDS.bin QUERIES.txt OUT.txt INDEX_DIR");
      System.exit(2);
    }
    Path records = Path.of(args[0]);
    readQueries(Path.of(args[1]));
    Path indexDir = Path.of(args[3]);
    Files.createDirectories(indexDir);
    try (PrintWriter out =
            new PrintWriter(Files.newBufferedWriter(Path.of(args[2]), StandardCharsets.UTF_8));
        Directory dir = FSDirectory.open(indexDir)) {
      out.println("M lucene_version " + Version.LATEST);
      out.println("M java_version " + System.getProperty("java.version"));
      out.println("M directory " + dir.getClass().getSimpleName());
      out.println("M radius_slack_m " + SLACK_M);
      out.println("M join_warmup " + joinWarmup());
      IndexWriterConfig cfg = new IndexWriterConfig();
      cfg.setOpenMode(IndexWriterConfig.OpenMode.CREATE);
      cfg.setRAMBufferSizeMB(64.0);
      try (IndexWriter w = new IndexWriter(dir, cfg)) {
        long t = System.nanoTime();
        long n = ingest(w, records);
        out.println("M ingest_ns " + (System.nanoTime() - t));
        out.println("M records " + n);
        t = System.nanoTime();
        w.commit();
        out.println("M commit_ns " + (System.nanoTime() - t));
        out.println("M disk_bytes_0 " + dirBytes(indexDir));
        try (DirectoryReader r = DirectoryReader.open(dir)) {
          out.println("M segments_0 " + r.leaves().size());
          IndexSearcher s = new IndexSearcher(r);
          s.setQueryCache(null);
          queryPhase(s, 0, out);
        }
        t = System.nanoTime();
        w.forceMerge(1);
        w.commit();
        out.println("M forcemerge_ns " + (System.nanoTime() - t));
        out.println("M disk_bytes_1 " + dirBytes(indexDir));
        try (DirectoryReader r = DirectoryReader.open(dir)) {
          out.println("M segments_1 " + r.leaves().size());
          IndexSearcher s = new IndexSearcher(r);
          s.setQueryCache(null);
          queryPhase(s, 1, out);
        }
      }
      Runtime rt = Runtime.getRuntime();
      out.println("M heap_used_bytes " + (rt.totalMemory() - rt.freeMemory()));
      out.println("M sink " + sink);
    }
  }
}
