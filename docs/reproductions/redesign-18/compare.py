"""Compare Silt's before/after benchmark CSVs: median over repetitions of each
(system, metric), ratio after/before. Usage: compare.py DIR_BEFORE DIR_AFTER WORKLOAD"""
import csv, glob, statistics, sys
def load(d, w):
    vals = {}
    for f in sorted(glob.glob(f"{d}/**/{w}.csv", recursive=True)):
        rows = [l for l in open(f) if not l.startswith('#')]
        for r in csv.DictReader(rows):
            if r['kind'] != 'measure': continue
            try: v = float(r['median'])
            except ValueError: continue
            vals.setdefault((r['system'], r['metric'], r['unit']), []).append(v)
    return vals
b, a = load(sys.argv[1], sys.argv[3]), load(sys.argv[2], sys.argv[3])
print(f"{'system':<22}{'metric':<34}{'unit':<8}{'before':>12}{'after':>12}{'after/before':>14}  n")
for k in sorted(set(b) & set(a)):
    if not k[0].startswith('silt'): continue
    mb, ma = statistics.median(b[k]), statistics.median(a[k])
    r = ma / mb if mb else float('nan')
    print(f"{k[0]:<22}{k[1]:<34}{k[2]:<8}{mb:>12.4g}{ma:>12.4g}{r:>14.3f}  {len(b[k])}/{len(a[k])}")
